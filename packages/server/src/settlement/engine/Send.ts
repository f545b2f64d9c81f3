/**
 * Submit: signs one transaction for one call or a batch, records its bytes, then broadcasts it;
 * a broadcast told the relayer nonce is spent signs the calls anew (unless another transaction
 * applied them meanwhile).
 *
 * Why this order: the signed bytes are durable before anything is broadcast, so after a crash
 * the same bytes are sent again rather than a second signature made; and a nonce signed but
 * never recorded is released, or every later transaction of its relayer would wait behind it.
 *
 * @since 0.5.0
 */
import { RootHints } from "@pps/contracts"
import { SpanLog } from "@pps/guardian"
import { Clock, Effect, Option } from "effect"
import { transferReached } from "../../observability/Metrics.ts"
import { balanceRoots, type BatchItems, batchItems, encodeBatch, encryptedBalancesOfCall } from "../calls.ts"
import { SettlementLimits, type SubmissionRequest } from "../domain.ts"
import type { Relayer } from "../Relayer.ts"
import { appliedElsewhere } from "./ChainReads.ts"
import { settleFromReceipt } from "./Conclude.ts"
import { type EngineContext, pickRelayer, rpc, type StepError, track, type Tracked, untrack } from "./EngineContext.ts"

/**
 * A node's answer that the relayer nonce is spent.
 *
 * @since 0.5.0
 * @category predicates
 */
export const isNonceTooLow = (error: unknown) => /nonce too low|nonce has already been used|replacement transaction underpriced/i.test(String(error))
/**
 * A node's answer that it has the transaction already.
 *
 * @since 0.5.0
 * @category predicates
 */
export const isAlreadyKnown = (error: unknown) => /already known|known transaction|already imported/i.test(String(error))

/** A transaction to sign. */
interface Call {
  readonly to: SubmissionRequest["target"]
  readonly data: SubmissionRequest["data"]
  readonly gas: bigint
}

/**
 * The transaction for `requests`: a single call alone, several confidential transfers as one
 * `confidentialTransferBatch` with root hints (gas: the sum of the items' limits, each sized for
 * its worst case). Undefined when a call is not a confidential transfer.
 */
const callFor = (context: EngineContext, requests: ReadonlyArray<SubmissionRequest>): Effect.Effect<Call | undefined> => {
  const first = requests[0]!
  if (requests.length === 1) return Effect.succeed({ to: first.target, data: first.data, gas: first.gasLimit })
  const batch = batchItems(requests.map((request) => request.data))
  if (batch === undefined) return Effect.succeed(undefined)
  return readRootHints(context, first.target, batch).pipe(
    Effect.map((hints) => ({ to: first.target, data: encodeBatch(batch, hints), gas: requests.reduce((sum, request) => sum + request.gasLimit, 0n) }))
  )
}

/** How long a batch waits for its root hints' read (a view of one call; ~0.2 ms on a local node). */
const rootHintsReadMs = 1_000

/**
 * The batch's root hints (D70): the y of each balance point it reads, from one
 * `encryptedBalancesOf` of its parties at the latest block, so the contract checks each stored
 * point's y instead of recovering it (4k gas each under Osaka pricing, six per transfer). A
 * balance a transaction in flight changes is hinted stale, and a failed read sends no hints:
 * either only costs the contract its recovery, never a wrong balance. A read slower than
 * `rootHintsReadMs` is given up for the same reason: the batch (and the relayer's slot) does
 * not wait for a node that is slow to answer a view.
 */
const readRootHints = (context: EngineContext, token: SubmissionRequest["target"], batch: BatchItems) => {
  const accounts = RootHints.hintedAccounts(batch.parties)
  return rpc(context, "reading balances for root hints", (client) => client.call({ to: token, data: encryptedBalancesOfCall(accounts) })).pipe(
    Effect.map(({ data }) => {
      const balances = data === undefined ? undefined : balanceRoots(data, accounts.length)
      return balances === undefined ? [] : RootHints.rootHints(batch.parties, balances)
    }),
    Effect.timeoutOrElse({
      duration: rootHintsReadMs,
      orElse: () => Effect.as(Effect.logDebug("root hints not read in time; the batch goes without"), [])
    }),
    Effect.catch((error) =>
      Effect.logDebug("root hints not read; the batch goes without").pipe(
        Effect.annotateLogs({ error: String(error.cause) }),
        Effect.as([])
      )
    ),
    SpanLog.stage("Settlement.rootHints")
  )
}

/**
 * Signs the call with `relayer`, records the bytes for all of `requests`, and tracks them.
 * From the signature to the record, not interruptible (whoever runs it: a request, a watcher
 * round): a nonce signed and never recorded nor broadcast would stall every later transaction
 * of the relayer behind the gap. Both steps are bounded (RPC timeout, SQL).
 */
