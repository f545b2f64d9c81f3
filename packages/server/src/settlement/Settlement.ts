/**
 * Settlement: gets contract calls mined exactly once, and reports how each ended.
 *
 * Submission: the call is recorded (chain_submissions) before anything else;
 * then a relayer — the least loaded of a pool, each with its own nonce
 * sequence, so throughput is not capped by one — signs it with explicit gas,
 * fees and chain id, the signed bytes are recorded, and only then broadcast.
 *
 * Batching (when `SETTLEMENT_BATCH_MAX` > 1, the default 32): the calls
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
 * Each step is a function of its own over the engine's explicit context (`engine/`):
 * `EngineContext` (the state the steps share), `Send` (sign, record, broadcast), `Batch` (the
 * queue and the claim), `Watch` (the watcher's round), `Conclude` (confirm or fail),
 * `Rebroadcast` (revisit, held transactions, nonce gaps), `Reorg` (a chain that changed under
 * the watcher), `Recover` (at start and from dead nodes), `ChainReads` (what the chain says),
 * `Engine` (wiring one mode's engine); `Resolutions` tells the waiters. This layer only wires.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Option, Stream } from "effect"
import type { SqlError, Statement } from "effect/sql"
import type { Mode } from "@pps/api/ApiKeys"
import { AppConfig, runsWorkers } from "../config/AppConfig.ts"
import { type ChainContext, type ChainError, Chains } from "./Chains.ts"
import type { Resolution, SubmissionRequest } from "./domain.ts"
import { type Engine, makeEngine } from "./engine/Engine.ts"
import { awaitResolution, finish, finishConfirmed, makeResolutions, trackingIn } from "./Resolutions.ts"
import { SubmissionStore } from "./SubmissionStore.ts"

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

/**
 * The stored transactions no open submission carries go every few minutes (a batch's bytes are
 * stored once under its hash, and a re-signed batch leaves its earlier bytes behind): the table
 * holds what is in flight, not every transaction ever sent. Safe on every node at once: a delete
 * of rows nothing reads.
 */
const sweepSettledTransactions = (store: SubmissionStore["Service"]) =>
  store.forgetSettledTransactions(settledTransactionGraceMs, settledTransactionSlice).pipe(
    Effect.catchCause((cause) => Effect.logWarning("forgetting settled transactions failed", cause)),
    Effect.andThen(Effect.sleep(settledTransactionSweepMs)),
    Effect.forever,
    Effect.forkScoped
  )

/**
 * @since 0.1.0
 * @category services
 */
export class Settlement extends Context.Service<Settlement, {
  /** Records, signs and broadcasts the call; a second submit of the same id is a no-op. */
  readonly submit: (request: SubmissionRequest) => Effect.Effect<void, ChainUnavailable | ChainError | SqlError.SqlError>
  /**
   * Records calls in the caller's SQL transaction, so that they commit with what they settle;
   * `submitRecorded` signs and broadcasts them once it committed. A crash between the two leaves
   * them `recorded`: adopted at the next start, and signed by a later `submit` of the same id. A
   * transfer's record writes its call through `recordStatement` instead, within its one
   * statement (transfers/record.ts): the same rows, the same guarantees.
   */
  readonly record: (requests: ReadonlyArray<SubmissionRequest>) => Effect.Effect<void, SqlError.SqlError>
  /** `record`'s statement, not run, for a caller that writes it within a larger statement (transfers/record.ts). */
  readonly recordStatement: (requests: ReadonlyArray<SubmissionRequest>) => Statement.Fragment
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
      const resolutions = yield* makeResolutions(store)
      const engines = new Map<Mode, Engine>()
      for (const mode of ["test", "live"] as const) {
        const chain = chains.get(mode)
        if (Option.isNone(chain)) continue
        engines.set(mode, yield* makeEngine({
          chain: chain.value,
          confirmations: config.chainConfirmations,
          blockTimeMs: config.chainBlockTimeMs,
          batchMax: config.settlementBatchMax,
          store,
          finish: (resolution) => finish(resolutions, resolution),
          finishConfirmed: (confirmations) => finishConfirmed(resolutions, confirmations),
          tracking: trackingIn(resolutions),
          adoptsOrphans: runsWorkers(config)
        }))
      }
      if (runsWorkers(config)) yield* sweepSettledTransactions(store)
      const engineOf = (mode: Mode) => {
        const engine = engines.get(mode)
        return engine === undefined ? Effect.fail(new ChainUnavailable(mode)) : Effect.succeed(engine)
      }
      return Settlement.of({
        submit: (request) => Effect.flatMap(engineOf(request.mode), (engine) => engine.submit(request)),
        record: (requests) => store.recordAll(requests).pipe(Effect.asVoid),
        recordStatement: store.recordStatement,
        submitRecorded: (request) => Effect.flatMap(engineOf(request.mode), (engine) => engine.submitRecorded(request)),
        awaitResolution: (submissionId, timeoutMs) => awaitResolution(resolutions, submissionId, timeoutMs),
        resolutions: Stream.fromPubSub(resolutions.hub),
        chain: (mode) => chains.get(mode)
      })
    })
  ).pipe(Layer.provide(SubmissionStore.layer))
}
