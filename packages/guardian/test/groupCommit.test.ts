/**
 * The guardian's group committer (issue 16) keeps the guarantees of one transaction per
 * call: when one unit of a group fails, the group is rolled back and every unit runs again
 * alone, so the others still commit exactly once and the failing one leaves no write; and
 * once the committer has stopped, a call is answered as interrupted instead of waiting for
 * ever. Real PGlite, in memory.
 */
import { PGlite } from "@electric-sql/pglite"
import { PgliteClient } from "@effect/sql-pglite"
import { assert, describe, it } from "@effect/vitest"
import { Data, Deferred, Effect, Exit, Fiber, Option, Scope } from "effect"
import { SqlClient } from "effect/sql"
import { PreparedStatementPGlite } from "../src/EmbeddedDatabase.ts"
import { makeAtRestBox } from "../src/internal/atRest.ts"
import * as GroupCommit from "../src/internal/groupCommit.ts"
import { migrate } from "../src/internal/migrations.ts"
import { type AccountRef, makeStore, type RowHints } from "../src/internal/store.ts"

class Refused extends Data.TaggedError("Refused")<{ readonly id: number }> {}

const Sql = PgliteClient.layerFrom(
  Effect.gen(function*() {
    const pglite = yield* Effect.acquireRelease(
      Effect.promise(async () => {
        const db = new PGlite()
        await db.waitReady
        return db
      }),
      (db) => Effect.promise(() => db.close()).pipe(Effect.timeoutOption(5_000), Effect.ignore)
    )
    return yield* PgliteClient.fromClient({ liveClient: pglite })
  })
)

/** Counts how often each unit ran, so a test can tell a grouped run from a re-run alone. */
const runs = new Map<number, number>()

/** A unit that writes its row; unit `refusedId` fails after writing (its write must not stay). */
const unit = (sql: SqlClient.SqlClient, id: number, refusedId: number) =>
  Effect.gen(function*() {
    runs.set(id, (runs.get(id) ?? 0) + 1)
    yield* sql`INSERT INTO units (id) VALUES (${id})`
    if (id === refusedId) return yield* new Refused({ id })
    return id
  })

describe("group commit", () => {
  it.live("a failing unit rolls its group back; the others commit once, alone, and it leaves nothing", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE units (id int PRIMARY KEY)`
      runs.clear()
      const committer = yield* GroupCommit.make((body) => body)
      // The first call holds the committer until the next eight are queued, so they form one group.
      const latch = yield* Deferred.make<void>()
      const first = yield* Effect.forkChild(committer.run(Deferred.await(latch).pipe(Effect.andThen(unit(sql, 0, -1)))))
      const rest = yield* Effect.forkChild(
        Effect.forEach([1, 2, 3, 4, 5, 6, 7, 8], (id) => Effect.exit(committer.run(unit(sql, id, 5))), { concurrency: "unbounded" })
      )
      yield* Effect.sleep("300 millis")
      yield* Deferred.succeed(latch, undefined)
      assert.deepStrictEqual(yield* Fiber.join(first), 0)
      const exits = yield* Fiber.join(rest)
      for (const [index, exit] of exits.entries()) {
        const id = index + 1
        if (id === 5) assert.deepStrictEqual(Exit.findErrorOption(exit), Option.some(new Refused({ id: 5 })))
        else assert.deepStrictEqual(exit, Exit.succeed(id))
      }
      const rows = yield* sql<{ id: number }>`SELECT id FROM units ORDER BY id`
      assert.deepStrictEqual(rows.map((row) => row.id), [0, 1, 2, 3, 4, 6, 7, 8])
      // Units 1-5 ran in the group (which stopped at 5's failure and was rolled back), then each
      // unit ran alone: 6-8 only alone. Every committed row above was written once.
      assert.deepStrictEqual([1, 2, 3, 4, 5, 6, 7, 8].map((id) => runs.get(id)), [2, 2, 2, 2, 2, 1, 1, 1])
    }).pipe(Effect.scoped, Effect.provide(Sql)), 30_000)

  it.live("a call after the committer stopped is answered as interrupted, not left waiting", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE IF NOT EXISTS units (id int PRIMARY KEY)`
      const scope = yield* Scope.make()
      const committer = yield* GroupCommit.make((body) => body).pipe(Scope.provide(scope))
      assert.deepStrictEqual(yield* committer.run(Effect.succeed("before")), "before")
      yield* Scope.close(scope, Exit.void)
      const after = yield* committer.run(Effect.succeed("after")).pipe(Effect.exit, Effect.timeoutOption(5_000))
      assert.isTrue(after._tag === "Some", "answered within 5 s")
      if (after._tag === "Some") assert.isTrue(Exit.hasInterrupts(after.value), "answered as interrupted")
    }).pipe(Effect.scoped, Effect.provide(Sql)), 30_000)
})