const signAndRecord = (
  context: EngineContext,
  requests: ReadonlyArray<SubmissionRequest>,
  call: Call,
  relayer: Relayer
): Effect.Effect<ReadonlyArray<Tracked>, StepError> =>
  Effect.uninterruptible(Effect.gen(function*() {
    const signed = yield* relayer.sign(call).pipe(
      Effect.tapError(() => Effect.sync(() => (relayer.inFlight -= requests.length))),
      SpanLog.stage("Settlement.sign")
    )
    // Signed but not recorded: the nonce it took is never broadcast, so release it (the
    // next signature or a filler takes it) rather than leave a gap that stalls the relayer.
    yield* context.store.markSent(requests.map((request) => request.submissionId), signed).pipe(
      Effect.tapError(() => relayer.release(signed).pipe(Effect.andThen(Effect.sync(() => (relayer.inFlight -= requests.length))))),
      SpanLog.stage("Settlement.markSent")
    )
    const sentAtMs = yield* Clock.currentTimeMillis
    const group = requests.map((request): Tracked => ({
      request,
      relayer,
      rawTx: signed.rawTx,
      txHash: signed.txHash,
      sentAtMs,
      mined: undefined
    }))
    for (const tracked of group) track(context, tracked)
    return group
  }))

/** The transfers among `requests`, counted as `submitted` (their first signature; a re-signing is not counted). */
const countSubmitted = (requests: ReadonlyArray<SubmissionRequest>) =>
  Effect.forEach(requests, (request) =>
    request.kind === "confidential_transfer" || request.kind === "public_transfer"
      ? transferReached("submitted", request.mode)
      : Effect.void, { discard: true })

/**
 * Signs one transaction for `requests` with a fresh relayer nonce, records its bytes for all
 * of them, then broadcasts. `previous` are the entries these requests replace (a spent nonce);
 * `resignings` counts how many times in a row they were signed again for that reason.
 *
 * @since 0.5.0
 * @category steps
 */
export const signAndSend = (
  context: EngineContext,
  requests: ReadonlyArray<SubmissionRequest>,
  previous: ReadonlyArray<Tracked>,
  chosen?: Relayer,
  resignings = 0
): Effect.Effect<void, StepError> =>
  Effect.suspend(() => {
    for (const tracked of previous) untrack(context, tracked)
    return callFor(context, requests).pipe(Effect.flatMap((call) => {
      // Not batchable after all (calldata that is not a confidential transfer): one by one.
      if (call === undefined) {
        return Effect.forEach(requests, (request) => signAndSend(context, [request], [], chosen, resignings), { discard: true })
      }
      // Counted before signing, so concurrent submissions spread over the pool
      // instead of all picking the relayer that looked idle.
      const relayer = chosen ?? pickRelayer(context)
      relayer.inFlight += requests.length
      const firstSignature = previous.length === 0 && resignings === 0
      return signAndRecord(context, requests, call, relayer).pipe(
        Effect.tap(() => (firstSignature ? countSubmitted(requests) : Effect.void)),
        Effect.flatMap((group) => broadcast(context, group, resignings).pipe(SpanLog.stage("Settlement.broadcast")))
      )
    }))
  })

/**
 * Sends the recorded bytes of `group` (the entries of one transaction). A transport failure
 * leaves the transaction in flight for the rebroadcast round; a spent relayer nonce leads to a
 * fresh signature for the entries whose transfer was not applied meanwhile.
 *
 * @since 0.5.0
 * @category steps
 */
export const broadcast = (context: EngineContext, group: ReadonlyArray<Tracked>, resignings: number): Effect.Effect<void, StepError> =>
  rpc(context, "broadcasting", (client) => client.sendRawTransaction({ serializedTransaction: group[0]!.rawTx })).pipe(
    Effect.asVoid,
    Effect.catch((error) => {
      if (isAlreadyKnown(error.cause)) return Effect.void
      if (isNonceTooLow(error.cause) && resignings < SettlementLimits.sendAttemptsMax) return resign(context, group, resignings)
      return Effect.logWarning("broadcast failed; will retry").pipe(
        Effect.annotateLogs({ submission_ids: group.map((tracked) => tracked.request.submissionId).join(","), error: String(error.cause) })
      )
    })
  )

/** `broadcast` told the relayer nonce is spent: the entries not applied meanwhile are signed anew. */
const resign = Effect.fnUntraced(function*(context: EngineContext, group: ReadonlyArray<Tracked>, resignings: number) {
  yield* group[0]!.relayer.catchUp
  const unapplied: Array<Tracked> = []
  for (const tracked of group) {
    const applied = yield* appliedElsewhere(context, tracked.request)
    if (Option.isSome(applied)) yield* settleFromReceipt(context, tracked, applied.value)
    else unapplied.push(tracked)
  }
  // Counted across the chain of re-signings, so a nonce the node keeps calling spent
  // (another signer on the relayer's key) ends in the rebroadcast round, not a loop.
  if (unapplied.length > 0) {
    yield* signAndSend(context, unapplied.map((tracked) => tracked.request), unapplied, undefined, resignings + 1)
  }
})
