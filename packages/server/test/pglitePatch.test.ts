/**
 * The pnpm patch of @effect/sql-pglite applies: the published build imports
 * `effect/unstable/...` (gone in effect 4.1) and omits `driver`. Without the
 * patch this module fails to load (ERR_MODULE_NOT_FOUND) and `driver` is undefined.
 */
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { pgliteLayer } from "../src/platform/Database.ts"

describe("@effect/sql-pglite patch", () => {
  it("leaves no effect/unstable import in the installed build", () => {
    const entry = createRequire(import.meta.url).resolve("@effect/sql-pglite")
    const dist = path.dirname(entry)
    for (const file of fs.readdirSync(dist).filter((f) => f.endsWith(".js"))) {
      assert.notInclude(fs.readFileSync(path.join(dist, file), "utf8"), "effect/unstable/", file)
    }
  })

  it.effect("loads with effect 4.1, reports driver 'pglite', and runs SQL with bigint read as text", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      assert.strictEqual(sql.driver, "pglite")
      const [row] = yield* sql<{ big: string }>`SELECT (9007199254740993)::bigint::text AS big`
      assert.strictEqual(row?.big, "9007199254740993")
    }).pipe(Effect.provide(pgliteLayer(undefined))), { timeout: 60_000 })
})
