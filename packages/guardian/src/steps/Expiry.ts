/**
 * The expiry sweeper: every reservation past its expiry (deadline plus margin) is resolved from
 * the chain, confirmed if its attestation was mined, released otherwise. It runs outside the
 * group committer, in a transaction of its own under the sender's account lock, because it reads
 * the chain first and no SQL transaction spans a chain read. An owner's approval asked again
 * under a new deadline resolves the earlier attestation's reservation the same way, at once,
 * once the chain is past its deadline (D45).
 *
 * @since 0.5.0
 */
import { Clock, Effect } from "effect"
import type { AuthorizeRequest } from "../Domain.ts"
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
      // The verdict is the chain's on the attestation read above: a reservation rewritten since
      // (an approval decided afresh, D45) is another attestation, left for its own verdict.
      if (current === undefined || current.status !== "reserved" || current.requestDigest !== reservation.requestDigest) return false
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
 * An owner's approval asked under another deadline than its transfer's reservation (the answer
 * to an earlier approval was lost, D45): that earlier attestation's reservation is resolved now,
 * as the sweep would resolve it later, once its deadline has passed: from the chain when the
 * guardian has an endpoint for it (mined, or never minable), else once it is due (deadline plus
 * margin), on time alone as the sweep does. The decision that follows then finds it released
 * and decides the approval afresh. A failure here is left to the sweep: the decision then finds
 * the reservation still held and refuses the approval for now.
 *
 * @since 0.9.0
 * @category steps
 */
export const resolveEarlierAttestation = Effect.fnUntraced(function*(context: GuardianContext, request: AuthorizeRequest, nowMs: number) {
  const transferId = request.transferId.toLowerCase()
  const found = yield* storage(context.store.findReservation(transferId, { forUpdate: false }))
  if (found === undefined || found.status !== "reserved" || found.deadline === request.deadline) return
  const resolvable = context.chain.knows(BigInt(found.chainId)) ? nowMs > Number(found.deadline) * 1000 : found.expiresAtMs <= nowMs
  if (!resolvable) return
  yield* resolveOne(context, transferId).pipe(
    Effect.catch((error) =>
      Effect.logWarning("an earlier attestation could not be resolved yet; the sweep will").pipe(
        Effect.annotateLogs({ transfer_id: transferId, reason: error.message })
      )
    )
  )
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