describe("group commit with the store's prefetch", () => {
  /** The guardian's schema on a PGlite whose executed statements are counted. */
  const counted = new PreparedStatementPGlite()
  const CountedSql = PgliteClient.layerFrom(
    Effect.gen(function*() {
      yield* Effect.promise(() => counted.waitReady)
      return yield* PgliteClient.fromClient({ liveClient: counted })
    })
  )
  const chainId = "46630"
  const contract = "0x5fbdb2315678afecb367f032d93f642f64180aa3"
  const party = (index: number): AccountRef => ({ chainId, contract, account: `0x${index.toString(16).padStart(40, "0")}` })

  it.live("a group reads its hinted rows once, and each unit sees what the units before it wrote", () =>
    Effect.gen(function*() {
      yield* migrate
      const sql = yield* SqlClient.SqlClient
      const store = makeStore(sql, makeAtRestBox(new Uint8Array(32).fill(7)))
      const transferIds = Array.from({ length: 8 }, (_, index) => `0x${(index + 1).toString(16).padStart(64, "0")}`)
      // Eight reservations from eight senders to eight recipients, each sender holding 100.
      yield* sql.withTransaction(store.withHeldRows(Effect.forEach(transferIds, (transferId, index) =>
        Effect.gen(function*() {
          const sender = party(index)
          const balance = yield* store.lockBalance(sender)
          yield* store.lockBalance(party(100 + index))
          yield* store.writeBalance(sender, { ...balance, confirmed: 100n, reserved: 10n, owned: true })
          yield* store.insertReservation({
            transferId,
            chainId,
            contract,
            fromAccount: sender.account,
            toAccount: party(100 + index).account,
            kind: "confidential",
            nonce: BigInt(index),
            deadline: 2_000_000_000n,
            expiresAtMs: 2_000_000_000_000,
            amount: 10n,
            spendBucket: null,
            requestDigest: "digest",
            result: "{}",
            apiKeyId: null
          }, 0)
        }), { discard: true })))

      const committer = yield* GroupCommit.make<RowHints>(store.withHeldRows, store.prefetch)
      /** A settlement's shape: the reservation under its lock, both balances, the status written. */
      const settle = (transferId: string) =>
        Effect.gen(function*() {
          const reservation = yield* store.findReservation(transferId, { forUpdate: true })
          if (reservation === undefined || reservation.status !== "reserved") return "already"
          const sender = { chainId, contract, account: reservation.fromAccount }
          const recipient = { chainId, contract, account: reservation.toAccount }
          const senderBalance = yield* store.lockBalance(sender)
          const recipientBalance = yield* store.lockBalance(recipient)
          yield* store.writeBalance(sender, { ...senderBalance, confirmed: senderBalance.confirmed - 10n, reserved: senderBalance.reserved - 10n })
          yield* store.writeBalance(recipient, { ...recipientBalance, confirmed: recipientBalance.confirmed + 10n })
          yield* store.setReservationStatus(transferId, "confirmed", 1, { recipientCredited: true })
          return "settled"
        })

      // One group: the first call holds the committer until the rest are queued. Every transfer
      // is settled twice in the group (a retried settlement): the second must see the first's write.
      const latch = yield* Deferred.make<void>()
      const first = yield* Effect.forkChild(committer.run(Deferred.await(latch)))
      const before = counted.preparedStatistics.executions
      const settled = yield* Effect.forkChild(Effect.forEach(
        [...transferIds, ...transferIds],
        (transferId) => committer.run(settle(transferId), { reservations: [transferId] }),
        { concurrency: "unbounded" }
      ))
      yield* Effect.sleep("200 millis")
      yield* Deferred.succeed(latch, undefined)
      yield* Fiber.join(first)
      const outcomes = yield* Fiber.join(settled)
      const statements = counted.preparedStatistics.executions - before
      assert.deepStrictEqual(outcomes, [...transferIds.map(() => "settled"), ...transferIds.map(() => "already")])
      for (const index of transferIds.keys()) {
        assert.strictEqual((yield* store.readBalance(party(index))).confirmed, 90n)
        assert.strictEqual((yield* store.readBalance(party(100 + index))).confirmed, 10n, "credited once")
      }
      // BEGIN, the reservations' and the balances' reads, eight status writes, the eight
      // re-reads after them, the balances' write, COMMIT: without the prefetch each unit reads
      // its own reservation and two balances (8 x 3 reads instead of 2).
      assert.isAtMost(statements, 1 + 2 + 8 + 8 + 1 + 1, `${statements} statements`)
    }).pipe(Effect.scoped, Effect.provide(CountedSql)), 30_000)
})
