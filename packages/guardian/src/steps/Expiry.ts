/**
 * The expiry sweeper: every reservation past its expiry (deadline plus margin) is resolved from
 * the chain, confirmed if its attestation was mined, released otherwise. It runs outside the
 * group committer, in a transaction of its own under the sender's account lock, because it reads
 * the chain first and no SQL transaction spans a chain read.
 *
 * @since 0.5.0
 */
import { Clock, Effect } from "effect"
import * as Invariant from "../internal/Invariant.ts"
import { applyConfirmed, release } from "./Books.ts"
import { storage } from "./Failures.ts"
import { type GuardianContext, senderOf } from "./GuardianContext.ts"
import { chainVerdict, heldWithinConfirmed } from "./Settle.ts"

/** Reservations resolved per sweep step; the rest wait for the next step. */
const sweepBatchMax = 100

/** Resolves one due reservation; answers whether it changed it. */
const resolveOne = Effect.fnUntraced(function*(context: GuardianContext, transferId: string) {
  const { sql, store } = context
  const reservation = yield* storage(store.findReservation(transferId, { forUpdate: false }))
  if (reservation === undefined || reservation.status !== "reserved") return false
  const verdict = yield* chainVerdict(context, reservation)
  if (verdict === "undecided") return false
  const nowMs = yield* Clock.currentTimeMillis
  const resolved = yield* storage(context.accountLane.alone(
    senderOf(reservation),
    sql.withTransaction(Effect.gen(function*() {
      const current = yield* store.findReservation(transferId, { forUpdate: true })
      if (current === undefined || current.status !== "reserved") return false
      if (verdict === "mined") {
        const applied = yield* applyConfirmed(context, current, true, nowMs)
        yield* Invariant.check(applied !== "overdraw", heldWithinConfirmed)
      } else {
        yield* release(context, current, "expired", nowMs)
      }
      return true
    }))
  ))
  if (resolved) {
    const log = verdict === "expired_unverified" ? Effect.logWarning : Effect.logInfo
    yield* log(verdict === "mined" ? "unsettled reservation confirmed from the chain" : "reservation expired").pipe(
      Effect.annotateLogs({ transfer_id: transferId, verdict })
    )
  }
  return resolved
})

/**
 * Resolves every reservation past its expiry (at most `sweepBatchMax` a step); answers how many changed.
 *
 * @since 0.5.0
 * @category steps
 */
export const resolveDueReservations = (context: GuardianContext) =>
  Effect.gen(function*() {
    const nowMs = yield* Clock.currentTimeMillis
    const due = yield* storage(context.store.dueReservations(nowMs, sweepBatchMax))
    let resolved = 0
    for (const transferId of due) {
      // One chain failure must not keep the other reservations from expiring.
      const outcome = yield* Effect.result(resolveOne(context, transferId))
      if (outcome._tag === "Success" && outcome.success) resolved++
    }
    return resolved
  }).pipe(Effect.withSpan("Guardian.resolveDueReservations"))
