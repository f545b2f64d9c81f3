/**
 * The guardian's open alerts are listed oldest first by the instant each was raised, a number:
 * `since_ms` is selected as text, so an ORDER BY on its alias would sort "10" before "9" (the
 * EventStore's ordering bug of 2026-11-29, and the same shape here). Real PGlite, in memory.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { makeAtRestBox } from "../src/internal/atRest.ts"
import { migrate } from "../src/internal/migrations.ts"
import { MemoryPglite } from "./support/memoryPglite.ts"
import { type AccountRef, makeStore } from "../src/internal/store.ts"

const Sql = MemoryPglite

const party = (index: number): AccountRef => ({
  chainId: "46630",
  contract: "0x5fbdb2315678afecb367f032d93f642f64180aa3",
  account: `0x${index.toString(16).padStart(40, "0")}`
})

describe("guardian alerts", () => {
  it.layer(Sql)((it) => {
    it.effect("are listed oldest first by the instant raised, compared as numbers", () =>
      Effect.gen(function*() {
        yield* migrate
        const store = makeStore(yield* SqlClient.SqlClient, makeAtRestBox(new Uint8Array(32).fill(7)))
        // Raised at 100, 99, 10 and 9 ms: as text they would sort 10, 100, 9, 99.
        for (const [index, sinceMs] of [100, 99, 10, 9].entries()) {
          yield* store.raiseAlert(party(index), "balance_mismatch", "test", sinceMs)
        }
        const listed = yield* store.listAlerts(10)
        assert.deepStrictEqual(listed.map((alert) => alert.sinceMs), [9, 10, 99, 100])
      }))
  })
})
