/**
 * The session of a group transaction (internal/groupCommit.ts): `withHeldRows` provides the
 * rows the group holds (`HeldRows`, internal/store/context.ts) and writes the changed ones
 * before the commit; `writeRecords` writes the reservations, decisions and credit logs the
 * group recorded in memory, before the commit and before any SQL statement on those tables
 * inside it (`afterRecords`).
 */
import { Effect } from "effect"
import type { SqlError } from "effect/sql"
import {
  insertChainCreditRows,
  insertDecisionRows,
  insertReservationRows,
  updateBalances,
  updateKeyTotals,
  updateReservations
} from "./batches.ts"
import { HeldRows, heldRows, PrefetchOutdated, type StoreContext, type StoreSql } from "./context.ts"

/** A group's new rows of one table, each checked inserted (see `HeldRows`). */
const insertAll = <E>(
  context: StoreSql,
  what: string,
  entries: ReadonlyArray<E>,
  insert: (context: StoreSql, entries: ReadonlyArray<E>) => Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>
): Effect.Effect<void, SqlError.SqlError> =>
  entries.length === 0
    ? Effect.void
    : Effect.flatMap(insert(context, entries), (rows) => rows.length === entries.length ? Effect.void : Effect.die(new PrefetchOutdated({ what })))

/**
 * Writes the reservations, decisions and credit logs a group holds in memory (see `HeldRows`). A
 * unit run alone holds none (nothing prefetched): nothing to write. Built once per store, as
 * `StoreContext.writeRecords`.
 */
export const writeRecords = (context: StoreSql): Effect.Effect<void, SqlError.SqlError> =>
  Effect.gen(function*() {
    const held = yield* heldRows
    if (held === undefined) return
    const reservations = [...held.newReservations.values()]
    const decisions = [...held.newDecisions.entries()]
    const changes = [...held.reservationChanges.entries()]
    const credits = [...held.newChainCredits.values()]
    held.newReservations.clear()
    held.newDecisions.clear()
    held.reservationChanges.clear()
    held.newChainCredits.clear()
    yield* insertAll(context, "reservations", reservations, insertReservationRows)
    yield* insertAll(context, "decisions", decisions, insertDecisionRows)
    yield* updateReservations(context, changes)
    yield* insertAll(context, "chain credits", credits, insertChainCreditRows)
  })

/** A SQL statement on reservations, decisions or credit logs: what the group holds in memory is written first. */
export const afterRecords = <A, E>(context: StoreContext, statement: Effect.Effect<A, E>) =>
  Effect.andThen(context.writeRecords, statement)

/**
 * Runs `body` (a group's units, inside its transaction) holding the rows it locks, then
 * writes the changed ones: all balances in one statement, all key totals in another. A
 * failure writes nothing: the transaction rolls back.
 */
export const withHeldRows = <A, E, R>(context: StoreContext, body: Effect.Effect<A, E, R>) =>
  Effect.suspend(() => {
    const held: HeldRows["Service"] = {
      balances: new Map(),
      keyTotals: new Map(),
      reservations: new Map(),
      reservedIds: new Map(),
      decidedIds: new Map(),
      noncesTaken: new Map(),
      newReservations: new Map(),
      newDecisions: new Map(),
      reservationChanges: new Map(),
      creditsRecorded: new Map(),
      newChainCredits: new Map()
    }
    const flush = Effect.suspend(() =>
      Effect.all([
        updateBalances(context, [...held.balances.values()].filter((entry) => entry.written)),
        updateKeyTotals(context, [...held.keyTotals.values()].filter((entry) => entry.added > 0)),
        context.writeRecords
      ], { discard: true })
    )
    return body.pipe(Effect.tap(() => flush), Effect.provideService(HeldRows, held))
  })
