/**
 * `settle`: the server reports a transfer's outcome. A confirmation is applied in the next
 * group's transaction (the debit, the recipient's credit); a failure releases the reservation,
 * but only once the chain says the attestation can never be mined (`chainVerdict`).
 *
 * @since 0.5.0
 */
import { Clock, Effect } from "effect"
import { getAddress } from "viem"
import { ReservationNotFound, type SettleRequest, type SettleResult } from "../Domain.ts"
import * as Invariant from "../internal/Invariant.ts"
import type { ReservationRow } from "../internal/store.ts"
import { applyConfirmed, applyLate, release } from "./Books.ts"
import { storage, storageFailure } from "./Failures.ts"
import type { GuardianContext } from "./GuardianContext.ts"

/** The rule a confirmation of a held reservation asserts: the reservation was checked against the balance when made. */
export const heldWithinConfirmed = "a held reservation is within its sender's confirmed balance"

/**
 * What the chain says about a reservation: mined (its nonce is used), never minable
 * (unused, and the chain's time is past the deadline), or not yet known.
 * Without an endpoint for the chain, the guardian's clock alone decides.
 * Judged at the block `GUARDIAN_CONFIRMATIONS` deep, as credits are booked: a shallower
 * reorganisation must not undo a verdict (a debit the new chain does not carry, or a
 * reservation released for a transfer a replacement block applies).
 *
 * @since 0.5.0
 * @category steps
 */
export const chainVerdict = Effect.fnUntraced(function*(context: GuardianContext, reservation: ReservationRow) {
  const { chain } = context
  const chainId = BigInt(reservation.chainId)
  if (!chain.knows(chainId)) return "expired_unverified" as const
  const head = yield* chain.headAtDepth(chainId, context.timing.chainConfirmations)
  const used = yield* chain.isNonceUsed(
    chainId,
    getAddress(reservation.contract),
    getAddress(reservation.fromAccount),
    reservation.nonce,
    head.blockNumber
  )
  if (used) return "mined" as const
  return head.timestampSeconds <= reservation.deadline ? ("undecided" as const) : ("expired" as const)
})

/**
 * The group's unit of a settlement: reads the reservation under its row lock and applies the
 * outcome. A failure was judged on the attestation `judged` names (its request digest): a
 * reservation rewritten since (an approval decided afresh, D45) holds another one, which stays.
 */
const settleLocked = Effect.fnUntraced(function*(
  context: GuardianContext,
  transferId: string,
  outcome: "confirmed" | "failed",
  nowMs: number,
  judged: string | undefined
) {
  const reservation = yield* context.store.findReservation(transferId, { forUpdate: true })
  if (reservation === undefined) return yield* new ReservationNotFound({ transferId })
  if (reservation.status === "reserved") {
    if (outcome === "failed") {
      if (judged !== reservation.requestDigest) return reservation.status
      yield* release(context, reservation, "failed", nowMs)
      return "failed" as const
    }
    const applied = yield* applyConfirmed(context, reservation, true, nowMs)
    yield* Invariant.check(applied !== "overdraw", heldWithinConfirmed)
    return "confirmed" as const
  }
  if (reservation.status === "expired" && outcome === "confirmed") {
    // The chain adapter saw the transfer mined (so before its deadline) but reports it
    // after the reservation expired: the chain is the truth, the books follow it.
    const applied = yield* applyLate(context, reservation, nowMs)
    if (applied === "overdraw") return "expired" as const
    yield* Effect.logWarning("late confirmation applied after expiry").pipe(Effect.annotateLogs("transfer_id", transferId))
    return "confirmed" as const
  }
  if (reservation.status !== outcome) {
    yield* Effect.logWarning("settle disagrees with the recorded outcome; the recorded one stands").pipe(
      Effect.annotateLogs({ transfer_id: transferId, recorded: reservation.status, asked: outcome })
    )
  }
  return reservation.status
})

/**
 * "failed" is the caller's word, and a reverted or unseen attestation stays valid until its
 * deadline: anyone holding its calldata can still get it mined. Releasing the reservation on
 * that word alone would let the sender spend the amount twice. With the chain at hand, a
 * failure counts only once the chain says the attestation can never be mined; before that
 * the reservation stays ("keep"), and the expiry sweeper decides it from the chain.
 */
const judgeFailure = Effect.fnUntraced(function*(context: GuardianContext, transferId: string) {
  const found = yield* storage(context.store.findReservation(transferId, { forUpdate: false }))
  if (found === undefined) return yield* new ReservationNotFound({ transferId })
  const judged = found.requestDigest
  if (found.status !== "reserved") return { outcome: "failed" as const, judged }
  const verdict = yield* chainVerdict(context, found)
  return { outcome: verdict === "mined" ? "confirmed" as const : verdict === "undecided" ? "keep" as const : "failed" as const, judged }
})

/**
 * @since 0.5.0
 * @category steps
 */
export const settle = Effect.fn("Guardian.settle")(function*(context: GuardianContext, request: typeof SettleRequest.Type) {
  const transferId = request.transferId.toLowerCase()
  const nowMs = yield* Clock.currentTimeMillis
  const { judged, outcome } = request.outcome === "failed"
    ? yield* judgeFailure(context, transferId)
    : { outcome: request.outcome, judged: undefined }
  if (outcome === "keep") {
    yield* Effect.logInfo("failure reported before the attestation's deadline: the reservation stays until the chain decides").pipe(
      Effect.annotateLogs({ transfer_id: transferId })
    )
    return { transferId, status: "reserved" } satisfies SettleResult
  }
  // A confirmation needs no read first (no chain verdict): `settleLocked` reads the
  // reservation under its row lock, in the next group's transaction.
  const status = yield* context.group.run(settleLocked(context, transferId, outcome, nowMs, judged), { reservations: [transferId] }).pipe(
    Effect.catchTag("SqlError", (error) => Effect.fail(storageFailure(error)))
  )
  yield* Effect.logDebug("settled").pipe(Effect.annotateLogs({ transfer_id: transferId, status }))
  return { transferId, status } satisfies SettleResult
})
