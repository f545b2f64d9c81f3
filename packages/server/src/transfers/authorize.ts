/**
 * Step 3, authorize, and the record it leads to: the guardian's decision on a sealed transfer
 * and, when it attests, the transfer's record (record.ts). This is the one place a transfer is
 * attested and recorded, for a new transfer and for an approved held one alike.
 *
 * The guardian opens its box, computes the ciphertext, checks an agent's limits, the balance and
 * the approval threshold, reserves, and signs the attestation, or answers a policy violation
 * (403), insufficient balance (402), or "hold for approval" (nothing reserved or signed). An
 * attested transfer is then co-signed by the sender's custodial wallet (D51: the contract needs
 * both signatures) before it is recorded, so the recorded call is the one every resubmission sends.
 *
 * @since 0.1.0
 */
import { Attestation } from "@pps/crypto"
import { type Domain as GuardianDomain, SpanLog } from "@pps/guardian"
import { Clock, DateTime, Effect } from "effect"
import { bytesToHex, concatHex, type Hex, hexToBytes, keccak256 } from "viem"
import {
  InsufficientBalance,
  InvalidRequest,
  PolicyViolation,
  PreparedTransferUsed,
  RefundExceedsOriginal,
  ServiceUnavailable
} from "@pps/api/Errors"
import { transferReached } from "../observability/Metrics.ts"
import { InvariantViolation } from "../platform/Invariant.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import { confidentialTransferCall, type DebitSignatures, publicTransferCall } from "../settlement/calls.ts"
import type { SubmissionRequest } from "../settlement/domain.ts"
import type { PreparedTransfer, TransfersContext } from "./context.ts"
import { rotationUnfinished } from "./keyRefusal.ts"
import { recordOf, type RecordWrite } from "./record.ts"
import { transferIdBytes32, transferSubmission } from "./submission.ts"

/**
 * What the authorize step ends with: recorded (the attested call to submit), held for the
 * owner's approval (the amount the guardian read, sealed to the owner's key), or, for an owner's
 * approval only, not decided again (D45): an earlier attestation of it can still be mined until
 * `liveUntil` (unix seconds, when the guardian said), or its re-decisions are used up.
 *
 * @since 0.1.0
 * @category models
 */
export type Authorization =
  | { readonly _tag: "Recorded"; readonly submission: SubmissionRequest }
  | { readonly _tag: "Hold"; readonly sealedAmount: Hex }
  | {
    readonly _tag: "ApprovalRefused"
    readonly reason: "earlier_attestation_live" | "redecisions_exhausted"
    readonly liveUntil: bigint | null
  }

/**
 * The guardian's decision on a sealed transfer and, when it attests, `write`: the transfer row,
 * its `transfer.initiated` events and its chain submission (the attested call, `recorded`,
 * signed by the submit step once this commits).
 *
 * Not interruptible: once the guardian is asked, its decision commits there whether or
 * not this request is still wanted (a reservation under the transfer's id), so a client
 * that hangs up must not cut the step between that decision and the row that records
 * it, or the reservation would hold the sender's funds until its deadline with no
 * transfer to settle it, and the client's retry would find them gone (402). The wait is
 * bounded by the guardian client's timeout.
 *
 * @since 0.1.0
 */
export const authorizeAndRecord = <E>(
  context: TransfersContext,
  prepared: PreparedTransfer,
  deadlineSeconds: bigint,
  agent: GuardianDomain.AuthorizeRequest["agent"],
  write: RecordWrite<E>
) =>
  Effect.gen(function*() {
    yield* transferReached("created", prepared.mode)
    const decision = yield* askGuardian(context, authorizeRequest(prepared, deadlineSeconds, agent))
    return yield* recordDecision(context, prepared, decision, write)
  }).pipe(Effect.uninterruptible)

/**
 * What follows the guardian's decision: a rotation cut off is told apart, a hold or refusal
 * answered, an attestation co-signed and recorded with `write`. The caller keeps the decision and
 * this step together (uninterruptible), as `authorizeAndRecord` does and an actor's turn does
 * for each transfer of the turn (senderTurn.ts).
 *
 * @since 0.11.0
 */
