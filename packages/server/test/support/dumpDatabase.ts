/**
 * Every row of every table of the server's database, as text (bytea as hex):
 * what a database dump would show, for the tests that search it for secrets,
 * amounts and memos.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const dumpDatabase = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const tables = yield* sql<{ table_name: string }>`
    SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`
  const parts: Array<string> = []
  for (const { table_name } of tables) {
    const rows = yield* sql.unsafe<Record<string, unknown>>(`SELECT * FROM "${table_name}"`)
    for (const row of rows) {
      parts.push(JSON.stringify(row, (_key, value: unknown) =>
        value instanceof Uint8Array ? Buffer.from(value).toString("hex") : typeof value === "bigint" ? value.toString() : value))
    }
  }
  return parts.join("\n")
})
