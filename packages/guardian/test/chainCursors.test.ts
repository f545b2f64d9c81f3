/**
 * The chain follower's cursor moves commit without waiting for the disk (the logs of a move lost in
 * a crash are read again and booked once): PostgreSQL's flush position stays behind its insert
 * position after one, and the next commit that waits syncs it. Inside a caller's transaction the
 * move commits as that transaction does. Real PGlite, in memory (the positions move as on disk).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { makeAtRestBox } from "../src/internal/atRest.ts"
import { migrate } from "../src/internal/migrations.ts"
import { makeStore } from "../src/internal/store.ts"
import { MemoryPglite } from "./support/memoryPglite.ts"

/** Whether WAL is written that has not reached the disk yet. */
const unsynced = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql<{ readonly unsynced: boolean }>`
    SELECT pg_current_wal_insert_lsn() > pg_current_wal_flush_lsn() AS unsynced`
  return row?.unsynced === true
})

describe("chain cursors", () => {
  it.layer(MemoryPglite)((it) => {
    it.effect("move without waiting for the disk; the next commit that waits syncs the move", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* migrate
        const store = makeStore(sql, makeAtRestBox(new Uint8Array(32).fill(7)))
        yield* store.startCursor("46630", "0x5fbdb2315678afecb367f032d93f642f64180aa3", 10n, 1)
        assert.isFalse(yield* unsynced, "a cursor's start waits")

        yield* store.advanceCursor("46630", "0x5fbdb2315678afecb367f032d93f642f64180aa3", 20n, 2)
        assert.isTrue(yield* unsynced, "its move does not")
        assert.strictEqual(yield* store.cursor("46630", "0x5fbdb2315678afecb367f032d93f642f64180aa3"), 20n)

        yield* store.startCursor("46630", "0x0000000000000000000000000000000000000001", 5n, 3)
        assert.isFalse(yield* unsynced, "the next commit that waits syncs the move with it")

        yield* sql.withTransaction(store.advanceCursor("46630", "0x5fbdb2315678afecb367f032d93f642f64180aa3", 30n, 4))
        assert.isFalse(yield* unsynced, "inside a transaction it commits as the transaction does")
        assert.strictEqual(yield* store.cursor("46630", "0x5fbdb2315678afecb367f032d93f642f64180aa3"), 30n)
      }))
  })
})