export const recordDecision = <E>(
  context: TransfersContext,
  prepared: PreparedTransfer,
  decision: GuardianDomain.AuthorizeResult,
  write: RecordWrite<E>
) =>
  Effect.gen(function*() {
    yield* rotationUnfinished(context, prepared, decision)
    const authorized = yield* authorizedOrHold(prepared, decision)
    if (authorized._tag === "Hold") return yield* Effect.as(transferReached("held", prepared.mode), authorized)
    if (authorized._tag !== "Authorized") return authorized
    const callData = yield* attestedCall(context, prepared, authorized)
    const submission = transferSubmission({
      transferId: prepared.transferId,
      mode: prepared.mode,
      confidential: prepared.confidential,
      contract: prepared.contract,
      callData,
      deadlineSeconds: authorized.deadline,
      sender: prepared.senderAddress,
      nonce: prepared.nonce
    })
    const { events, transfer } = recordOf(prepared, {
      deadlineSeconds: authorized.deadline,
      ciphertext: JSON.stringify(authorized.ciphertext),
      createdAt: DateTime.formatIso(DateTime.makeUnsafe(yield* Clock.currentTimeMillis))
    })
    yield* write(transfer, events, submission).pipe(Unavailable.database("Transfers.record"), SpanLog.stage("Transfers.record"))
    yield* transferReached("authorized", prepared.mode)
    return { _tag: "Recorded", submission } satisfies Authorization
  })

/**
 * The guardian's request for a sealed transfer.
 *
 * @since 0.11.0
 */
export const authorizeRequest = (
  prepared: PreparedTransfer,
  deadlineSeconds: bigint,
  agent: GuardianDomain.AuthorizeRequest["agent"]
): GuardianDomain.AuthorizeRequest => ({
  transferId: prepared.bindingId,
  chainId: BigInt(prepared.chainId),
  contract: prepared.contract,
  kind: prepared.confidential ? "confidential" : "public",
  from: prepared.senderAddress,
  to: prepared.recipient.address,
  fromKey: bytesToHex(prepared.fromKey),
  ...(prepared.confidential
    ? { toKey: bytesToHex(prepared.toKey!), sealedDigest: prepared.sealedDigest }
    : { amount: prepared.publicAmount! }),
  nonce: prepared.nonce,
  deadline: deadlineSeconds,
  guardianNote: bytesToHex(prepared.boxes.guardian),
  apiKey: prepared.apiKeyId,
  ...(agent === undefined ? {} : { agent }),
  ...(prepared.refundOf === null ? {} : { refundOf: transferIdBytes32(prepared.refundOf) })
})

/** The guardian's answer; its outage (or a call it did not answer) is 503, retry later. */
const askGuardian = (context: TransfersContext, request: GuardianDomain.AuthorizeRequest) =>
  context.guardian.authorize(request).pipe(Effect.catch(guardianUnavailable))

/**
 * The guardian could not answer: logged (the failure names no amount), 503 to the client.
 *
 * @since 0.11.0
 */
export const guardianUnavailable = (error: GuardianDomain.GuardianError) =>
  Effect.logError("guardian unavailable", error).pipe(Effect.andThen(Effect.fail(ServiceUnavailable.of())))

/** The guardian's attestation, its hold, or an approval it does not decide again; every other answer as the API's error. */
const authorizedOrHold = (
  prepared: PreparedTransfer,
  decision: GuardianDomain.AuthorizeResult
): Effect.Effect<GuardianDomain.Authorized | Exclude<Authorization, { readonly _tag: "Recorded" }>, RefusalError> => {
  switch (decision._tag) {
    case "Authorized":
      return Effect.succeed(decision)
    case "InsufficientBalance":
      return Effect.andThen(transferReached("refused", prepared.mode), Effect.fail(InsufficientBalance.of()))
    case "PolicyViolation":
      return Effect.andThen(transferReached("refused", prepared.mode), Effect.fail(PolicyViolation.of(decision.reason)))
    case "RefundExceeded":
      return Effect.andThen(
        transferReached("refused", prepared.mode),
        Effect.fail(RefundExceedsOriginal.of(prepared.refundOf ?? prepared.transferId))
      )
    case "HoldForApproval":
      return Effect.succeed({ _tag: "Hold", sealedAmount: decision.sealedAmount as Hex } as const)
    case "Refused":
      if (decision.reason === "earlier_attestation_live" || decision.reason === "redecisions_exhausted") {
        return Effect.succeed({ _tag: "ApprovalRefused", reason: decision.reason, liveUntil: decision.liveUntil ?? null } as const)
      }
      return refusal(prepared, decision.reason)
  }
}

type RefusalError =
  | InsufficientBalance
  | PolicyViolation
  | RefundExceedsOriginal
  | InvalidRequest
  | PreparedTransferUsed
  | ServiceUnavailable

/**
 * A refusal as the API answers it. A client-sealed box that does not open is the client's
 * mistake (400). A frozen account (books disagree with the chain) is a state that passes: 503,
 * retry later; so is a server-sealed transfer id the guardian decided under another request
 * (a twin it had to refuse), and a refund's original the guardian has not settled yet (D43).
 * Any other refusal is a fault of our own request.
 */
