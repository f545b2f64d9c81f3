/**
 * Every row of every table of the server's database, as text (bytea as `\x` hex):
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
    // Each row as the database writes it in JSON (bytea as \x hex): every column type, the
    // driver's binary-only ones (xid8) included, reaches the text.
    const rows = yield* sql.unsafe<{ row: string }>(`SELECT row_to_json(t)::text AS row FROM "${table_name}" t`)
    for (const { row } of rows) parts.push(row)
  }
  return parts.join("\n")
})
