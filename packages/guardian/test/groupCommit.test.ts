/**
 * The guardian's group committer (docs/guardian.md) keeps the guarantees of one transaction per
 * call: when one unit of a group fails, the group is rolled back and every unit runs again
 * alone, so the others still commit exactly once and the failing one leaves no write; and
 * once the committer has stopped, a call is answered as interrupted instead of waiting for
 * ever. Real PGlite, in memory.
 */
import { PgClient } from "@effect/sql-pg"
import { PgliteClient } from "@effect/sql-pglite"
import { assert, describe, it } from "@effect/vitest"
import { Context, Data, Deferred, Effect, Exit, Fiber, Layer, Option, Redacted, Scope } from "effect"
import { SqlClient } from "effect/sql"
import { PreparedStatementPGlite } from "../src/EmbeddedDatabase.ts"
import { makeAtRestBox } from "../src/internal/atRest.ts"
import * as GroupCommit from "../src/internal/groupCommit.ts"
import { migrate } from "../src/internal/migrations.ts"
import { type AccountRef, makeStore, type RowHints, type Store } from "../src/internal/store.ts"
import { MemoryPglite } from "./support/memoryPglite.ts"
import { freshPostgresDatabase, postgresAvailable } from "./support/postgres.ts"

class Refused extends Data.TaggedError("Refused")<{ readonly id: number }> {}

const Sql = MemoryPglite

/** Counts how often each unit ran, so a test can tell a grouped run from a re-run alone. */
const runs = new Map<number, number>()

/**
 * Holds the committer with a unit of its own (once that unit runs, `then` after it) until `release`:
 * calls made meanwhile queue behind it and form the next group together.
 */
const holding = <H, A, E>(committer: GroupCommit.GroupCommit<H>, then: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const running = yield* Deferred.make<void>()
    const latch = yield* Deferred.make<void>()
    const fiber = yield* Effect.forkChild(
      committer.run(Deferred.succeed(running, undefined).pipe(Effect.andThen(Deferred.await(latch)), Effect.andThen(then)))
    )
    yield* Deferred.await(running)
    return { fiber, release: Deferred.succeed(latch, undefined) }
  })

/** The statements of `holding`'s own transaction (its BEGIN and COMMIT), counted beside the group's. */
const heldOwnStatements = 2

/**
 * Waits until `count` units are queued behind the held group, so that they form the next group
 * together (a fixed sleep could end before a loaded machine had queued them all).
 */