const refusal = (prepared: PreparedTransfer, reason: GuardianDomain.RefusedReason) => {
  if (prepared.clientSealed && (reason === "note_invalid" || reason === "amount_zero")) {
    return Effect.fail(InvalidRequest.of(
      reason === "amount_zero"
        ? "The sealed amount must be above 0."
        : "`sealed.guardian` does not open as the guardian's note for this prepared transfer (wrong key, binding or format).",
      { param: "sealed.guardian" }
    ))
  }
  if (prepared.clientSealed && reason === "transfer_id_reused") return Effect.fail(PreparedTransferUsed.of(prepared.transferId))
  // A refund (D43) is asked once its original is confirmed here and settled with the guardian
  // (refund.ts): an original the guardian does not have as confirmed means its books and ours
  // disagree about it (a settlement lost on the way), which the recovery round mends.
  if (reason === "refund_original_unknown") {
    return Effect.logError("guardian does not know a refund's original as confirmed").pipe(
      Effect.annotateLogs({ transfer_id: prepared.transferId, refund_of: prepared.refundOf ?? "" }),
      Effect.andThen(Effect.fail(ServiceUnavailable.of()))
    )
  }
  if (reason === "account_frozen" || reason === "transfer_id_reused" || reason === "refund_original_unsettled") {
    return Effect.logWarning("guardian refused a transfer for now").pipe(
      Effect.annotateLogs({ transfer_id: prepared.transferId, reason }),
      Effect.andThen(Effect.fail(ServiceUnavailable.of()))
    )
  }
  return Effect.logError("guardian refused a transfer").pipe(
    Effect.annotateLogs({ transfer_id: prepared.transferId, reason }),
    Effect.andThen(Effect.die(
      new InvariantViolation({
        invariant: "the guardian refuses a server-sealed transfer only for a frozen account or a reused transfer id",
        cause: `guardian refused: ${reason}`
      })
    ))
  )
}

/**
 * The typed data the sender signs: what the contract will hash from the call we build, from our
 * own transfer and the guardian's ciphertext points (the same fields the guardian attested; if
 * the guardian attested anything else, one of the two signatures fails on chain).
 */
const senderTypedData = (prepared: PreparedTransfer, authorized: GuardianDomain.Authorized): Attestation.TypedData => {
  const { ciphertext } = authorized
  // C ‖ D_from (‖ D_to) ‖ D_guardian, as the contract hashes the call's points.
  const points = [ciphertext.commitment, ciphertext.fromHandle, ...(prepared.confidential ? [ciphertext.toHandle!] : []), ciphertext.guardianHandle]
  const ciphertextDigest = keccak256(concatHex(points as Array<Hex>))
  const domain = Attestation.domain(BigInt(prepared.chainId), prepared.contract)
  const common = {
    from: prepared.senderAddress,
    to: prepared.recipient.address,
    transferId: prepared.bindingId,
    nonce: prepared.nonce,
    ciphertextDigest,
    deadline: authorized.deadline
  }
  return prepared.confidential
    ? Attestation.confidentialTransfer(domain, { ...common, sealedDigest: prepared.sealedDigest })
    : Attestation.publicTransfer(domain, { ...common, amount: prepared.publicAmount! })
}

/**
 * The attested call: the contract's confidential or public transfer with the guardian's
 * attestation and the sender's own signature over the same typed data, made with its custodial
 * wallet key (an agent's own wallet for an agent). The guardian never holds that key.
 */
const attestedCall = (context: TransfersContext, prepared: PreparedTransfer, authorized: GuardianDomain.Authorized) =>
  context.accounts.signTransfer(prepared.sender.accountId, senderTypedData(prepared, authorized)).pipe(
    Unavailable.database("Transfers.coSign"),
    Effect.map((account) => callWith(prepared, authorized, { guardian: authorized.signature as Hex, account }))
  )

const callWith = (prepared: PreparedTransfer, authorized: GuardianDomain.Authorized, signatures: DebitSignatures): Hex => {
  const { ciphertext } = authorized
  return prepared.confidential
    ? confidentialTransferCall({
      from: prepared.senderAddress,
      to: prepared.recipient.address,
      transferId: prepared.bindingId,
      nonce: prepared.nonce,
      ciphertext: {
        commitment: hexToBytes(ciphertext.commitment as Hex),
        fromHandle: hexToBytes(ciphertext.fromHandle as Hex),
        toHandle: hexToBytes(ciphertext.toHandle! as Hex),
        guardianHandle: hexToBytes(ciphertext.guardianHandle as Hex)
      },
      sealedDigest: prepared.sealedDigest,
      deadlineSeconds: authorized.deadline
    }, signatures)
    : publicTransferCall({
      from: prepared.senderAddress,
      to: prepared.recipient.address,
      transferId: prepared.bindingId,
      nonce: prepared.nonce,
      amount: prepared.publicAmount!,
      commitment: hexToBytes(ciphertext.commitment as Hex),
      fromHandle: hexToBytes(ciphertext.fromHandle as Hex),
      guardianHandle: hexToBytes(ciphertext.guardianHandle as Hex),
      deadlineSeconds: authorized.deadline
    }, signatures)
}
