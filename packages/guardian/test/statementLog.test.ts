/**
 * The opt-in statement log (StatementLog.ts): statements are counted by their text with the time
 * inside PGlite and the calls that prepared them, written with mode 0600; a statement's values (here a canary) are never written;
 * without a log nothing is recorded.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { StatementLog } from "../src/index.ts"
import { PreparedStatementPGlite } from "../src/PreparedStatementPGlite.ts"

const canary = "canary-amount-7391.04"

describe("statement log", () => {
  it.live("counts each statement text's calls and time, writes no value, and only once started", () =>
    Effect.gen(function*() {
      const db = new PreparedStatementPGlite()
      yield* Effect.promise(() => db.waitReady)
      // Not started: the statement path asks for no clock and nothing is kept.
      assert.isUndefined(StatementLog.recorder())
      yield* Effect.promise(() => db.query("SELECT $1::text AS before_start", ["x"]))
      const directory = fs.mkdtempSync(path.join(os.tmpdir(), "pps-statementlog-"))
      const file = path.join(directory, "test-1.statements")
      const write = StatementLog.start(file)
      yield* Effect.promise(async () => {
        await db.query("SELECT $1::text AS memo,\n   length($1::text) AS size", [canary])
        await db.query("SELECT $1::text AS memo,\n   length($1::text) AS size", ["another"])
        await db.query("SELECT $1::int + 1 AS next", [41])
      })
      write()
      const text = fs.readFileSync(file, "utf8")
      assert.notInclude(text, canary)
      const rows = new Map(
        (JSON.parse(text) as Array<[string, number, number, number]>).map(([statement, calls, ms, prepares]) => [statement, { calls, ms, prepares }])
      )
      assert.deepStrictEqual([...rows.keys()].sort(), ["SELECT $1::int + 1 AS next", "SELECT $1::text AS memo, length($1::text) AS size"])
      assert.strictEqual(rows.get("SELECT $1::text AS memo, length($1::text) AS size")?.calls, 2)
      // Prepared at its first call only; the other statement, new too, at its one call.
      assert.strictEqual(rows.get("SELECT $1::text AS memo, length($1::text) AS size")?.prepares, 1)
      assert.strictEqual(rows.get("SELECT $1::int + 1 AS next")?.prepares, 1)
      assert.isAbove(rows.get("SELECT $1::int + 1 AS next")?.ms ?? 0, 0)
      assert.strictEqual(fs.statSync(file).mode & 0o777, 0o600)
      yield* Effect.promise(() => db.close())
      fs.rmSync(directory, { recursive: true, force: true })
    }), 30_000)
})
