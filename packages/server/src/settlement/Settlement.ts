/**
 * Settlement: gets contract calls mined exactly once, and reports how each ended.
 *
 * Submission: the call is recorded (chain_submissions) before anything else;
 * then a relayer — the least loaded of a pool, each with its own nonce
 * sequence, so throughput is not capped by one — signs it with explicit gas,
 * fees and chain id, the signed bytes are recorded, and only then broadcast.
 *
 * Batching (issue 16, when `SETTLEMENT_BATCH_MAX` > 1, the default 32): the calls
 * submitted in the same turn (the transfers recorded in one transaction) are
 * recorded in one statement and queued together, and calls also wait in the queue
 * while every relayer has `SettlementLimits.sendsPerRelayer` sends (sign, record,
 * broadcast) in progress; a relayer takes what queued, up to the maximum, and
 * confidential transfers to the same contract go out as one
 * `confidentialTransferBatch` transaction (one relayer signature, one row update
 * recording the bytes for all of them). No timer: a lone call leaves at once,
 * alone (after one turn of the event loop). Each transfer
 * of a batch is resolved from its own item event in the receipt: applied, or
 * skipped because its replay nonce was used (then the earlier transaction that
 * applied it resolves it, as for a reverted single transfer) or its deadline passed.
 *
 * Watching: one fiber per mode reads every new block's receipts (one
 * `eth_getBlockReceipts` per block, not one poll per transaction) and matches
 * them to the transactions in flight. A transaction counts once it is buried
 * under `CHAIN_CONFIRMATIONS` blocks. A reverted transfer whose replay nonce
 * turns out to be used was applied by another of our transactions (a
 * resubmission that raced): the event of its transfer id tells which.
 *
 * Recovery: at start every submission not known to be final is looked at: a
 * receipt found is recorded; none found means the same signed bytes are
 * broadcast again, or, when their relayer nonce was spent meanwhile and the
 * contract says the transfer nonce is still unused, the call is signed anew —
 * the contract refuses a reused transfer nonce, so nothing is applied twice.
 * A transaction not seen in a block for a while is broadcast again the same way,
 * and one whose attestation deadline has passed on chain without being mined
 * has failed (`expired`): it can never be mined. Its relayer nonce, when the chain
 * never used it, is filled with a no-op, or the relayer's later transactions would
 * wait on it forever.
 *
 * @since 0.1.0
 */
import { ConfidentialTokenArtifact } from "@pps/contracts"
import { SpanLog } from "@pps/guardian"
import { Context, Deferred, Duration, Effect, Exit, Layer, Option, PubSub, Schedule, Schema, Stream } from "effect"
import type { SqlError } from "effect/sql"
import {
  getAbiItem,
  type Hex,
  hexToBigInt,
  numberToHex,
  parseTransaction,
  type PublicClient,
  slice as sliceHex,
  toEventSelector,
  type TransactionReceipt
} from "viem"
import type { Mode } from "@pps/api/ApiKeys"
import { AppConfig, runsWorkers } from "../config/AppConfig.ts"
import { makeWakeup } from "../events/Wakeup.ts"
import { confidentialTransferBatchCall } from "./calls.ts"
import { type ChainContext, ChainError, Chains } from "./Chains.ts"
import { type FailureReason, type Resolution, type SubmissionRequest, SettlementLimits } from "./domain.ts"
import { makeRelayer, type Relayer } from "./Relayer.ts"
import { type Submission, SubmissionStore } from "./SubmissionStore.ts"

/** How often the stored transactions no open submission carries are deleted. */
const settledTransactionSweepMs = 5 * 60_000
/** A stored transaction younger than this stays (its submissions are in flight or just ended). */
const settledTransactionGraceMs = 10 * 60_000
/** Stored transactions deleted per statement. */
const settledTransactionSlice = 500

/**
 * The mode has no chain configured (D9: live keys without a mainnet).
 *
 * @since 0.1.0
 * @category errors
 */
export class ChainUnavailable extends Error {
  readonly _tag = "ChainUnavailable" as const
  readonly mode: Mode
  constructor(mode: Mode) {
    super(`no chain is configured for mode ${mode}`)
    this.mode = mode
  }
}

interface Tracked {
  readonly request: SubmissionRequest
  relayer: Relayer
  rawTx: Hex
  txHash: Hex
  sentAtMs: number
  mined: {
    readonly blockNumber: bigint
    readonly timestampSeconds: bigint
    readonly outcome: ItemOutcome
    /** The block's hash: the block scanned at that height later must be this one to count. */
    readonly blockHash: Hex
    /**
     * The transaction that applied the call when it is another than this entry's own (a
     * resubmission that raced, found by its event): counted to the depth like this entry's own.
     */
    readonly appliedBy?: Hex
  } | undefined
  /**
   * Reverted while its attestation is still valid: anyone holding the calldata may still get
   * it mined, so it is not `failed` (D14: failed moves no funds) until the chain's time passes
   * the deadline with the replay nonce unused. Nothing is rebroadcast meanwhile.
   */
  revertedBeforeDeadline?: boolean
}

/**
 * What the mined transaction did to one submission: `applied`; `expired` (a batch item skipped
 * past its deadline: it can never apply); `reverted` (the transaction reverted, or a batch item
 * was skipped for a used nonce or a bad signature: whether another transaction applied it is
 * looked up, exactly as for a reverted single call).
 */
type ItemOutcome = "applied" | "expired" | "reverted"

const appliedTopics = [
  toEventSelector(getAbiItem({ abi: ConfidentialTokenArtifact.abi, name: "ConfidentialTransfer" })),
  toEventSelector(getAbiItem({ abi: ConfidentialTokenArtifact.abi, name: "PublicTransfer" }))
]
const skippedTopic = toEventSelector(getAbiItem({ abi: ConfidentialTokenArtifact.abi, name: "ConfidentialTransferSkipped" }))
/** `SkipReason.DeadlineExpired` in ConfidentialToken.sol. */
const skippedDeadlineExpired = 1n

/**
 * The outcome of `request` in a mined receipt. A confidential transfer is `applied` only when
 * its own ConfidentialTransfer event is in the receipt: a batch transaction succeeds whether or
 * not each of its items applied.
 */
const outcomeIn = (
  request: SubmissionRequest,
  receipt: { readonly success: boolean; readonly logs: ReadonlyArray<{ readonly address: string; readonly topics: ReadonlyArray<Hex | null>; readonly data: Hex }> }
): ItemOutcome => {
  if (!receipt.success) return "reverted"
  if (request.kind !== "confidential_transfer" || request.replayKey === null) return "applied"
  const transferId = request.replayKey.transferId.toLowerCase()
  const target = request.target.toLowerCase()
  for (const log of receipt.logs) {
    if (log.address.toLowerCase() !== target) continue
    const [topic0, , topic2, topic3] = log.topics
    if (topic0 === appliedTopics[0] && topic3?.toLowerCase() === transferId) return "applied"
    // ConfidentialTransferSkipped(from, transferId, nonce, reason): the reason is the second data word.
    if (topic0 === skippedTopic && topic2?.toLowerCase() === transferId) {
      return hexToBigInt(sliceHex(log.data, 32, 64)) === skippedDeadlineExpired ? "expired" : "reverted"
    }
  }
  return "reverted"
}

