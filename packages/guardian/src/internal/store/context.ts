/**
 * What every step of the guardian's store runs over: the context `makeStore` builds once
 * (the SQL client and the at-rest box), and the rows a group transaction holds in memory
 * (`HeldRows`, provided per transaction by `withHeldRows`, internal/store/heldRows.ts).
 */
import { Context, Data, Effect, Option } from "effect"
import type { SqlClient, SqlError } from "effect/sql"
import type { AtRestBox } from "../atRest.ts"
import * as Invariant from "../Invariant.ts"
import type { AccountRef, BalanceRow, ChainCreditRow, DecisionRow, NewReservationRow, ReservationRow, ReservationStatus } from "./rows.ts"

/** What the store's statements run on: the SQL client, and the at-rest box that seals and opens amounts. */
export interface StoreSql {
  readonly sql: SqlClient.SqlClient
  readonly box: AtRestBox
}

/** The store's context: built once by `makeStore`, passed to every step. */
export interface StoreContext extends StoreSql {
  /**
   * Writes what the running group holds in memory (internal/store/heldRows.ts): built once, since
   * every statement on reservations, decisions or credit logs runs it first.
   */
  readonly writeRecords: Effect.Effect<void, SqlError.SqlError>
}

/** A balance row this transaction holds locked, with the value its units have written to it so far. */
export interface HeldBalance {
  readonly account: AccountRef
  balance: BalanceRow
  written: boolean
}

/** An API key's total row this transaction holds locked (D40), with the transfers added to it so far. */
export interface HeldKeyTotal {
  readonly account: AccountRef
  readonly apiKeyId: string
  total: bigint
  added: number
}

/** A reservation a group's unit recorded, kept in memory until the group's flush. */
export interface NewReservation {
  readonly reservation: NewReservationRow
  readonly nowMs: number
}

/** A decision a group's unit recorded, kept in memory until the group's flush. */
export interface NewDecision {
  readonly decision: DecisionRow
  readonly nowMs: number
}

/** A credit log a group's unit recorded, kept in memory until the group's flush. */
export interface NewChainCredit {
  readonly credit: ChainCreditRow
  readonly nowMs: number
}

/** A change to a reservation the group holds locked, kept in memory until the group's flush. */
export interface ReservationChange {
  readonly status: ReservationStatus
  /** Null: the change leaves `settled_at_ms` as it is (a recipient marked credited). */
  readonly settledAtMs: number | null
  readonly recipientCredited: boolean
}

/**
 * The rows a group transaction (internal/groupCommit.ts) has locked: balances and API-key
 * totals, by key. Once a unit of the group has locked a row, the row is this transaction's
 * until its commit, so the units after it read the held value instead of selecting it
 * again, and write to it in memory; `withHeldRows` writes each changed row once, before the
 * commit. Without `withHeldRows` the service is absent and every read and write is SQL. A unit
 * run alone has it too, but nothing prefetched: it holds the balances and key totals it locks
 * itself, and reads and writes its reservations and decisions by SQL.
 *
 * `reservations` are rows `prefetch` locked for the group's units, read before any of them
 * runs: a unit reads such a row from here, and a status a unit sets is set here and kept in
 * `reservationChanges` for the flush.
 *
 * The records of new decisions (the throughput work): `prefetch` reads, for the hinted ones, whether a
 * reservation or a decision exists under the transfer id and whether the sender's nonce is
 * taken (`reservedIds`, `decidedIds`, `noncesTaken`: what this transaction would read now).
 * A unit then checks and records a new reservation and decision in memory (`newReservations`,
 * `newDecisions`, and the three maps updated), and the flush inserts each table's new rows in
 * one statement. Rows are only ever added to these tables, so "exists" stays true; "absent"
 * can only turn false by another guardian process's commit, which the flush's insert meets as
 * a conflict: the group then fails as a whole and its units run alone, with plain SQL.
 * Every SQL statement on reservations or decisions inside a group first writes what is held
 * in memory (`writeRecords`), so SQL reads see it.
 *
 * Credit logs the chain follower books are recorded the same way (`creditsRecorded`,
 * `newChainCredits`): the prefetch reads which of the hinted (tx hash, log index) pairs are
 * recorded, a unit records a new one in memory, and the flush inserts them in one statement.
 * Before this a follower step ran two statements per log (the reservation under its lock, the
 * credit's insert); under load that was a third of the guardian's statements.
 */
export class HeldRows extends Context.Service<HeldRows, {
  readonly balances: Map<string, HeldBalance>
  readonly keyTotals: Map<string, HeldKeyTotal>
  readonly reservations: Map<string, ReservationRow>
  readonly reservedIds: Map<string, boolean>
  readonly decidedIds: Map<string, boolean>
  readonly noncesTaken: Map<string, boolean>
  readonly newReservations: Map<string, NewReservation>
  readonly newDecisions: Map<string, NewDecision>
  readonly reservationChanges: Map<string, ReservationChange>
  readonly creditsRecorded: Map<string, boolean>
  readonly newChainCredits: Map<string, NewChainCredit>
}>()("guardian/HeldRows") {}


/** The rows the running transaction's group holds, or undefined outside `withHeldRows`. */
export const heldRows = Effect.map(Effect.serviceOption(HeldRows), Option.getOrUndefined)

/**
 * Locks a row (`select` is a SELECT … FOR UPDATE), creating it first when missing. The
 * row exists on every call but an account's first, so the SELECT comes first: one
 * statement instead of an INSERT … ON CONFLICT DO NOTHING before every lock (the
 * throughput work).
 */
export const lockOrCreate = <Row>(
  select: Effect.Effect<ReadonlyArray<Row>, SqlError.SqlError>,
  /** Lazy: it seals a zero, wasted work when the row exists. */
  insert: () => Effect.Effect<unknown, SqlError.SqlError>
) =>
  Effect.gen(function*() {
    const found = (yield* select)[0]
    if (found !== undefined) return found
    yield* insert()
    return (yield* select)[0]
  })

/** Dies naming `invariant`, the rule the code's own logic guarantees and the state at hand breaks. */
export const broken = (invariant: string): Effect.Effect<never> => Effect.die(new Invariant.InvariantViolation({ invariant }))

/** Every row these writes change is locked by their transaction: a row a write missed is a broken invariant. */
export const everyHeldRow = (expected: number, what: string) => (written: ReadonlyArray<unknown>): Effect.Effect<void> =>
  Invariant.check(written.length === expected, `the ${what} a transaction holds locked stay until its write`)

/**
 * Another guardian process committed a row after the group's prefetch read it absent: the
 * in-memory checks could not see it. Not a broken invariant but the group's way out: it dies
 * with this, the group rolls back, and its units run alone with plain SQL (internal/groupCommit.ts),
 * so no caller ever sees it. Only a group reaches it: without a prefetch nothing is recorded in memory.
 */
export class PrefetchOutdated extends Data.TaggedError("PrefetchOutdated")<{ readonly what: string }> {
  override get message(): string {
    return `a group's ${this.what} met rows another transaction committed after its prefetch`
  }
}
