/**
 * Recover after a restart (and adopt a dead node's work): every submission not known to be
 * final that no live node drives is looked at. A receipt found is tracked to its depth; none
 * found means the same signed bytes are broadcast again, or, for a call never signed (or signed
 * by a relayer this node no longer has), a fresh signature, unless the contract says another
 * transaction applied it: the contract refuses a reused transfer nonce, so nothing is applied
 * twice.
 *
 * @since 0.5.0
 */
import { Duration, Effect, Option, Schedule } from "effect"
import type { TransactionReceipt } from "viem"
import { SettlementLimits } from "../domain.ts"
import type { Relayer } from "../Relayer.ts"
import type { Submission } from "../SubmissionStore.ts"
import { appliedElsewhere, blockTimestamp, nonceOf, outcomeIn } from "./ChainReads.ts"
import { settleFromReceipt } from "./Conclude.ts"
import { type EngineContext, rpc, type StepError, track, type Tracked } from "./EngineContext.ts"
import { revisit } from "./Rebroadcast.ts"
import { signAndSend } from "./Send.ts"

/** A stand-in for a submission this node never tracked, so its outcome can be recorded. */
const orphan = (submission: Submission, relayer: Relayer): Tracked => ({
  request: submission.request,
  relayer,
  rawTx: "0x",
  txHash: submission.txHash ?? "0x",
  sentAtMs: 0,
  mined: undefined
})

/** Never signed (or signed by a relayer this node no longer has): signed now, unless it was applied. */
const recoverUnsigned = Effect.fnUntraced(function*(context: EngineContext, submission: Submission) {
  const applied = yield* appliedElsewhere(context, submission.request)
  if (Option.isSome(applied)) {
    const placeholder = orphan(submission, context.relayers[0]!)
    // Counted as any entry is (untrack takes it off the relayer's count).
    placeholder.relayer.inFlight += 1
    track(context, placeholder)
    return yield* settleFromReceipt(context, placeholder, applied.value)
  }
  return yield* signAndSend(context, [submission.request], [])
})

/**
 * Drives an open submission this node takes over (at start, from a dead node, or one this node
 * lost track of).
 *
 * @since 0.5.0
 * @category steps
 */
export const recover = (context: EngineContext, submission: Submission): Effect.Effect<void, StepError> =>
  Effect.gen(function*() {
    const relayer = submission.relayer === null ? undefined : context.relayerByAddress.get(submission.relayer.toLowerCase())
    const { rawTx, txHash } = submission
    if (rawTx === null || txHash === null || relayer === undefined) return yield* recoverUnsigned(context, submission)
    relayer.inFlight += 1
    const tracked: Tracked = { request: submission.request, relayer, rawTx, txHash, sentAtMs: 0, mined: undefined }
    track(context, tracked)
    // Its nonce is not handed out again, and its expiry is a gap the relayer knows to fill.
    const nonce = nonceOf(rawTx)
    if (nonce !== undefined) yield* relayer.adopt({ relayer: relayer.address, nonce, rawTx, txHash })
    const receipt = yield* rpc(context, "reading a receipt", (client) => client.getTransactionReceipt({ hash: txHash })).pipe(
      Effect.map(Option.some),
      Effect.catch(() => Effect.succeed(Option.none<TransactionReceipt>()))
    )
    if (Option.isNone(receipt)) return yield* revisit(context, tracked)
    // Its block's hash is checked against the one the scan keeps at that height (the
    // watcher starts the depth below the head), so a reorganisation replacing it is followed.
    tracked.mined = {
      blockNumber: receipt.value.blockNumber,
      timestampSeconds: yield* blockTimestamp(context, receipt.value.blockNumber),
      outcome: outcomeIn(submission.request, { success: receipt.value.status === "success", logs: receipt.value.logs }),
      blockHash: receipt.value.blockHash
    }
  }).pipe(Effect.withSpan("Settlement.recover"))

/**
 * Where the watcher starts, and the recovery at start: everything not final that no live node
 * drives, as the last run left it (embedded: every earlier process is gone, so all of it;
 * distributed: what dead nodes left, including this node's previous life once its heartbeat is
 * stale). The watcher starts `CHAIN_CONFIRMATIONS` blocks below the head: a transaction in one
 * of those is seen mined by the scan (its block's hash kept), so a reorganisation replacing it
 * is followed as any other.
 *
 * @since 0.5.0
 * @category steps
 */
export const recoverAtStart = Effect.fnUntraced(function*(context: EngineContext) {
  const { view } = context
  const startHead = yield* rpc(context, "reading the head", (client) => client.getBlockNumber())
  const confirmations = BigInt(context.confirmations)
  view.lastScanned = startHead > confirmations ? startHead - confirmations : 0n
  const start = view.lastScanned
  const startBlock = yield* rpc(context, "reading a block", (client) => client.getBlock({ blockNumber: start }))
  view.latestTimestampSeconds = startBlock.timestamp
  context.scannedHashes.set(start, startBlock.hash)
  const open = yield* context.store.adoptOrphans(context.chain.mode)
  for (const submission of open) yield* recover(context, submission)
})

/**
 * A node that died leaves its submissions open: survivors adopt them once its heartbeat is
 * stale and finish them (the contract's replay nonce keeps a transaction the dead node had
 * broadcast and this one signs anew from being applied twice).
 *
 * @since 0.5.0
 * @category steps
 */
export const adoptOrphansForever = (context: EngineContext) =>
  Effect.forkScoped(
    Effect.gen(function*() {
      const adopted = yield* context.store.adoptOrphans(context.chain.mode)
      for (const submission of adopted) {
        const id = submission.request.submissionId
        if (context.bySubmission.has(id) || context.signing.has(id)) continue
        yield* Effect.logInfo("adopting a dead node's submission").pipe(Effect.annotateLogs({ submission_id: id, mode: context.chain.mode }))
        yield* recover(context, submission)
      }
    }).pipe(
      Effect.catch((error) => Effect.logWarning("adopting orphaned submissions failed", error)),
      Effect.catchDefect((defect) => Effect.logError("adopting orphaned submissions failed unexpectedly", defect)),
      Effect.repeat(Schedule.spaced(Duration.millis(SettlementLimits.adoptOrphansEveryMs))),
      Effect.delay(Duration.millis(SettlementLimits.adoptOrphansEveryMs))
    )
  )