/** `txpool_inspect`'s queued part (by sender, then by nonce; the lines themselves unused), as geth and anvil answer it. */
const decodePoolInspection = Schema.decodeUnknownOption(
  Schema.Struct({ queued: Schema.Record(Schema.String, Schema.Record(Schema.String, Schema.Unknown)) })
)

/** The nonce a signed transaction carries (undefined for bytes that do not parse: never ours). */
const nonceOf = (rawTx: Hex): number | undefined => {
  try {
    return parseTransaction(rawTx).nonce
  } catch {
    return undefined
  }
}

/**
 * @since 0.1.0
 * @category services
 */
export class Settlement extends Context.Service<Settlement, {
  /** Records, signs and broadcasts the call; a second submit of the same id is a no-op. */
  readonly submit: (request: SubmissionRequest) => Effect.Effect<void, ChainUnavailable | ChainError | SqlError.SqlError>
  /**
   * Records calls in the caller's SQL transaction, so that they commit with what they settle
   * (a transfer's row and its call: one commit fewer a create, issue 16); `submitRecorded`
   * signs and broadcasts them once it committed. A crash between the two leaves them
   * `recorded`: adopted at the next start, and signed by a later `submit` of the same id.
   */
  readonly record: (requests: ReadonlyArray<SubmissionRequest>) => Effect.Effect<void, SqlError.SqlError>
  /** `submit` for a call `record` wrote in a transaction that committed: signs and broadcasts it without recording it again. */
  readonly submitRecorded: (request: SubmissionRequest) => Effect.Effect<void, ChainUnavailable | ChainError | SqlError.SqlError>
  /** The outcome within `timeoutMs`, or None while still pending. */
  readonly awaitResolution: (
    submissionId: string,
    timeoutMs: number
  ) => Effect.Effect<Option.Option<Resolution>, SqlError.SqlError>
  /** Every outcome as it happens (subscribe before submitting to miss none). */
  readonly resolutions: Stream.Stream<Resolution>
  /** The chain of a mode, for reads (balances, key registry). */
  readonly chain: (mode: Mode) => Option.Option<ChainContext>
}>()("server/settlement/Settlement") {
  static readonly layer = Layer.effect(
    Settlement,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const chains = yield* Chains
      const store = yield* SubmissionStore
      const hub = yield* PubSub.unbounded<Resolution>()
      const waiters = new Map<string, Deferred.Deferred<Resolution>>()

      const waiterFor = (submissionId: string) =>
        Effect.gen(function*() {
          const existing = waiters.get(submissionId)
          if (existing !== undefined) return existing
          const created = yield* Deferred.make<Resolution>()
          waiters.set(submissionId, created)
          return created
        })

      /**
       * Submissions this process's engine tracks in flight and has not announced: their outcome
       * reaches the waiters through `announce` or `deliverStored`, so a waiter registered while
       * its id is here need not read the store first (one read per transfer saved, issue 16). An
       * id leaves before its waiters are looked up, so a waiter that saw it here is registered
       * before that lookup; it also leaves when the engine stops tracking it (concluded before
       * its outcome is written, or signed again), so a waiter then reads the store, as the
       * recovery round's does when a write's answer was lost. A submission another node adopted
       * and finished (this one looked dead) stays until this node's own watcher concludes it
       * (`deliverStored`): later, not lost.
       */
      const submittedHere = new Set<string>()

      /** Tells the waiters and subscribers of an outcome just written. */
      const announce = (resolution: Resolution) =>
        Effect.gen(function*() {
          submittedHere.delete(resolution.submissionId)
          yield* Effect.logInfo("submission resolved").pipe(Effect.annotateLogs({
            submission_id: resolution.submissionId,
            outcome: resolution._tag,
            tx_hash: resolution.txHash ?? "none"
          }))
          const waiter = waiters.get(resolution.submissionId)
          if (waiter !== undefined) {
            yield* Deferred.succeed(waiter, resolution)
            waiters.delete(resolution.submissionId)
          }
          yield* PubSub.publish(hub, resolution)
        })

      /**
       * An outcome written before this process's own (another node's, after it adopted the
       * submission): the waiters get the stored one, as a waiter registered now would read it.
       */
      const deliverStored = (submissionId: string) =>
        Effect.gen(function*() {
          submittedHere.delete(submissionId)
          const waiter = waiters.get(submissionId)
          if (waiter === undefined) return
          const stored = yield* store.resolution(submissionId)
          if (Option.isNone(stored)) return
          yield* Deferred.succeed(waiter, stored.value)
          waiters.delete(submissionId)
        }).pipe(
          // Never fails its caller (a round's other outcomes still go out): a waiter left waiting
          // answers `pending` at its timeout and the recovery round completes the transfer.
          Effect.catch((error) =>
            Effect.logWarning("reading an outcome written elsewhere failed", error).pipe(
              Effect.annotateLogs({ submission_id: submissionId })
            ))
        )

      /** Writes the outcome once, then tells the waiters and subscribers. */
      const finish: Finish = (resolution) =>
        Effect.gen(function*() {
          if (yield* store.resolve(resolution)) yield* announce(resolution)
          else yield* deliverStored(resolution.submissionId)
        })

      /** `finish` for a watcher round's confirmations: one write for all of them. */
      const finishConfirmed: FinishConfirmed = (confirmations) =>
        Effect.gen(function*() {
          const changed = new Set(yield* store.confirmMany(confirmations))
          for (const confirmation of confirmations) {
            if (changed.has(confirmation.submissionId)) yield* announce(confirmation)
            else yield* deliverStored(confirmation.submissionId)
          }
        })

      const engines = new Map<Mode, Engine>()
      for (const mode of ["test", "live"] as const) {
        const chain = chains.get(mode)
        if (Option.isNone(chain)) continue
        const engine = yield* makeEngine(chain.value, config.chainConfirmations, config.chainBlockTimeMs, config.settlementBatchMax, store, finish, finishConfirmed, (submissionId, tracked) => tracked ? submittedHere.add(submissionId) : submittedHere.delete(submissionId), runsWorkers(config))
        engines.set(mode, engine)
      }

      // The stored transactions no open submission carries go every few minutes (a batch's
      // bytes are stored once under its hash, and a re-signed batch leaves its earlier bytes
      // behind): the table holds what is in flight, not every transaction ever sent. Safe on
      // every node at once: a delete of rows nothing reads.
      if (runsWorkers(config)) {
        yield* store.forgetSettledTransactions(settledTransactionGraceMs, settledTransactionSlice).pipe(
          Effect.catchCause((cause) => Effect.logWarning("forgetting settled transactions failed", cause)),
          Effect.andThen(Effect.sleep(settledTransactionSweepMs)),
          Effect.forever,
          Effect.forkScoped
        )
      }

      return Settlement.of({
        submit: (request) => {
          const engine = engines.get(request.mode)
          return engine === undefined ? Effect.fail(new ChainUnavailable(request.mode)) : engine.submit(request)
        },
        record: (requests) => store.recordAll(requests).pipe(Effect.asVoid),
        submitRecorded: (request) => {
          const engine = engines.get(request.mode)
          return engine === undefined ? Effect.fail(new ChainUnavailable(request.mode)) : engine.submitRecorded(request)
        },
        awaitResolution: (submissionId, timeoutMs) =>
          Effect.gen(function*() {
            const waiter = yield* waiterFor(submissionId)
            // Tracked here and not announced: its outcome will reach the waiter just registered.
            if (submittedHere.has(submissionId)) {
              return yield* Deferred.await(waiter).pipe(Effect.timeoutOption(Duration.millis(timeoutMs)))
            }
            // Read after registering the waiter, so an outcome written in between is not missed.
            const stored = yield* store.resolution(submissionId)
            if (Option.isSome(stored)) {
              // Complete the shared waiter before dropping it: another caller may be waiting on it
              // and `finish` may already have looked for it.
              yield* Deferred.succeed(waiter, stored.value)
              waiters.delete(submissionId)
              return stored
            }
            return yield* Deferred.await(waiter).pipe(Effect.timeoutOption(Duration.millis(timeoutMs)))
          }),
        resolutions: Stream.fromPubSub(hub),
        chain: (mode) => chains.get(mode)
      })
    })
  ).pipe(Layer.provide(SubmissionStore.layer))
}

