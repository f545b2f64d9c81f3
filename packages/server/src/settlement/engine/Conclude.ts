/**
 * Confirm or fail: turns what the chain says about a tracked submission into its final outcome
 * (`Confirmed`, `Failed` reverted or expired), or leaves it tracked while the chain can still
 * change its mind (not deep enough, or reverted with its attestation still valid).
 *
 * Why apart: a broadcast told its nonce is spent, a watcher round and the recovery after a
 * restart all conclude the same way; D14 (failed moves no funds) is decided here only.
 *
 * @since 0.5.0
 */
import { Effect, Option } from "effect"
import type { TransactionReceipt } from "viem"
import type { FailureReason } from "../domain.ts"
import { appliedElsewhere, blockTimestamp, replayNonceUsed } from "./ChainReads.ts"
import { confirmationOf, deepEnough, type EngineContext, pastDeadline, type StepError, type Tracked, untrack } from "./EngineContext.ts"

/**
 * Final outcome from a receipt of the transaction that applied (or tried to apply) the call.
 *
 * @since 0.5.0
 * @category steps
 */
export const settleFromReceipt = Effect.fnUntraced(
  function*(context: EngineContext, tracked: Tracked, receipt: TransactionReceipt) {
    if (receipt.status === "success" && !deepEnough(context, receipt.blockNumber)) {
      // Not yet as deep as CHAIN_CONFIRMATIONS asks: the watcher counts it to the depth (and
      // a reorganisation replacing its block leaves it to be decided from the chain again).
      tracked.mined = {
        blockNumber: receipt.blockNumber,
        timestampSeconds: yield* blockTimestamp(context, receipt.blockNumber),
        outcome: "applied",
        blockHash: receipt.blockHash,
        ...(receipt.transactionHash === tracked.txHash ? {} : { appliedBy: receipt.transactionHash })
      }
      tracked.revertedBeforeDeadline = false
      return
    }
    untrack(context, tracked)
    if (receipt.status === "success") {
      yield* context.finish({
        _tag: "Confirmed",
        submissionId: tracked.request.submissionId,
        mode: context.chain.mode,
        txHash: receipt.transactionHash,
        blockNumber: receipt.blockNumber,
        blockTimestampSeconds: yield* blockTimestamp(context, receipt.blockNumber)
      })
    } else {
      yield* context.finish({
        _tag: "Failed",
        submissionId: tracked.request.submissionId,
        mode: context.chain.mode,
        txHash: receipt.transactionHash,
        reason: "reverted"
      })
    }
  }
)

/**
 * Fails `tracked` for `reason`, with its own transaction's hash.
 *
 * @since 0.5.0
 * @category steps
 */
export const failWith = (context: EngineContext, tracked: Tracked, reason: FailureReason): Effect.Effect<void, StepError> => {
  untrack(context, tracked)
  return context.finish({
    _tag: "Failed",
    submissionId: tracked.request.submissionId,
    mode: context.chain.mode,
    txHash: tracked.txHash,
    reason
  })
}

/**
 * A mined transaction with enough confirmations: confirmed, or, on a revert, see whether another applied it.
 *
 * @since 0.5.0
 * @category steps
 */
export const conclude = Effect.fnUntraced(function*(context: EngineContext, tracked: Tracked) {
  const mined = tracked.mined
  if (mined === undefined) return
  if (mined.outcome === "applied") {
    untrack(context, tracked)
    return yield* context.finish(confirmationOf(context, tracked, mined))
  }
  // A batch item skipped past its deadline with its nonce unused: nothing can apply it now.
  if (mined.outcome === "expired") return yield* failWith(context, tracked, "expired")
  const applied = yield* appliedElsewhere(context, tracked.request)
  if (Option.isSome(applied) && applied.value.transactionHash !== tracked.txHash) {
    return yield* settleFromReceipt(context, tracked, applied.value)
  }
  const deadline = tracked.request.deadlineSeconds
  // A nonce another transfer used can never be mined for this one: failed now.
  if (deadline !== null && !pastDeadline(context, deadline) && !(yield* replayNonceUsed(context, tracked.request))) {
    tracked.mined = undefined
    tracked.revertedBeforeDeadline = true
    return
  }
  yield* failWith(context, tracked, "reverted")
})

/**
 * A reverted attestation past its deadline: applied by another transaction after all, or failed for good.
 *
 * @since 0.5.0
 * @category steps
 */
export const concludeReverted = Effect.fnUntraced(function*(context: EngineContext, tracked: Tracked) {
  const applied = yield* appliedElsewhere(context, tracked.request)
  if (Option.isSome(applied)) return yield* settleFromReceipt(context, tracked, applied.value)
  yield* failWith(context, tracked, "reverted")
})