const queuedBehind = <H>(committer: GroupCommit.GroupCommit<H>, count: number) =>
  Effect.gen(function*() {
    while ((yield* committer.queued) < count) yield* Effect.sleep("5 millis")
  }).pipe(Effect.timeout("20 seconds"), Effect.orDie)

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
      const first = yield* holding(committer, unit(sql, 0, -1))
      const rest = yield* Effect.forkChild(
        Effect.forEach([1, 2, 3, 4, 5, 6, 7, 8], (id) => Effect.exit(committer.run(unit(sql, id, 5))), { concurrency: "unbounded" })
      )
      yield* queuedBehind(committer, 8)
      yield* first.release
      assert.deepStrictEqual(yield* Fiber.join(first.fiber), 0)
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

  /** The guardian's schema on the counted PGlite, its store, and a group committer over that store. */
  const ledger = Effect.gen(function*() {
    yield* migrate
    const sql = yield* SqlClient.SqlClient
    const box = makeAtRestBox(new Uint8Array(32).fill(7))
    const store = makeStore(sql, box)
    const committer = yield* GroupCommit.make<RowHints>(store.withHeldRows, store.prefetch)
    return { sql, box, store, committer }
  })

  it.live("a group reads its hinted rows once, and each unit sees what the units before it wrote", () =>
    Effect.gen(function*() {
      const { committer, sql, store } = yield* ledger
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
            apiKeyId: null,
            refundOf: null
          }, 0)
        }), { discard: true })))

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
      const before = counted.preparedStatistics.executions
      const first = yield* holding(committer, Effect.void)
      const settled = yield* Effect.forkChild(Effect.forEach(
        [...transferIds, ...transferIds],
        (transferId) => committer.run(settle(transferId), { reservations: [transferId] }),
        { concurrency: "unbounded" }
      ))
      yield* queuedBehind(committer, 2 * transferIds.length)
      yield* first.release
      yield* Fiber.join(first.fiber)
      const outcomes = yield* Fiber.join(settled)
      const statements = counted.preparedStatistics.executions - before - heldOwnStatements
      assert.deepStrictEqual(outcomes, [...transferIds.map(() => "settled"), ...transferIds.map(() => "already")])
      for (const index of transferIds.keys()) {
        assert.strictEqual((yield* store.readBalance(party(index))).confirmed, 90n)
        assert.strictEqual((yield* store.readBalance(party(100 + index))).confirmed, 10n, "credited once")
      }
      // BEGIN, the reservations' and the balances' reads, the balances' write, the statuses'
      // write, COMMIT: without the prefetch each unit reads its own reservation and two
      // balances (8 x 3 reads instead of 2), and writes its status (8 writes instead of 1).
      assert.strictEqual(statements, 6, `${statements} statements`)
      const rows = yield* sql<{ status: string; recipient_credited: boolean; settled_at_ms: string }>`
        SELECT status, recipient_credited, settled_at_ms::text AS settled_at_ms FROM guardian_reservations
        WHERE ${sql.in("transfer_id", transferIds)}`
      assert.deepStrictEqual(rows, transferIds.map(() => ({ status: "confirmed", recipient_credited: true, settled_at_ms: "1" })))
    }).pipe(Effect.scoped, Effect.provide(CountedSql)), 30_000)

  /** A new decision's shape: the sender locked, its records checked, a reservation and a decision recorded. */
  const decide = (store: Store, transferId: string, sender: AccountRef, nonce: bigint, digest: string) =>
    Effect.gen(function*() {
      const balance = yield* store.lockBalance(sender)
      const before = yield* store.recordedBefore(transferId, sender, nonce)
      if (before.reserved) {
        const existing = yield* store.findReservation(transferId, { forUpdate: false })
        return existing?.requestDigest === digest ? "replayed" : "transfer_id_reused"
      }
      if (before.nonceTaken) return "nonce_reused"
      if (balance.confirmed - balance.reserved < 10n) return "insufficient"
      const inserted = yield* store.insertReservation({
        transferId,
        chainId,
        contract,
        fromAccount: sender.account,
        toAccount: party(999).account,
        kind: "confidential",
        nonce,
        deadline: 2_000_000_000n,
        expiresAtMs: 2_000_000_000_000,
        amount: 10n,
        spendBucket: null,
        requestDigest: digest,
        result: "{}",
        apiKeyId: null,
        refundOf: null
      }, 5)
      if (!inserted) return "race"
      yield* store.writeBalance(sender, { ...balance, reserved: balance.reserved + 10n })
      if (!(yield* store.insertDecision(transferId, { requestDigest: digest, held: false, redecisions: 0 }, 5))) return "race"
      return "reserved"
    })

  /** Funds `senders` with 30 each (three decisions of 10), outside any group. */
  const fund = (store: Store, sql: SqlClient.SqlClient, senders: ReadonlyArray<AccountRef>) =>
    sql.withTransaction(store.withHeldRows(Effect.forEach(senders, (sender) =>
      Effect.gen(function*() {
        const balance = yield* store.lockBalance(sender)
        yield* store.writeBalance(sender, { ...balance, confirmed: 30n, owned: true })
      }), { discard: true })))

  /** Runs the calls as one group: the first call holds the committer until the rest are queued. */
  const inOneGroup = <A, E>(committer: GroupCommit.GroupCommit<RowHints>, calls: ReadonlyArray<Effect.Effect<A, E>>) =>
    Effect.gen(function*() {
      const before = counted.preparedStatistics.executions
      const first = yield* holding(committer, Effect.void)
      const rest = yield* Effect.forkChild(Effect.all(calls, { concurrency: "unbounded" }))
      yield* queuedBehind(committer, calls.length)
      yield* first.release
      yield* Fiber.join(first.fiber)
      const outcomes = yield* Fiber.join(rest)
      return { outcomes, statements: counted.preparedStatistics.executions - before - heldOwnStatements }
    })

  const id = (n: number) => `0x${n.toString(16).padStart(64, "0")}`

  it.live("a group checks and records its new decisions in memory, one statement per table, and sees its own records", () =>
    Effect.gen(function*() {
      const { committer, sql, store } = yield* ledger
      const senders = [party(200), party(201), party(202)]
      yield* fund(store, sql, senders)
      const call = (transferId: string, sender: AccountRef, nonce: bigint, digest = "d") =>
        committer.run(decide(store, transferId, sender, nonce, digest), {
          balances: [sender],
          decisions: [{ transferId, sender, nonce }]
        })
      const [a, b, c] = senders as [AccountRef, AccountRef, AccountRef]
      const { outcomes, statements } = yield* inOneGroup(committer, [
        call(id(201), a, 1n),
        call(id(202), b, 1n),
        // The same transfer id again (a twin), and under another request.
        call(id(201), a, 1n),
        call(id(201), a, 1n, "other"),
        // Another transfer id under a nonce a unit before it took.
        call(id(203), a, 1n),
        // Four decisions of 10 from a sender holding 30: the fourth is refused.
        call(id(204), c, 1n),
        call(id(205), c, 2n),
        call(id(206), c, 3n),
        call(id(207), c, 4n)
      ])
      assert.deepStrictEqual(outcomes, [
        "reserved",
        "reserved",
        "replayed",
        "transfer_id_reused",
        "nonce_reused",
        "reserved",
        "reserved",
        "reserved",
        "insufficient"
      ])
      // BEGIN; the balances' and the records' reads; the twin's reservation read, which writes
      // the records held so far first (2 inserts) and then reads (1); the second twin's read (1,
      // nothing held to write); the balances', reservations' and decisions' writes; COMMIT. Per
      // unit, it would be three statements each.
      assert.strictEqual(statements, 1 + 2 + 3 + 1 + 3 + 1, `${statements} statements`)
      const reservations = yield* sql<{ transfer_id: string; nonce: string; status: string; created_at_ms: string }>`
        SELECT transfer_id, nonce, status, created_at_ms::text AS created_at_ms FROM guardian_reservations
        WHERE ${sql.in("transfer_id", [201, 202, 203, 204, 205, 206, 207].map(id))} ORDER BY transfer_id`
      assert.deepStrictEqual(reservations.map((row) => [row.transfer_id, row.nonce, row.status, row.created_at_ms]), [
        [id(201), "1", "reserved", "5"],
        [id(202), "1", "reserved", "5"],
        [id(204), "1", "reserved", "5"],
        [id(205), "2", "reserved", "5"],
        [id(206), "3", "reserved", "5"]
      ])
      const decisions = yield* sql<{ transfer_id: string }>`
        SELECT transfer_id FROM guardian_decisions WHERE ${sql.in("transfer_id", [201, 202, 203, 204, 205, 206, 207].map(id))}
        ORDER BY transfer_id`
      assert.deepStrictEqual(decisions.map((row) => row.transfer_id), [id(201), id(202), id(204), id(205), id(206)])
      assert.deepStrictEqual((yield* store.readBalance(c)).reserved, 30n)
      // The amounts were sealed on their way in: the reservation opens as 10.
      assert.strictEqual((yield* store.findReservation(id(205), { forUpdate: false }))?.amount, 10n)
    }).pipe(Effect.scoped, Effect.provide(CountedSql)), 30_000)

  it.live("a sender with no balance row yet, beside a twin recorded in memory: its unit reads by SQL and finds the twin", () =>
    Effect.gen(function*() {
      const { committer, sql, store } = yield* ledger
      const funded = party(400)
      const unknown = party(401)
      yield* fund(store, sql, [funded])
      const call = (sender: AccountRef, digest: string) =>
        committer.run(decide(store, id(401), sender, 1n, digest), {
          balances: [sender],
          decisions: [{ transferId: id(401), sender, nonce: 1n }]
        })
      // The first unit records transfer 401 in memory; the second's sender has no row to lock in
      // the prefetch, so it checks by SQL, which first writes what the group holds.
      const { outcomes } = yield* inOneGroup(committer, [call(funded, "first"), call(unknown, "second")])
      assert.deepStrictEqual(outcomes, ["reserved", "transfer_id_reused"])
      const rows = yield* sql<{ from_account: string }>`SELECT from_account FROM guardian_reservations WHERE transfer_id = ${id(401)}`
      assert.deepStrictEqual(rows.map((row) => row.from_account), [funded.account])
    }).pipe(Effect.scoped, Effect.provide(CountedSql)), 30_000)

  it.live("a settlement and a credit mark of one held reservation, in either order, write its status, mark and time once", () =>
    Effect.gen(function*() {
      const { committer, sql, store } = yield* ledger
      const [a, b, c] = [party(500), party(501), party(502)]
      yield* fund(store, sql, [a, b, c])
      // Three reservations, outside any group; the third expired at 3 (its settled_at_ms).
      for (const [index, sender] of [a, b, c].entries()) {
        assert.strictEqual(yield* committer.run(decide(store, id(501 + index), sender, 1n, "d")), "reserved")
      }
      yield* sql.withTransaction(store.withHeldRows(store.setReservationStatus(id(503), "expired", 3)))
      const settle = (transferId: string) => committer.run(store.setReservationStatus(transferId, "confirmed", 7), { reservations: [transferId] })
      const mark = (transferId: string) => committer.run(store.markRecipientCredited(transferId), { reservations: [transferId] })
      const { statements } = yield* inOneGroup(committer, [settle(id(501)), mark(id(501)), mark(id(502)), settle(id(502)), mark(id(503))])
      const rows = yield* sql<{ transfer_id: string; status: string; recipient_credited: boolean; settled_at_ms: string | null }>`
        SELECT transfer_id, status, recipient_credited, settled_at_ms::text AS settled_at_ms FROM guardian_reservations
        WHERE ${sql.in("transfer_id", [id(501), id(502), id(503)])} ORDER BY transfer_id`
      assert.deepStrictEqual(rows.map((row) => [row.status, row.recipient_credited, row.settled_at_ms]), [
        ["confirmed", true, "7"],
        ["confirmed", true, "7"],
        // A mark alone keeps the status and the time the expiry wrote.
        ["expired", true, "3"]
      ])
      // BEGIN, the reservations' and their parties' balances' reads, one UPDATE of the three, COMMIT.
      assert.strictEqual(statements, 5, `${statements} statements`)
    }).pipe(Effect.scoped, Effect.provide(CountedSql)), 30_000)

  it.live("a record another transaction committed after the group's prefetch fails the group; its units then run alone", () =>
    Effect.gen(function*() {
      const { box, committer, sql, store } = yield* ledger
      const [a, b] = [party(300), party(301)]
      // Sealed as the store seals a reservation's amount (bound to its transfer id), so that it opens.
      const sealed = box.seal(10n, `pps/guardian/v1/reservation/${id(301)}`)
      yield* fund(store, sql, [a, b])
      runs.clear()
      // Unit 0 stands for another guardian process: it writes the reservation of transfer 301 by
      // plain SQL, after the group's prefetch read it as absent. Unit 1 decides transfer 301
      // from what the prefetch read: only the flush's insert can find the row.
      const other = Effect.gen(function*() {
        runs.set(0, (runs.get(0) ?? 0) + 1)
        yield* sql`
          INSERT INTO guardian_reservations (transfer_id, chain_id, contract, from_account, to_account, kind, nonce, deadline,
            expires_at_ms, amount_sealed, request_digest, result, status, created_at_ms)
          VALUES (${id(301)}, ${chainId}, ${contract}, ${b.account}, ${a.account}, 'confidential', '9', 1, 1, ${sealed},
            'elsewhere', '{}', 'reserved', 1)`
        return "other"
      })
      const mine = decide(store, id(301), a, 1n, "d").pipe(Effect.tap(() => Effect.sync(() => runs.set(1, (runs.get(1) ?? 0) + 1))))
      const { outcomes } = yield* inOneGroup(committer, [
        committer.run(other),
        committer.run(mine, { balances: [a], decisions: [{ transferId: id(301), sender: a, nonce: 1n }] }),
        committer.run(decide(store, id(302), a, 2n, "d"), { balances: [a], decisions: [{ transferId: id(302), sender: a, nonce: 2n }] })
      ])
      // In the group, unit 1 recorded 301 in memory; the flush met the row, the group rolled back,
      // and alone unit 1 found the other transaction's reservation; transfer 302 committed alone.
      assert.deepStrictEqual(outcomes, ["other", "transfer_id_reused", "reserved"])
      assert.deepStrictEqual([runs.get(0), runs.get(1)], [2, 2])
      const rows = yield* sql<{ transfer_id: string; request_digest: string }>`
        SELECT transfer_id, request_digest FROM guardian_reservations WHERE ${sql.in("transfer_id", [id(301), id(302)])}
        ORDER BY transfer_id`
      assert.deepStrictEqual(rows.map((row) => [row.transfer_id, row.request_digest]), [[id(301), "elsewhere"], [id(302), "d"]])
      assert.strictEqual((yield* store.readBalance(a)).reserved, 10n)
    }).pipe(Effect.scoped, Effect.provide(CountedSql)), 30_000)

  /** A booked transfer-in log's shape (the chain follower's): the reservation, the credit recorded once, the recipient credited. */
  const bookTransferIn = (store: Store, log: { readonly transferId: string; readonly txHash: string; readonly logIndex: number }) =>
    Effect.gen(function*() {
      const reservation = yield* store.findReservation(log.transferId, { forUpdate: true })
      if (reservation === undefined) return "unmatched"
      const recorded = yield* store.insertChainCredit({
        chainId,
        txHash: log.txHash,
        logIndex: log.logIndex,
        contract,
        account: reservation.toAccount,
        kind: "transfer_in",
        transferId: log.transferId,
        blockNumber: 1n,
        outcome: reservation.recipientCredited ? "already_booked" : "booked"
      }, 9)
      if (!recorded) return "duplicate"
      if (reservation.recipientCredited) return "already_booked"
      const recipient = { chainId, contract, account: reservation.toAccount }
      const balance = yield* store.lockBalance(recipient)
      yield* store.writeBalance(recipient, { ...balance, confirmed: balance.confirmed + reservation.amount, owned: true })
      yield* store.markRecipientCredited(log.transferId)
      return "booked"
    })

  /** One follower unit over `logs`, hinted as the guardian hints it. */
  const followerUnit = (store: Store, logs: ReadonlyArray<{ readonly transferId: string; readonly txHash: string; readonly logIndex: number }>) =>
    [
      Effect.forEach(logs, (log) => bookTransferIn(store, log)),
      {
        reservations: logs.map((log) => log.transferId),
        credits: logs.map((log) => ({ chainId, txHash: log.txHash, logIndex: log.logIndex }))
      }
    ] as const

  const txHash = (n: number) => `0x${n.toString(16).padStart(64, "a")}`

  it.live("a follower's unit alone reads its logs' rows once and records their credits in one statement; read again, it books nothing twice", () =>
    Effect.gen(function*() {
      const { committer, sql, store } = yield* ledger
      const senders = [party(700), party(701), party(702), party(703)]
      yield* fund(store, sql, senders)
      for (const [index, sender] of senders.entries()) {
        assert.strictEqual(yield* committer.run(decide(store, id(701 + index), sender, 1n, "d")), "reserved")
      }
      // The fourth transfer's recipient was credited before its log arrived (by settle). The
      // recipient's row exists, as it does once an account has received (a first one is created
      // by its unit, by SQL).
      yield* sql.withTransaction(store.withHeldRows(store.markRecipientCredited(id(704))))
      yield* sql.withTransaction(store.withHeldRows(store.lockBalance(party(999))))
      const recipientBefore = (yield* store.readBalance(party(999))).confirmed
      const logs = [0, 1, 2, 3].map((index) => ({ transferId: id(701 + index), txHash: txHash(700 + index), logIndex: index }))
      // The first log twice in one range: its second sighting is the same (tx hash, log index).
      const [unit, hint] = followerUnit(store, [...logs, logs[0]!])
      const before = counted.preparedStatistics.executions
      assert.deepStrictEqual(yield* committer.run(unit, hint), ["booked", "booked", "booked", "already_booked", "duplicate"])
      // BEGIN; the reservations', their parties' balances' and the credits' reads; the balances',
      // reservations' and credits' writes; COMMIT. Unhinted it was two to four statements a log.
      const statements = counted.preparedStatistics.executions - before
      assert.strictEqual(statements, 8, `${statements} statements`)
      assert.strictEqual((yield* store.readBalance(party(999))).confirmed - recipientBefore, 30n, "three credits of 10, the fourth's left to settle")
      const rows = yield* sql<{ tx_hash: string; log_index: number; outcome: string; created_at_ms: string }>`
        SELECT tx_hash, log_index, outcome, created_at_ms::text AS created_at_ms FROM guardian_chain_credits
        WHERE ${sql.in("tx_hash", logs.map((log) => log.txHash))} ORDER BY log_index`
      assert.deepStrictEqual(rows.map((row) => [row.tx_hash, row.log_index, row.outcome, row.created_at_ms]), [
        [txHash(700), 0, "booked", "9"],
        [txHash(701), 1, "booked", "9"],
        [txHash(702), 2, "booked", "9"],
        [txHash(703), 3, "already_booked", "9"]
      ])
      // The range read again (a crash between the booking and its cursor's move): every log is known.
      const [again, againHint] = followerUnit(store, logs)
      const beforeAgain = counted.preparedStatistics.executions
      assert.deepStrictEqual(yield* committer.run(again, againHint), ["duplicate", "duplicate", "duplicate", "duplicate"])
      const statementsAgain = counted.preparedStatistics.executions - beforeAgain
      assert.strictEqual(statementsAgain, 5, `${statementsAgain} statements: BEGIN, three reads, COMMIT`)
      assert.strictEqual((yield* store.readBalance(party(999))).confirmed - recipientBefore, 30n)
      assert.isTrue(yield* store.chainCreditRecorded(chainId, txHash(703), 3))
    }).pipe(Effect.scoped, Effect.provide(CountedSql)), 30_000)

  it.live("a credit another transaction recorded after the group's prefetch fails the group; alone, the follower's unit finds it", () =>
    Effect.gen(function*() {
      const { committer, sql, store } = yield* ledger
      const sender = party(800)
      yield* fund(store, sql, [sender])
      assert.strictEqual(yield* committer.run(decide(store, id(801), sender, 1n, "d")), "reserved")
      const recipientBefore = (yield* store.readBalance(party(999))).confirmed
      const log = { transferId: id(801), txHash: txHash(800), logIndex: 0 }
      runs.clear()
      // Unit 0 stands for another guardian process booking the same log by plain SQL, after the
      // group's prefetch read it as unrecorded.
      const other = Effect.gen(function*() {
        runs.set(0, (runs.get(0) ?? 0) + 1)
        yield* sql`
          INSERT INTO guardian_chain_credits (chain_id, tx_hash, log_index, contract, account, kind, transfer_id, block_number,
            outcome, created_at_ms)
          VALUES (${chainId}, ${log.txHash}, 0, ${contract}, ${party(999).account}, 'transfer_in', ${log.transferId}, 1, 'booked', 1)`
        return "other"
      })
      const [unit, hint] = followerUnit(store, [log])
      const { outcomes } = yield* inOneGroup<unknown, unknown>(committer, [committer.run(other), committer.run(unit, hint)])
      // In the group the unit recorded the credit in memory and credited the recipient; the flush's
      // insert met the row, the group rolled back, and alone the unit found the log recorded.
      assert.deepStrictEqual(outcomes, ["other", ["duplicate"]])
      assert.strictEqual(runs.get(0), 2)
      assert.strictEqual((yield* store.readBalance(party(999))).confirmed, recipientBefore, "not credited")
      const rows = yield* sql<{ created_at_ms: string }>`
        SELECT created_at_ms::text AS created_at_ms FROM guardian_chain_credits WHERE tx_hash = ${log.txHash}`
      assert.deepStrictEqual(rows.map((row) => row.created_at_ms), ["1"])
    }).pipe(Effect.scoped, Effect.provide(CountedSql)), 30_000)

  it.live.skipIf(!postgresAvailable)("on PostgreSQL, a twin another connection commits after the prefetch fails the group at its flush; alone, the unit finds it", () =>
    Effect.gen(function*() {
      const url = Redacted.make(yield* freshPostgresDatabase)
      // Two pools on one database: the group's, and another guardian process's.
      const mine = Context.get(yield* Layer.build(PgClient.layer({ url })), SqlClient.SqlClient)
      const theirs = Context.get(yield* Layer.build(PgClient.layer({ url })), SqlClient.SqlClient)
      yield* migrate.pipe(Effect.provideService(SqlClient.SqlClient, mine))
      const box = makeAtRestBox(new Uint8Array(32).fill(7))
      const store = makeStore(mine, box)
      const theirStore = makeStore(theirs, box)
      const [a, b] = [party(600), party(601)]
      yield* fund(store, mine, [a])
      yield* fund(theirStore, theirs, [b])
      const committer = yield* GroupCommit.make<RowHints>(store.withHeldRows, store.prefetch).pipe(
        Effect.provideService(SqlClient.SqlClient, mine)
      )
      const inGroup = yield* Deferred.make<void>()
      const committed = yield* Deferred.make<void>()
      let decisions = 0
      // Unit 0 holds the group (after its prefetch) until the other connection has committed.
      const hold = Effect.andThen(Deferred.succeed(inGroup, undefined), Deferred.await(committed))
      const mineDecides = decide(store, id(601), a, 1n, "mine").pipe(Effect.tap(() => Effect.sync(() => decisions++)))
      const hint = { balances: [a], decisions: [{ transferId: id(601), sender: a, nonce: 1n }] }
      const group = yield* Effect.forkChild(inOneGroup(committer, [committer.run(Effect.as(hold, "held")), committer.run(mineDecides, hint)]))
      yield* Deferred.await(inGroup)
      // The other process reserves transfer 601 for its own sender, and commits.
      assert.strictEqual(yield* theirs.withTransaction(theirStore.withHeldRows(decide(theirStore, id(601), b, 9n, "theirs"))), "reserved")
      yield* Deferred.succeed(committed, undefined)
      const { outcomes } = yield* Fiber.join(group)
      // In the group the unit recorded 601 in memory (the prefetch found it absent); the flush met
      // the committed row, the group rolled back, and alone the unit found the other's reservation.
      assert.deepStrictEqual(outcomes, ["held", "transfer_id_reused"])
      assert.strictEqual(decisions, 2)
      const rows = yield* mine<{ request_digest: string }>`SELECT request_digest FROM guardian_reservations WHERE transfer_id = ${id(601)}`
      assert.deepStrictEqual(rows.map((row) => row.request_digest), ["theirs"])
      assert.strictEqual((yield* store.readBalance(a)).reserved, 0n)
    }).pipe(Effect.scoped, Effect.provide(CountedSql)), 60_000)
})
