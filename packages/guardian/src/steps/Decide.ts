/**
 * Deciding an authorization: the unit the group committer runs for it, under the sender's
 * balance row lock (SELECT … FOR UPDATE), in the group's transaction. A retry replays the
 * recorded decision; a different request under a decided transfer id is refused unless it is
 * an owner's approval of a held transfer; otherwise the request is evaluated (Evaluate.ts) and
 * its decision recorded. An approval attested before under another deadline is decided afresh
 * once that attestation's reservation was released, and refused while it can still be mined
 * (D45). A party under a key rotation's hold gets nothing decided (`RotationHeld`, D55).
 * Re-runnable, as a unit must be: its only writes are SQL.
 *
 * @since 0.5.0
 */
import { Effect, Schema } from "effect"
import { Authorized, type AuthorizeRequest, type AuthorizeResult, Refused, type RefusedReason } from "../Domain.ts"
import type { AccountRef, DecisionRow, ReservationRow } from "../internal/store.ts"
import { alert } from "./Alerts.ts"
import { decisionDigest } from "./Digests.ts"
import { evaluate } from "./Evaluate.ts"
import type { GuardianContext } from "./GuardianContext.ts"
import { heldByRotation, RotationHeld } from "./KeyRotation.ts"
import { type KeyCheck, keysForgottenSince } from "./PartyKeys.ts"
import type { Prepared } from "./Prepare.ts"
import { TransferIdRace } from "./Reserve.ts"

/**
 * How many different requests may re-decide a held transfer: each is an owner's approval
 * (D27), which re-checks under the policy in force and a fresh deadline, and may fail (402, a
 * limit) and be tried again. Enough for an owner's real attempts over a 24 h window; few enough
 * that a caller replaying a held box with invented policies learns a handful of bits, not its
 * amount (docs/security.md).
 */
const approvalDecisionsMax = 8

const decodeAuthorized = Schema.decodeUnknownSync(Authorized)

/** Idempotent per transfer id: the same request replays the recorded decision. */
const replay = (existing: ReservationRow, digest: string, transferId: string): AuthorizeResult =>
  existing.requestDigest === digest
    ? decodeAuthorized(JSON.parse(existing.result))
    : new Refused({ transferId, reason: "transfer_id_reused" })

/** A request refused as such still replays a decision recorded under its transfer id. */
const refuse = (context: GuardianContext, transferId: string, digest: string, reason: RefusedReason) =>
  Effect.map(
    context.store.findReservation(transferId, { forUpdate: false }),
    (existing): AuthorizeResult => existing === undefined ? new Refused({ transferId, reason }) : replay(existing, digest, transferId)
  )

/**
 * What a reservation already recorded under the transfer id answers: the same request replays
 * it. An owner's approval of a held transfer under another request (a fresh deadline: the answer
 * to the first was lost, D45) is decided afresh once the reservation was released: with an
 * endpoint for the chain, the expiry sweep and `settle` release one only when the chain says its
 * attestation can never be mined (without one, on time or on the server's word). Either way the
 * fresh attestation takes the same nonce, so the contract applies at most one of the two. While
 * it is still reserved, the approval is refused until its deadline. Anything else is refused.
 * Undefined: decide afresh.
 */
const answerOfReservation = (
  existing: ReservationRow,
  request: AuthorizeRequest,
  decided: DecisionRow | undefined,
  digest: string,
  sender: AccountRef
): AuthorizeResult | undefined => {
  const transferId = existing.transferId
  if (existing.requestDigest === digest || request.agent?.approved !== true || decided?.held !== true) {
    return replay(existing, digest, transferId)
  }
  if (existing.status === "reserved") {
    return new Refused({ transferId, reason: "earlier_attestation_live", liveUntil: existing.deadline })
  }
  const sameNonce = existing.nonce === request.nonce && existing.chainId === sender.chainId &&
    existing.contract === sender.contract && existing.fromAccount === sender.account
  return existing.status === "confirmed" || !sameNonce ? replay(existing, digest, transferId) : undefined
}

/**
 * One decision per transfer id (a box is bound to it): another request is refused unless it is
 * an owner's approval of a held transfer, a few times at most. Otherwise a caller holding a box
 * could ask about it under policy after policy and binary-search its amount. Answers the
 * refusal, or undefined when the re-decision may go on.
 */
