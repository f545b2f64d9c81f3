/**
 * Step 5, submit: settlement signs and broadcasts a recorded transfer's attested call, and the
 * request waits up to `TRANSFER_CREATE_TIMEOUT_MS` (D14) for its outcome: `confirmed`, or
 * `pending` and the rest happens in the background (the outcome stream, complete.ts).
 *
 * @since 0.1.0
 */
import { SpanLog } from "@pps/guardian"
import { Effect, Option } from "effect"
import { bytesToHex, getAddress } from "viem"
import * as Invariant from "../platform/Invariant.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import { confidentialTokenOf } from "../settlement/Chains.ts"
import type { SubmissionRequest } from "../settlement/domain.ts"
import { complete } from "./complete.ts"
import type { TransfersContext } from "./context.ts"
import { transferSubmission } from "./submission.ts"
import type { StoredTransfer } from "./TransferStore.ts"

/**
 * Submits the recorded call and waits up to the create timeout (D14); the transfer as it stands
 * then. Step 5 of a create and of an approval alike.
 *
 * @since 0.1.0
 */
export const submitAndAwait = Effect.fnUntraced(function*(
  context: TransfersContext,
  transferId: string,
  submission: SubmissionRequest
) {
  yield* context.settlement.submitRecorded(submission).pipe(Effect.catch((error) =>
    // Recorded and attested: the recovery round submits it; the client sees `pending`.
    Effect.logWarning("submission failed; will retry").pipe(
      Effect.annotateLogs({ transfer_id: transferId, error: String(error) })
    )
  ))
  const outcome = yield* context.settlement.awaitResolution(transferId, context.config.transferCreateTimeoutMs).pipe(
    Unavailable.database("Transfers.awaitOutcome"),
    SpanLog.stage("Transfers.awaitOutcome")
  )
  const ended = Option.isSome(outcome)
    ? yield* complete(context, outcome.value).pipe(SpanLog.stage("Transfers.complete"))
    : Option.none()
  if (Option.isSome(ended)) return ended.value
  return yield* recordedTransfer(context, transferId)
})

/**
 * A transfer this process recorded (its record step committed).
 *
 * @since 0.1.0
 */
export const recordedTransfer = (context: TransfersContext, transferId: string) =>
  context.store.findById(transferId).pipe(
    Unavailable.database("Transfers.read"),
    Effect.flatMap(Invariant.some("a recorded transfer's row exists (transfers are never deleted)"))
  )

/**
 * Submits a recorded transfer's attested call again; a no-op when it was submitted already.
 * A failed submission is logged and left to the next recovery round.
 *
 * @since 0.1.0
 */
export const resubmit = Effect.fnUntraced(function*(context: TransfersContext, t: StoredTransfer) {
  const call = yield* context.store.attestedCall(t.transfer_id).pipe(Unavailable.database("Transfers.resubmit"))
  const chain = context.settlement.chain(t.mode)
  // No call left: its submission is final (the outcome completes the transfer), the only way
  // a row of this version lacks one, since its submission commits with it (record.ts).
  if (Option.isNone(call) || Option.isNone(chain) || call.value.length === 0) return
  const sender = yield* context.accounts.get(t.sender_account_id).pipe(
    Unavailable.database("Transfers.resubmit"),
    Effect.flatMap(Invariant.some("a transfer's sender account exists (accounts are never deleted)"))
  )
  yield* context.settlement.submit(transferSubmission({
    transferId: t.transfer_id,
    mode: t.mode,
    confidential: t.confidential,
    contract: confidentialTokenOf(chain.value, t.asset),
    callData: bytesToHex(call.value),
    deadlineSeconds: BigInt(t.deadline_seconds),
    sender: getAddress(sender.walletAddress),
    nonce: BigInt(t.replay_nonce)
  })).pipe(Effect.catch((error) => Effect.logWarning("resubmission failed; will retry", error)))
})