type Confirmation = Extract<Resolution, { readonly _tag: "Confirmed" }>
type Finish = (resolution: Resolution) => Effect.Effect<void, SqlError.SqlError>
type FinishConfirmed = (confirmations: ReadonlyArray<Confirmation>) => Effect.Effect<void, SqlError.SqlError>

interface Engine {
  readonly submit: (request: SubmissionRequest) => Effect.Effect<void, ChainError | SqlError.SqlError>
  readonly submitRecorded: (request: SubmissionRequest) => Effect.Effect<void, ChainError | SqlError.SqlError>
}

const isNonceTooLow = (error: unknown) => /nonce too low|nonce has already been used|replacement transaction underpriced/i.test(String(error))
const isAlreadyKnown = (error: unknown) => /already known|known transaction|already imported/i.test(String(error))

/** The per-mode machinery: relayers, the transactions in flight, the block watcher. */
const makeEngine = (
  chain: ChainContext,
  confirmations: number,
  blockTimeMs: number,
  /** Most calls in one transaction (SETTLEMENT_BATCH_MAX); 1 sends every call on its own. */
  batchMax: number,
  store: SubmissionStore["Service"],
  finish: Finish,
  finishConfirmed: FinishConfirmed,
  /** Told when a submission starts and stops being tracked in flight (signed, until concluded or dropped). */
  tracking: (submissionId: string, tracked: boolean) => void,
  /** Whether this node adopts dead nodes' submissions (workers do; an api-only node does not). */
  adoptsOrphans: boolean
) =>
  Effect.gen(function*() {
    const client: PublicClient = chain.client
    const rpc = <A>(what: string, run: () => Promise<A>) =>
      Effect.tryPromise({ try: run, catch: (cause) => new ChainError({ message: `${what} failed on the ${chain.mode} chain`, cause }) })

    let baseFeeWei = (yield* rpc("reading the latest block", () => client.getBlock({ blockTag: "latest" }))).baseFeePerGas ?? 0n
    const relayers = yield* Effect.forEach(chain.relayers, (account) =>
      makeRelayer(client, chain.chainId, account, () => baseFeeWei))
    const relayerByAddress = new Map(relayers.map((r) => [r.address.toLowerCase(), r]))
    /** By transaction hash: one entry per submission the transaction carries (several for a batch). */
    const inFlight = new Map<Hex, Array<Tracked>>()
    const bySubmission = new Map<string, Tracked>()
    let latestTimestampSeconds = 0n

    const pickRelayer = () => relayers.reduce((best, r) => (r.inFlight < best.inFlight ? r : best))

    /** Wakes the watcher from its idle wait (see the watcher's loop) when a transaction goes in flight. */
    const watcherWakeup = yield* makeWakeup
    const track = (tracked: Tracked) => {
      const group = inFlight.get(tracked.txHash)
      if (group === undefined) inFlight.set(tracked.txHash, [tracked])
      else group.push(tracked)
      bySubmission.set(tracked.request.submissionId, tracked)
      tracking(tracked.request.submissionId, true)
      watcherWakeup.wakeUnsafe()
    }
    const untrack = (tracked: Tracked) => {
      const group = inFlight.get(tracked.txHash)
      const index = group?.indexOf(tracked) ?? -1
      // Only once per tracked entry: the relayer's count is what picks the least loaded one.
      if (group === undefined || index < 0) return
      group.splice(index, 1)
      if (group.length === 0) inFlight.delete(tracked.txHash)
      if (bySubmission.get(tracked.request.submissionId) === tracked) {
        bySubmission.delete(tracked.request.submissionId)
        tracking(tracked.request.submissionId, false)
      }
      tracked.relayer.inFlight = Math.max(0, tracked.relayer.inFlight - 1)
    }

    /**
     * The transaction for `requests`: a single call alone, several confidential transfers as one
     * `confidentialTransferBatch` (gas: the sum of the items' limits, each sized for its worst case).
     */
    const callFor = (requests: ReadonlyArray<SubmissionRequest>) => {
      const first = requests[0]!
      if (requests.length === 1) return { to: first.target, data: first.data, gas: first.gasLimit }
      const data = confidentialTransferBatchCall(requests.map((request) => request.data))
      return data === undefined
        ? undefined
        : { to: first.target, data, gas: requests.reduce((sum, request) => sum + request.gasLimit, 0n) }
    }

    /**
     * Signs one transaction for `requests` with a fresh relayer nonce, records its bytes for all
     * of them, then broadcasts. `previous` are the entries these requests replace (a spent nonce);
     * `resignings` counts how many times in a row they were signed again for that reason.
     */
    const signAndSend = (
      requests: ReadonlyArray<SubmissionRequest>,
      previous: ReadonlyArray<Tracked>,
      chosen?: Relayer,
      resignings = 0
    ): Effect.Effect<void, ChainError | SqlError.SqlError> =>
      Effect.gen(function*() {
        for (const tracked of previous) untrack(tracked)
        const call = callFor(requests)
        // Not batchable after all (calldata that is not a confidential transfer): one by one.
        if (call === undefined) {
          return yield* Effect.forEach(requests, (request) => signAndSend([request], [], chosen, resignings), { discard: true })
        }
        // Counted before signing, so concurrent submissions spread over the pool
        // instead of all picking the relayer that looked idle.
        const relayer = chosen ?? pickRelayer()
        relayer.inFlight += requests.length
        // From the signature to the record, not interruptible (whoever runs it: a request, a
        // watcher round): a nonce signed and never recorded nor broadcast would stall every later
        // transaction of the relayer behind the gap. Both steps are bounded (RPC timeout, SQL).
        const group = yield* Effect.uninterruptible(Effect.gen(function*() {
          const signed = yield* relayer.sign(call).pipe(
            Effect.tapError(() => Effect.sync(() => (relayer.inFlight -= requests.length))),
            SpanLog.stage("Settlement.sign")
          )
          // Signed but not recorded: the nonce it took is never broadcast, so release it (the
          // next signature or a filler takes it) rather than leave a gap that stalls the relayer.
          yield* store.markSent(requests.map((request) => request.submissionId), signed).pipe(
            Effect.tapError(() => relayer.release(signed).pipe(Effect.andThen(Effect.sync(() => (relayer.inFlight -= requests.length))))),
            SpanLog.stage("Settlement.markSent")
          )
          const sentAtMs = Date.now()
          const group = requests.map((request): Tracked => ({
            request,
            relayer,
            rawTx: signed.rawTx,
            txHash: signed.txHash,
            sentAtMs,
            mined: undefined
          }))
          for (const tracked of group) track(tracked)
          return group
        }))
        yield* broadcast(group, resignings).pipe(SpanLog.stage("Settlement.broadcast"))
      })

    /**
     * Sends the recorded bytes of `group` (the entries of one transaction). A transport failure
     * leaves the transaction in flight for the rebroadcast round; a spent relayer nonce leads to a
     * fresh signature for the entries whose transfer was not applied meanwhile.
     */
    const broadcast = (group: ReadonlyArray<Tracked>, resignings: number): Effect.Effect<void, ChainError | SqlError.SqlError> =>
      rpc("broadcasting", () => client.sendRawTransaction({ serializedTransaction: group[0]!.rawTx })).pipe(
        Effect.asVoid,
        Effect.catch((error) => {
          if (isAlreadyKnown(error.cause)) return Effect.void
          if (isNonceTooLow(error.cause) && resignings < SettlementLimits.sendAttemptsMax) {
            return Effect.gen(function*() {
              yield* group[0]!.relayer.catchUp
              const unapplied: Array<Tracked> = []
              for (const tracked of group) {
                const applied = yield* appliedElsewhere(tracked.request)
                if (Option.isSome(applied)) yield* settleFromReceipt(tracked, applied.value)
                else unapplied.push(tracked)
              }
              // Counted across the chain of re-signings, so a nonce the node keeps calling spent
              // (another signer on the relayer's key) ends in the rebroadcast round, not a loop.
              if (unapplied.length > 0) yield* signAndSend(unapplied.map((tracked) => tracked.request), unapplied, undefined, resignings + 1)
            })
          }
          return Effect.logWarning("broadcast failed; will retry").pipe(
            Effect.annotateLogs({ submission_ids: group.map((tracked) => tracked.request.submissionId).join(","), error: String(error.cause) })
          )
        })
      )

    /** For a transfer: whether its replay nonce is used (by it, or by another transfer). */
    const replayNonceUsed = (request: SubmissionRequest) =>
      request.replayKey === null
        ? Effect.succeed(false)
        : rpc("reading a replay nonce", () =>
          client.readContract({
            address: request.target,
            abi: ConfidentialTokenArtifact.abi,
            functionName: "isNonceUsed",
            args: [request.replayKey!.sender, request.replayKey!.nonce]
          }))

    /** For a transfer: the receipt of the transaction that used its replay nonce, if one did. */
    const appliedElsewhere = (request: SubmissionRequest) =>
      Effect.gen(function*() {
        if (request.replayKey === null) return Option.none<TransactionReceipt>()
        const { transferId } = request.replayKey
        if (!(yield* replayNonceUsed(request))) return Option.none<TransactionReceipt>()
        // Both ConfidentialTransfer and PublicTransfer index the transfer id third; only those two
        // mean applied (a batch's ConfidentialTransferSkipped carries the id too, second). Searched
        // from the newest block back, a window at a time (providers refuse a range from block 0 on
        // a long chain, which left such a transfer unresolved for ever). The walk has no earlier
        // stop on purpose: "none" makes the caller sign the call anew or fail it, so it must mean
        // that no block holds the event. It is short in practice (the event is as old as the
        // outage that made us look); only a nonce taken by another transfer, which the server's
        // nonce allocation should never produce, would walk to block 0.
        const window = SettlementLimits.eventSearchWindowBlocks
        // Read after the nonce was seen used, so the block that used it is at or below this one.
        // Not viem's cached block number, which may predate it.
        let to = yield* rpc("reading the block number", () => client.getBlockNumber({ cacheTime: 0 }))
        for (;;) {
          const from = to >= window ? to - window + 1n : 0n
          const logs = yield* rpc("finding a transfer's event", () =>
            client.request({
              method: "eth_getLogs",
              params: [{
                address: request.target,
                fromBlock: numberToHex(from),
                toBlock: numberToHex(to),
                topics: [appliedTopics, null, null, transferId]
              }]
            }))
          const hash = logs.find((log) => log.transactionHash !== null && log.removed !== true)?.transactionHash
          if (hash !== undefined && hash !== null) {
            const receipt = yield* rpc("reading a receipt", () => client.getTransactionReceipt({ hash }))
            return Option.some(receipt)
          }
          if (from === 0n) return Option.none<TransactionReceipt>()
          to = from - 1n
        }
      })

    const blockTimestamp = (blockNumber: bigint) =>
      rpc("reading a block", () => client.getBlock({ blockNumber })).pipe(Effect.map((block) => block.timestamp))

    /** Whether a block is as deep as CHAIN_CONFIRMATIONS asks, counted to the last block scanned. */
    const deepEnough = (blockNumber: bigint) => blockNumber + BigInt(confirmations) - 1n <= lastScanned

    /** Final outcome from a receipt of the transaction that applied (or tried to apply) the call. */
    const settleFromReceipt = (tracked: Tracked, receipt: TransactionReceipt) =>
      Effect.gen(function*() {
        if (receipt.status === "success" && !deepEnough(receipt.blockNumber)) {
          // Not yet as deep as CHAIN_CONFIRMATIONS asks: the watcher counts it to the depth (and
          // a reorganisation replacing its block leaves it to be decided from the chain again).
          tracked.mined = {
            blockNumber: receipt.blockNumber,
            timestampSeconds: yield* blockTimestamp(receipt.blockNumber),
            outcome: "applied",
            blockHash: receipt.blockHash,
            ...(receipt.transactionHash === tracked.txHash ? {} : { appliedBy: receipt.transactionHash })
          }
          tracked.revertedBeforeDeadline = false
          return
        }
        untrack(tracked)
        if (receipt.status === "success") {
          yield* finish({
            _tag: "Confirmed",
            submissionId: tracked.request.submissionId,
            mode: chain.mode,
            txHash: receipt.transactionHash,
            blockNumber: receipt.blockNumber,
            blockTimestampSeconds: yield* blockTimestamp(receipt.blockNumber)
          })
        } else {
          yield* finish({
            _tag: "Failed",
            submissionId: tracked.request.submissionId,
            mode: chain.mode,
            txHash: receipt.transactionHash,
            reason: "reverted"
          })
        }
      })

    /** A mined transaction with enough confirmations: confirmed, or, on a revert, see whether another applied it. */
    const conclude = (tracked: Tracked) =>
      Effect.gen(function*() {
        const mined = tracked.mined!
        if (mined.outcome === "applied") {
          untrack(tracked)
          return yield* finish({
            _tag: "Confirmed",
            submissionId: tracked.request.submissionId,
            mode: chain.mode,
            txHash: mined.appliedBy ?? tracked.txHash,
            blockNumber: mined.blockNumber,
            blockTimestampSeconds: mined.timestampSeconds
          })
        }
        // A batch item skipped past its deadline with its nonce unused: nothing can apply it now.
        if (mined.outcome === "expired") return yield* failExpired(tracked)
        const applied = yield* appliedElsewhere(tracked.request)
        if (Option.isSome(applied) && applied.value.transactionHash !== tracked.txHash) {
          return yield* settleFromReceipt(tracked, applied.value)
        }
        const deadline = tracked.request.deadlineSeconds
        // A nonce another transfer used can never be mined for this one: failed now.
        if (deadline !== null && latestTimestampSeconds <= deadline && !(yield* replayNonceUsed(tracked.request))) {
          tracked.mined = undefined
          tracked.revertedBeforeDeadline = true
          return
        }
        yield* failReverted(tracked)
      })

    const failWith = (reason: FailureReason) => (tracked: Tracked) => {
      untrack(tracked)
      return finish({
        _tag: "Failed",
        submissionId: tracked.request.submissionId,
        mode: chain.mode,
        txHash: tracked.txHash,
        reason
      })
    }
    const failReverted = failWith("reverted")
    const failExpired = failWith("expired")

    /** A reverted attestation past its deadline: applied by another transaction after all, or failed for good. */
    const concludeReverted = (tracked: Tracked) =>
      Effect.gen(function*() {
        const applied = yield* appliedElsewhere(tracked.request)
        if (Option.isSome(applied)) return yield* settleFromReceipt(tracked, applied.value)
        yield* failReverted(tracked)
      })

    let nonceGapsTriedAtMs = 0

    /**
     * Fills the gaps the relayers noted (their relayer's transactions wait on them), each relayer
     * on its own so one failing RPC leaves the others to go on, a few per try.
     */
    const fillNonceGaps = Effect.suspend(() => Effect.forEach(
      relayers.filter((relayer) => relayer.hasGaps()),
      (relayer) =>
        Effect.gen(function*() {
          const mined = yield* rpc("reading a relayer nonce", () =>
            client.getTransactionCount({ address: relayer.address, blockTag: "latest" }))
          yield* relayer.fillGaps(mined, SettlementLimits.fillsPerTry, (filler) =>
            rpc("filling a relayer nonce", () => client.sendRawTransaction({ serializedTransaction: filler.rawTx })).pipe(
              Effect.asVoid,
              Effect.catch((error) =>
                isAlreadyKnown(error.cause) || isNonceTooLow(error.cause)
                  ? Effect.void
                  : Effect.logWarning("filling a relayer nonce failed; will retry").pipe(
                    Effect.annotateLogs({ relayer: relayer.address, nonce: filler.nonce, error: String(error.cause) })
                  ))
            ))
        }).pipe(Effect.catch((error) => Effect.logWarning("filling relayer nonces failed; will retry", error))),
      { discard: true }
    )).pipe(Effect.ensuring(Effect.sync(() => (nonceGapsTriedAtMs = Date.now()))))

    /** Not seen in a block for a while: expired, applied by another, or broadcast again. */
    const revisit = (tracked: Tracked) =>
      Effect.gen(function*() {
        const deadline = tracked.request.deadlineSeconds
        if (deadline !== null && latestTimestampSeconds > deadline) {
          // Not seen and past its deadline: its relayer nonce may be one the chain now waits on
          // (the watcher fills it, once it knows the nonce was not used after all).
          yield* tracked.relayer.noteGap(tracked.txHash)
          const applied = yield* appliedElsewhere(tracked.request)
          if (Option.isSome(applied)) return yield* settleFromReceipt(tracked, applied.value)
          return yield* failExpired(tracked)
        }
        tracked.sentAtMs = Date.now()
        yield* store.countBroadcast([tracked.request.submissionId])
        yield* broadcast([tracked], 0)
      })

    /**
     * Relayers whose next transaction the node holds without mining it: anvil's pool can keep a
     * transaction "queued" for good when it arrived while its predecessor was being mined, even
     * once its nonce is the one the chain expects, and every later transaction of the relayer
     * waits behind it (seen under load with 100-ms blocks: 109 transactions of one relayer held
     * for minutes, their transfers `pending` until their deadline). Sending the same bytes again
     * is refused as already imported; taking the relayer's transactions out of the pool and
     * sending them again in nonce order has the node take them afresh.
     *
     * Looked at for relayers with a transaction in flight here unseen for `heldAfterMs` (three
     * blocks, at least `SettlementLimits.heldCheckAfterMs`), at most once per that period per
     * relayer, with one reading of the pool for all of them (`txpool_inspect`: nonces and a line
     * per transaction, not their calldata). Acted on only when the pool shows the relayer's next
     * nonce `queued` (not merely a backed-up pool). A node without those methods refuses the
     * reading and the plain rebroadcast goes on. What is sent again: this node's transactions of
     * the relayer not yet seen in a block, from the next nonce up, in order, read after the pool
     * was cleared (so one tracked meanwhile is not left out), leaving out calls past their
     * deadline (revisited: `expired`, their nonce filled). A send that fails is logged and the
     * rest still go; what was not sent is revisited. Answers the entries sent.
     */
    const heldAfterMs = Math.max(SettlementLimits.heldCheckAfterMs, 3 * blockTimeMs)
    const heldCheckedAtMs = new Map<Relayer, number>()
    const resendHeld = (late: ReadonlySet<Relayer>) =>
      Effect.gen(function*() {
        const checkedAtMs = Date.now()
        const due = [...late].filter((relayer) => checkedAtMs - (heldCheckedAtMs.get(relayer) ?? 0) >= heldAfterMs)
        if (due.length === 0) return []
        for (const relayer of due) heldCheckedAtMs.set(relayer, checkedAtMs)
        const pool = yield* rpc("reading the node's pool", () =>
          client.request({ method: "txpool_inspect" as never, params: [] as never })).pipe(
            Effect.map(decodePoolInspection),
            Effect.catch(() => Effect.succeed(Option.none()))
          )
        if (Option.isNone(pool)) return []
        const queuedByAddress = new Map(Object.entries(pool.value.queued).map(([address, byNonce]) => [address.toLowerCase(), byNonce]))
        const sent: Array<Tracked> = []
        for (const relayer of due) {
          const queued = queuedByAddress.get(relayer.address.toLowerCase())
          if (queued === undefined) continue
          yield* resendInNonceOrder(relayer, queued).pipe(
            Effect.tap((resent) => Effect.sync(() => sent.push(...resent))),
            Effect.catch((error) => Effect.logWarning("could not send a held relayer's transactions again", error))
          )
        }
        return sent
      })

    /** One relayer of `resendHeld`, given the nonces the pool holds `queued` for it. */
    const resendInNonceOrder = (relayer: Relayer, queued: Readonly<Record<string, unknown>>) =>
      Effect.gen(function*() {
        const next = yield* rpc("reading a relayer nonce", () => client.getTransactionCount({ address: relayer.address, blockTag: "latest" }))
        if (queued[String(next)] === undefined) return []
        yield* rpc("clearing a relayer's transactions from the node's pool", () =>
          client.request({ method: "anvil_removePoolTransactions" as never, params: [relayer.address] as never }))
        const byHash = new Map<Hex, { readonly nonce: number; readonly txHash: Hex; readonly rawTx: Hex; readonly entries: Array<Tracked> }>()
        for (const tracked of [...inFlight.values()].flat()) {
          if (tracked.relayer !== relayer || tracked.mined !== undefined || tracked.revertedBeforeDeadline === true) continue
          const deadline = tracked.request.deadlineSeconds
          if (deadline !== null && latestTimestampSeconds > deadline) continue
          const known = byHash.get(tracked.txHash)
          if (known !== undefined) known.entries.push(tracked)
          else {
            const nonce = nonceOf(tracked.rawTx)
            if (nonce !== undefined && nonce >= next) {
              byHash.set(tracked.txHash, { nonce, txHash: tracked.txHash, rawTx: tracked.rawTx, entries: [tracked] })
            }
          }
        }
        const resend = [...byHash.values()].sort((a, b) => a.nonce - b.nonce)
        yield* Effect.logWarning("the node held a relayer's next transaction: its transactions sent again in nonce order").pipe(
          Effect.annotateLogs({ relayer: relayer.address, nonce: next, transactions: resend.length })
        )
        yield* store.countBroadcast(resend.flatMap((sent) => sent.entries.map((tracked) => tracked.request.submissionId)))
        const sent: Array<Tracked> = []
        for (const transaction of resend) {
          const ok = yield* rpc("broadcasting", () => client.sendRawTransaction({ serializedTransaction: transaction.rawTx })).pipe(
            Effect.as(true),
            Effect.catch((error) =>
              isAlreadyKnown(error.cause) || isNonceTooLow(error.cause)
                ? Effect.succeed(true)
                : Effect.logWarning("broadcast failed; will retry").pipe(
                  Effect.annotateLogs({ tx_hash: transaction.txHash, error: String(error.cause) }),
                  Effect.as(false)
                ))
          )
          if (!ok) continue
          const now = Date.now()
          for (const tracked of transaction.entries) {
            tracked.sentAtMs = now
            sent.push(tracked)
          }
        }
        return sent
      })

    /**
     * The hashes of the blocks scanned lately, by number: a block whose parent is not the one
     * scanned at its height means the chain reorganised under the watcher. The depth that
     * `CHAIN_CONFIRMATIONS` asks for is the guard against exactly that, so what was seen mined
     * in a block no longer on the chain must not count on: it is watched again (and sent again
     * if no block of the new chain carries it). Kept far beyond the depth, to find the fork.
     */
    const scannedHashes = new Map<bigint, Hex>()
    const hashesKept = BigInt(confirmations + SettlementLimits.reorgDepthMax)

    /** Seen mined in a block the chain no longer has: watched again. */
    const forgetMined = (tracked: Tracked, now: number) => {
      // Applied by another transaction (or a placeholder with no bytes of its own): whether the
      // new chain applies it is decided from the chain once the deadline passes, as for a revert
      // (its own bytes, if any, were refused or reverted: nothing to send again).
      tracked.revertedBeforeDeadline = tracked.mined?.appliedBy !== undefined || tracked.rawTx === "0x"
      tracked.mined = undefined
      // Nodes put a replaced block's transactions back in their pool; one that does not gets
      // the same bytes again after the rebroadcast age.
      tracked.sentAtMs = now
    }

    /**
     * The block scanned at `from` may no longer be the chain's: finds the highest block the
     * chain and the scan agree on (reading only, so a failed read changes nothing and the next
     * round finds the same mismatch), then forgets what was seen mined above it and has the next
     * round scan the new chain from there. A height never scanned counts as agreed (below the
     * kept window, or below where this process started: deeper than the depth guards anyway).
     */
    const rewind = (from: bigint) =>
      Effect.gen(function*() {
        let fork = from
        let forkBlock: { readonly timestamp: bigint; readonly baseFeePerGas: bigint | null } | undefined
        while (scannedHashes.has(fork)) {
          const canonical = yield* rpc("reading a block", () => client.getBlock({ blockNumber: fork }))
          if (canonical.hash === scannedHashes.get(fork)) {
            forkBlock = canonical
            break
          }
          fork -= 1n
        }
        forkBlock ??= yield* rpc("reading a block", () => client.getBlock({ blockNumber: fork }))
        for (const n of scannedHashes.keys()) if (n > fork) scannedHashes.delete(n)
        lastScanned = fork
        // The replaced blocks' time and fees are not the chain's: a deadline is judged by the fork's.
        latestTimestampSeconds = forkBlock.timestamp
        baseFeeWei = forkBlock.baseFeePerGas ?? baseFeeWei
        // Equal: a block of this round was read before the chain moved on; nothing was replaced.
        if (fork === from) return
        let unseen = 0
        const now = Date.now()
        for (const tracked of [...inFlight.values()].flat()) {
          if (tracked.mined === undefined || tracked.mined.blockNumber <= fork) continue
          forgetMined(tracked, now)
          unseen += 1
        }
        yield* Effect.logWarning("the chain reorganised under the settlement watcher: what the replaced blocks carried is watched again").pipe(
          Effect.annotateLogs({ mode: chain.mode, replaced_from_block: (fork + 1n).toString(), transactions_unseen: unseen })
        )
      })

    // Recovery: everything not final that no live node drives, as the last run left it
    // (embedded: every earlier process is gone, so all of it; distributed: what dead nodes
    // left, including this node's previous life once its heartbeat is stale).
    // The watcher starts `CHAIN_CONFIRMATIONS` blocks below the head: a transaction in one of
    // those is seen mined by the scan (its block's hash kept), so a reorganisation replacing it
    // is followed as any other.
    const startHead = yield* rpc("reading the head", () => client.getBlockNumber())
    let lastScanned = startHead > BigInt(confirmations) ? startHead - BigInt(confirmations) : 0n
    const startBlock = yield* rpc("reading a block", () => client.getBlock({ blockNumber: lastScanned }))
    latestTimestampSeconds = startBlock.timestamp
    scannedHashes.set(lastScanned, startBlock.hash)
    const open = yield* store.adoptOrphans(chain.mode)
    for (const submission of open) yield* recover(submission)

    function recover(submission: Submission): Effect.Effect<void, ChainError | SqlError.SqlError> {
      return Effect.gen(function*() {
        const relayer = submission.relayer === null ? undefined : relayerByAddress.get(submission.relayer.toLowerCase())
        if (submission.rawTx === null || submission.txHash === null || relayer === undefined) {
          // Never signed (or signed by a relayer this node no longer has): sign now, unless it was applied.
          const applied = yield* appliedElsewhere(submission.request)
          if (Option.isSome(applied)) {
            const placeholder = orphan(submission, relayers[0]!)
            // Counted as any entry is (untrack takes it off the relayer's count).
            placeholder.relayer.inFlight += 1
            track(placeholder)
            return yield* settleFromReceipt(placeholder, applied.value)
          }
          return yield* signAndSend([submission.request], [])
        }
        relayer.inFlight += 1
        const tracked: Tracked = {
          request: submission.request,
          relayer,
          rawTx: submission.rawTx,
          txHash: submission.txHash,
          sentAtMs: 0,
          mined: undefined
        }
        track(tracked)
        // Its nonce is not handed out again, and its expiry is a gap the relayer knows to fill.
        const nonce = nonceOf(submission.rawTx)
        if (nonce !== undefined) yield* relayer.adopt({ relayer: relayer.address, nonce, rawTx: submission.rawTx, txHash: submission.txHash })
        const hash = submission.txHash
        const receipt = yield* rpc("reading a receipt", () => client.getTransactionReceipt({ hash })).pipe(
          Effect.map(Option.some),
          Effect.catch(() => Effect.succeed(Option.none<TransactionReceipt>()))
        )
        if (Option.isSome(receipt)) {
          // Its block's hash is checked against the one the scan keeps at that height (the
          // watcher starts the depth below the head), so a reorganisation replacing it is followed.
          tracked.mined = {
            blockNumber: receipt.value.blockNumber,
            timestampSeconds: yield* blockTimestamp(receipt.value.blockNumber),
            outcome: outcomeIn(submission.request, { success: receipt.value.status === "success", logs: receipt.value.logs }),
            blockHash: receipt.value.blockHash
          }
          return
        }
        yield* revisit(tracked)
      })
    }

    /** A block and, when it carries transactions and some of ours are in flight, its receipts. */
    const readBlock = (n: bigint) =>
      Effect.gen(function*() {
        const block = yield* rpc("reading a block", () => client.getBlock({ blockNumber: n }))
        const receipts = block.transactions.length > 0 && inFlight.size > 0
          ? (yield* rpc("reading block receipts", () => client.request({ method: "eth_getBlockReceipts", params: [`0x${n.toString(16)}`] }))) ?? []
          : []
        return { n, block, receipts }
      })

    let lagWarnedAtMs = 0

    /**
     * One watcher round: new blocks' receipts, confirmations, and revisits of stale sends.
     *
     * A round costs a few round trips however much it covers: the blocks are read in parallel,
     * the confirmations are written in one statement, the rest is concluded in parallel. A node
     * whose watcher fell behind (a busy process, a burst of blocks) so catches up instead of
     * falling further behind, every round doing more per trip (issue 16: at 1,024 clients a
     * block-by-block, transfer-by-transfer round lagged minutes behind the chain, and every
     * transfer mined meanwhile stayed `pending`).
     */
    const round = Effect.gen(function*() {
      const head = yield* rpc("reading the head", () => client.getBlockNumber())
      const last = head < lastScanned + BigInt(SettlementLimits.blocksPerRoundMax)
        ? head
        : lastScanned + BigInt(SettlementLimits.blocksPerRoundMax)
      const numbers: Array<bigint> = []
      for (let n = lastScanned + 1n; n <= last; n++) numbers.push(n)
      const reads = yield* Effect.forEach(numbers, (n) => Effect.exit(readBlock(n)), { concurrency: SettlementLimits.blockReadsInParallel })
      for (const read of reads) {
        // Applied in order up to the first block that could not be read: what was read counts, the
        // rest is read again next round (one failed call must not cost the round's progress).
        if (Exit.isFailure(read)) {
          yield* Effect.logWarning("settlement watcher could not read a block", read.cause)
          break
        }
        const { block, n, receipts } = read.value
        const parent = scannedHashes.get(n - 1n)
        if (parent !== undefined && block.parentHash !== parent) {
          yield* rewind(n - 1n)
          break
        }
        scannedHashes.set(n, block.hash)
        scannedHashes.delete(n - hashesKept)
        baseFeeWei = block.baseFeePerGas ?? baseFeeWei
        latestTimestampSeconds = block.timestamp
        for (const receipt of receipts) {
          for (const tracked of inFlight.get(receipt.transactionHash) ?? []) {
            tracked.mined = {
              blockNumber: n,
              timestampSeconds: block.timestamp,
              outcome: outcomeIn(tracked.request, { success: receipt.status === "0x1", logs: receipt.logs }),
              blockHash: block.hash
            }
          }
        }
        lastScanned = n
      }
      const now = Date.now()
      const behind = head - lastScanned
      if (behind > BigInt(SettlementLimits.blocksPerRoundMax) && now - lagWarnedAtMs > SettlementLimits.lagWarningEveryMs) {
        lagWarnedAtMs = now
        yield* Effect.logWarning("settlement watcher behind the chain").pipe(
          Effect.annotateLogs({ mode: chain.mode, blocks_behind: behind.toString() })
        )
      }
      const applied: Array<Tracked> = []
      const other: Array<Effect.Effect<void, ChainError | SqlError.SqlError>> = []
      const stale: Array<Tracked> = []
      const late = new Set<Relayer>()
      for (const tracked of [...inFlight.values()].flat()) {
        if (tracked.revertedBeforeDeadline === true) {
          const deadline = tracked.request.deadlineSeconds
          if (deadline === null || latestTimestampSeconds > deadline) other.push(concludeReverted(tracked))
        } else if (tracked.mined !== undefined) {
          // Seen mined in a block other than the one the scan kept at that height (recorded from
          // a receipt before the scan reached it, and replaced since): watched again.
          const scanned = scannedHashes.get(tracked.mined.blockNumber)
          if (scanned !== undefined && scanned !== tracked.mined.blockHash) {
            forgetMined(tracked, now)
            yield* Effect.logWarning("a transaction was seen mined in a block the chain replaced: watched again").pipe(
              Effect.annotateLogs({ mode: chain.mode, submission_id: tracked.request.submissionId })
            )
          } else if (deepEnough(tracked.mined.blockNumber)) {
            if (tracked.mined.outcome === "applied") applied.push(tracked)
            else other.push(conclude(tracked))
          }
        } else {
          // Rebroadcast only once every block is read: a transaction not seen while blocks remain
          // unread may well be in one of them. Past its deadline by a block already read it has
          // expired (or was applied: revisit looks at the chain's state) whatever is left to read.
          const unseenMs = now - tracked.sentAtMs
          if (unseenMs > heldAfterMs && behind <= 0n) late.add(tracked.relayer)
          const deadline = tracked.request.deadlineSeconds
          if (unseenMs > SettlementLimits.rebroadcastAfterMs && (behind <= 0n || (deadline !== null && latestTimestampSeconds > deadline))) {
            stale.push(tracked)
          }
        }
      }
      // Written first, forgotten after: a failed write leaves them tracked for the next round.
      for (let from = 0; from < applied.length; from += SettlementLimits.confirmationsPerStatementMax) {
        const chunk = applied.slice(from, from + SettlementLimits.confirmationsPerStatementMax)
        yield* finishConfirmed(chunk.map((tracked): Confirmation => ({
          _tag: "Confirmed",
          submissionId: tracked.request.submissionId,
          mode: chain.mode,
          txHash: tracked.mined!.appliedBy ?? tracked.txHash,
          blockNumber: tracked.mined!.blockNumber,
          blockTimestampSeconds: tracked.mined!.timestampSeconds
        })))
        for (const tracked of chunk) untrack(tracked)
      }
      // Each on its own: one failing (an RPC error, the database) must not interrupt another in
      // the middle of its step; it is logged and looked at again next round.
      const alone = (effect: Effect.Effect<void, ChainError | SqlError.SqlError>) =>
        effect.pipe(Effect.catch((error) => Effect.logWarning("settlement watcher could not conclude a transaction", error)))
      yield* Effect.forEach(other, alone, { concurrency: SettlementLimits.concludesInParallel, discard: true })
      // A relayer whose next transaction the node holds is sent again in nonce order first; what
      // that sent is not revisited now.
      const resent = new Set<Tracked>()
      if (late.size > 0) yield* alone(resendHeld(late).pipe(Effect.map((sent) => sent.forEach((tracked) => resent.add(tracked)))))
      yield* Effect.forEach(stale.filter((tracked) => !resent.has(tracked)), (tracked) => alone(revisit(tracked)), {
        concurrency: SettlementLimits.concludesInParallel,
        discard: true
      })
      if (now - nonceGapsTriedAtMs > SettlementLimits.nonceFillRetryMs && relayers.some((relayer) => relayer.hasGaps())) {
        yield* fillNonceGaps
      }
    })

    const pollMs = Math.max(25, Math.floor(blockTimeMs / 4))
    // With nothing in flight a round can only see the next block (its time, its base fee, a
    // reorganisation): once a block time is enough, and a send wakes the watcher at once (issue
    // 16: an idle node read the head 40 times a second, most of its idle CPU).
    const idlePollMs = Math.max(pollMs, blockTimeMs)
    yield* Effect.forkScoped(
      round.pipe(
        Effect.catch((error) => Effect.logWarning("settlement watcher round failed", error)),
        // A defect (a bug) must not end the watcher, or every transfer in flight would stay
        // `pending` until a restart: logged, and the next round runs after a pause.
        Effect.catchDefect((defect) =>
          Effect.logError("settlement watcher round failed unexpectedly", defect).pipe(
            Effect.andThen(Effect.sleep(SettlementLimits.defectPauseMs))
          )
        ),
        Effect.andThen(Effect.suspend(() => inFlight.size === 0 ? watcherWakeup.wait(idlePollMs) : Effect.sleep(pollMs))),
        Effect.forever
      )
    )

    /** Submissions this node is recording or signing right now (not yet sent). */
    const signing = new Set<string>()

    // A node that died leaves its submissions open: survivors adopt them once its heartbeat
    // is stale and finish them (the contract's replay nonce keeps a transaction the dead
    // node had broadcast and this one signs anew from being applied twice).
    if (adoptsOrphans) yield* Effect.forkScoped(
      Effect.gen(function*() {
        const adopted = yield* store.adoptOrphans(chain.mode)
        for (const submission of adopted) {
          const id = submission.request.submissionId
          if (bySubmission.has(id) || signing.has(id)) continue
          yield* Effect.logInfo("adopting a dead node's submission").pipe(Effect.annotateLogs({ submission_id: id, mode: chain.mode }))
          yield* recover(submission)
        }
      }).pipe(
        Effect.catch((error) => Effect.logWarning("adopting orphaned submissions failed", error)),
        Effect.catchDefect((defect) => Effect.logError("adopting orphaned submissions failed unexpectedly", defect)),
        Effect.repeat(Schedule.spaced(Duration.millis(SettlementLimits.adoptOrphansEveryMs))),
        Effect.delay(Duration.millis(SettlementLimits.adoptOrphansEveryMs))
      )
    )

    // Natural batching: recorded calls wait here only while every relayer has its most sends
    // (sign, record, broadcast) in progress; a relayer that becomes free takes what queued meanwhile.
    interface Queued {
      readonly request: SubmissionRequest
      readonly sent: Deferred.Deferred<void, ChainError | SqlError.SqlError>
    }
    const queue: Array<Queued> = []
    /** Sends (sign, record, broadcast) in progress per relayer; a relayer is free below `SettlementLimits.sendsPerRelayer`. */
    const sending = new Map(relayers.map((relayer) => [relayer, 0]))
    const freeRelayer = () =>
      relayers.reduce<Relayer | undefined>((best, r) =>
        sending.get(r)! < SettlementLimits.sendsPerRelayer && (best === undefined || sending.get(r)! < sending.get(best)!) ? r : best, undefined)
    const scope = yield* Effect.scope

    /** The oldest queued call and, if it is a confidential transfer, those queued for the same contract, up to `batchMax`. */
    const takeBatch = (): Array<Queued> => {
      const first = queue.shift()!
      const taken = [first]
      if (first.request.kind !== "confidential_transfer") return taken
      for (let i = 0; i < queue.length && taken.length < batchMax;) {
        const next = queue[i]!
        if (next.request.kind === "confidential_transfer" && next.request.target === first.request.target) {
          taken.push(next)
          queue.splice(i, 1)
        } else {
          i++
        }
      }
      return taken
    }

    const dispatch: Effect.Effect<void> = Effect.gen(function*() {
      for (let relayer = freeRelayer(); queue.length > 0 && relayer !== undefined; relayer = freeRelayer()) {
        sending.set(relayer, sending.get(relayer)! + 1)
        const taken = takeBatch()
        yield* signAndSend(taken.map((item) => item.request), [], relayer).pipe(
          Effect.exit,
          Effect.flatMap((exit) => Effect.forEach(taken, (item) => Deferred.done(item.sent, exit), { discard: true })),
          Effect.ensuring(Effect.sync(() => sending.set(relayer, sending.get(relayer)! - 1))),
          Effect.andThen(Effect.suspend(() => dispatch)),
          Effect.forkIn(scope)
        )
      }
    })

    /**
     * Queues a recorded call and waits until its transaction is signed, recorded and broadcast.
     * Without batching every call is signed at once, as many at a time as callers submit: a
     * queue would only cap how many sends overlap.
     */
    const enqueue = (request: SubmissionRequest) =>
      batchMax === 1 ? signAndSend([request], []) : Effect.gen(function*() {
        const sent = yield* Deferred.make<void, ChainError | SqlError.SqlError>()
        queue.push({ request, sent })
        // One turn before taking from the queue: the calls submitted in the same turn (the
        // transfers recorded in one transaction submit together) then leave in one transaction.
        yield* Effect.yieldNow
        yield* dispatch
        yield* Deferred.await(sent)
      })

    /**
     * Runs `send` for a submission this node neither signs nor tracks now, claimed for it: checked
     * and claimed in one step, so two callers in this process never both sign it. Not
     * interruptible: a caller that goes away (a client that hung up) must not cut a submission
     * between its signature and its record, which would leave the relayer's nonce taken and never
     * broadcast, and every later transaction of that relayer stuck behind the gap. Every step is
     * bounded (SQL, and RPC calls with the transport's timeout).
     */
    const claimed = (id: string, send: Effect.Effect<void, ChainError | SqlError.SqlError>) =>
      Effect.suspend(() => {
        if (signing.has(id) || bySubmission.has(id)) return Effect.void
        signing.add(id)
        return Effect.uninterruptible(send).pipe(Effect.ensuring(Effect.sync(() => signing.delete(id))))
      })

    const engine: Engine = {
      // Recorded in the caller's committed transaction: no INSERT, no read. Another submit of the
      // same id (a retry's `current`, the recovery round) meanwhile finds it claimed or tracked;
      // should one have signed and concluded it in the microseconds before this claim, the second
      // transaction is refused by the contract's replay nonce, and its failure is not written
      // over the final row (`resolve` leaves a final row as it is).
      submitRecorded: (request) => claimed(request.submissionId, enqueue(request)).pipe(Effect.withSpan("Settlement.submitRecorded")),
      submit: (request) =>
        claimed(request.submissionId, Effect.gen(function*() {
          const id = request.submissionId
          if (yield* store.record(request)) return yield* enqueue(request)
          // Submitted before: nothing to do, unless it is still only recorded (its first signing
          // failed): then this call signs it. Callers' recovery rounds re-drive it this way.
          const stored = yield* store.get(id)
          if (Option.isNone(stored)) return
          if (stored.value.status === "recorded") return yield* enqueue(stored.value.request)
          // Sent by this node yet not tracked here: a write whose answer the database link lost
          // (its bytes recorded, then the error; or untracked to conclude, then the outcome's
          // write failed). No one else drives it while this node lives: recover it as at start.
          if (stored.value.status === "sent" && stored.value.ownedHere) {
            yield* Effect.logWarning("driving again a sent submission this node had lost track of").pipe(
              Effect.annotateLogs({ submission_id: id })
            )
            yield* recover(stored.value)
          }
        })).pipe(Effect.withSpan("Settlement.submit"))
    }
    return engine
  })

/** A stand-in for a submission this node never tracked, so its outcome can be recorded. */
const orphan = (submission: Submission, relayer: Relayer): Tracked => ({
  request: submission.request,
  relayer,
  rawTx: "0x",
  txHash: submission.txHash ?? "0x",
  sentAtMs: 0,
  mined: undefined
})