const refuseRedecision = Effect.fnUntraced(function*(
  context: GuardianContext,
  request: AuthorizeRequest,
  sender: AccountRef,
  decided: DecisionRow,
  nowMs: number
) {
  const transferId = request.transferId.toLowerCase()
  const approval = request.agent?.approved === true && decided.held
  if (approval && decided.redecisions < approvalDecisionsMax) return undefined
  yield* alert(
    context,
    sender,
    "decision_conflict",
    approval
      ? `transfer ${transferId} was approved under ${approvalDecisionsMax} different requests already; refused`
      : `transfer ${transferId} was asked about with a request other than the one decided; refused`,
    nowMs
  )
  return new Refused({ transferId, reason: approval ? "redecisions_exhausted" : "transfer_id_reused" })
})

/** Records a decision under its transfer id: which request, whether held, how many re-decisions. */
const record = Effect.fnUntraced(function*(
  context: GuardianContext,
  transferId: string,
  outcome: AuthorizeResult,
  decidedUnder: string,
  decided: DecisionRow | undefined,
  nowMs: number
) {
  const row: DecisionRow = {
    requestDigest: decidedUnder,
    held: outcome._tag === "HoldForApproval" || decided?.held === true,
    redecisions: (decided?.redecisions ?? 0) + (decided !== undefined && decided.requestDigest !== decidedUnder ? 1 : 0)
  }
  if (decided !== undefined) yield* context.store.updateDecision(transferId, row, nowMs)
  else if (!(yield* context.store.insertDecision(transferId, row, nowMs))) return yield* new TransferIdRace()
  return outcome
})

/**
 * Decides `request` (already prepared and its keys checked) in the group's transaction.
 *
 * @since 0.5.0
 * @category steps
 */
export const decide = Effect.fnUntraced(function*(
  context: GuardianContext,
  request: AuthorizeRequest,
  prepared: Prepared | RefusedReason,
  keyCheck: KeyCheck | RefusedReason,
  digest: string,
  nowMs: number
) {
  const { store } = context
  const transferId = request.transferId.toLowerCase()
  if (typeof prepared === "string") return yield* refuse(context, transferId, digest, prepared)
  if (typeof keyCheck === "string") return yield* refuse(context, transferId, digest, keyCheck)
  // D55: checked in the unit, so a rotation's hold placed before it runs is seen, and one placed
  // after it sees the reservation this unit records (KeyRotation.ts); and a rotation that came and
  // went while the keys were checked made that check stale (PartyKeys.ts). Nothing is read or written.
  if (heldByRotation(context, request, nowMs) || keysForgottenSince(context.partyKeys, request, keyCheck.generation)) {
    return new RotationHeld()
  }
  const { sender } = prepared
  const balance = yield* store.lockBalance(sender)
  // Read under the sender's lock, as the nonce's check always was; the rows themselves only
  // when they exist (a retry, an approval): a new transfer id costs this one statement.
  const before = yield* store.recordedBefore(transferId, sender, request.nonce)
  const existing = before.reserved ? yield* store.findReservation(transferId, { forUpdate: false }) : undefined
  const replayed = existing !== undefined && existing.requestDigest === digest
  const decided = before.decided && !replayed ? yield* store.findDecision(transferId) : undefined
  if (existing !== undefined) {
    const answer = answerOfReservation(existing, request, decided, digest, sender)
    if (answer !== undefined) return answer
  }
  if (balance.frozenReason !== null) return new Refused({ transferId, reason: "account_frozen" })
  // The same request is decided again (a retry; the balance may have changed since).
  const decidedUnder = decisionDigest(context.keys.atRestKey, request, digest)
  if (decided !== undefined && decided.requestDigest !== decidedUnder) {
    const conflict = yield* refuseRedecision(context, request, sender, decided, nowMs)
    if (conflict !== undefined) return conflict
  }
  // A released reservation of this transfer id holds the nonce: the fresh decision rewrites it.
  const nonce = existing !== undefined ? "released" : before.nonceTaken ? "taken" : "free"
  const outcome = yield* evaluate(context, request, prepared, keyCheck, digest, nonce, nowMs, balance)
  // Refusals of the request itself say nothing about the amount: only decisions are recorded.
  if (outcome._tag === "Refused") return outcome
  return yield* record(context, transferId, outcome, decidedUnder, decided, nowMs)
})
