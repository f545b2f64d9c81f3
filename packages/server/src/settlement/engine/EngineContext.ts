/**
 * The per-mode settlement engine's context: what every step of the engine (send, batch, watch,
 * conclude, rebroadcast, reorganisation, recovery) reads and changes, built once per mode by
 * `Engine.makeEngine` and passed explicitly to each step.
 *
 * Why one record: the steps share the transactions in flight, the relayer pool and the watcher's
 * view of the chain; a record makes that sharing visible (every step names what it takes)
 * instead of hiding it in a closure. Nothing here performs I/O but `rpc`, which types a node's
 * failure as a {@link ChainError} saying whether a retry can help.
 *
 * The steps are `Effect.fnUntraced`: some run per transfer (conclude, settle from a receipt), and a
 * span per call costs the transfer path CPU (`@pps/guardian` SpanLog.ts says how much); the engine's spans are the ones
 * the settlement service already had.
 *
 * @since 0.5.0
 */
import { type Deferred, Effect, type Scope } from "effect"
import type { SqlError } from "effect/sql"
import type { Hex, PublicClient } from "viem"
import type { Wakeup } from "../../events/Wakeup.ts"
import { type ChainContext, ChainError } from "../Chains.ts"
import type { Resolution, SubmissionRequest } from "../domain.ts"
import type { Relayer } from "../Relayer.ts"
import type { SubmissionStore } from "../SubmissionStore.ts"

/**
 * What the mined transaction did to one submission: `applied`; `expired` (a batch item skipped
 * past its deadline: it can never apply); `reverted` (the transaction reverted, or a batch item
 * was skipped for a used nonce or a bad signature: whether another transaction applied it is
 * looked up, exactly as for a reverted single call).
 *
 * @since 0.5.0
 * @category models
 */
export type ItemOutcome = "applied" | "expired" | "reverted"

/**
 * A submission the engine tracks in flight: its request, the transaction that carries it, and
 * what the watcher saw of that transaction.
 *
 * @since 0.5.0
 * @category models
 */
export interface Tracked {
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

/** @since 0.5.0 @category models */
export type Confirmation = Extract<Resolution, { readonly _tag: "Confirmed" }>
/** Writes an outcome once, then tells the waiters and subscribers. @since 0.5.0 @category models */
export type Finish = (resolution: Resolution) => Effect.Effect<void, SqlError.SqlError>
/** `Finish` for a watcher round's confirmations: one write for all of them. @since 0.5.0 @category models */
export type FinishConfirmed = (confirmations: ReadonlyArray<Confirmation>) => Effect.Effect<void, SqlError.SqlError>

/** A failure of a step that needed the chain or the database. @since 0.5.0 @category errors */
export type StepError = ChainError | SqlError.SqlError

/**
 * A recorded call waiting for a free relayer (batching), and how its caller learns it left.
 *
 * @since 0.5.0
 * @category models
 */
export interface Queued {
  readonly request: SubmissionRequest
  readonly sent: Deferred.Deferred<void, StepError>
}

/**
 * What the watcher knows of the chain, changed by its rounds and by a reorganisation.
 *
 * @since 0.5.0
 * @category models
 */
export interface ChainView {
  /** The latest base fee seen: the relayers' fee cap follows it. */
  baseFeeWei: bigint
  /** The chain's time at the last block scanned: deadlines are judged by it, not by ours. */
  latestTimestampSeconds: bigint
  /** The highest block scanned. */
  lastScanned: bigint
  /** The highest head the watcher has read. */
  head: bigint
  /** When the watcher first read `head` (Clock milliseconds; 0: none yet). */
  headSeenAtMs: number
  /** How long before `headSeenAtMs` the watcher had read the head before it: `head` was made within that time. */
  headSeenWithinMs: number
  /** Blocks `head` moved on from the head read before it: more than one, blocks come faster than the block time. */
  headStep: bigint
  /** When the watcher last read the head (Clock milliseconds). */
  headReadAtMs: number
  /** When the watcher last said it was behind the chain (Clock milliseconds). */
  lagWarnedAtMs: number
  /** When nonce gaps were last filled (Clock milliseconds). */
  nonceGapsTriedAtMs: number
}

/**
 * What a mode's engine is made from: its chain, the limits configured, the store, and how it
 * reports outcomes.
 *
 * @since 0.5.0
 * @category models
 */
export interface EngineOptions {
  readonly chain: ChainContext
  /** CHAIN_CONFIRMATIONS: the depth a block must reach before what it carries counts. */
  readonly confirmations: number
  readonly blockTimeMs: number
  /** Most calls in one transaction (SETTLEMENT_BATCH_MAX); 1 sends every call on its own. */
  readonly batchMax: number
  readonly store: SubmissionStore["Service"]
  readonly finish: Finish
  readonly finishConfirmed: FinishConfirmed
  /** Told when a submission starts and stops being tracked in flight (signed, until concluded or dropped). */
  readonly tracking: (submissionId: string, tracked: boolean) => void
  /** Whether this node adopts dead nodes' submissions (workers do; an api-only node does not). */
  readonly adoptsOrphans: boolean
}

/**
 * @since 0.5.0
 * @category models
 */
export interface EngineContext extends EngineOptions {
  readonly client: PublicClient
  readonly relayers: ReadonlyArray<Relayer>
  readonly relayerByAddress: ReadonlyMap<string, Relayer>
  /** By transaction hash: one entry per submission the transaction carries (several for a batch). */
  readonly inFlight: Map<Hex, Array<Tracked>>
  readonly bySubmission: Map<string, Tracked>
  /** Wakes the watcher from its idle wait when a transaction goes in flight. */
  readonly watcherWakeup: Wakeup
  readonly view: ChainView
  /**
   * The hashes of the blocks scanned lately, by number: a block whose parent is not the one
   * scanned at its height means the chain reorganised under the watcher. The depth that
   * `CHAIN_CONFIRMATIONS` asks for is the guard against exactly that, so what was seen mined
   * in a block no longer on the chain must not count on: it is watched again (and sent again
   * if no block of the new chain carries it). Kept far beyond the depth, to find the fork.
   */
  readonly scannedHashes: Map<bigint, Hex>
  readonly hashesKept: bigint
  /** A relayer with a transaction unseen this long has the node's pool looked at (see `Rebroadcast.resendHeld`). */
  readonly heldAfterMs: number
  readonly heldCheckedAtMs: Map<Relayer, number>
  /** Submissions this node is recording or signing right now (not yet sent). */
  readonly signing: Set<string>
  /**
   * Natural batching: recorded calls wait here only while every relayer has its most sends
   * (sign, record, broadcast) in progress; a relayer that becomes free takes what queued meanwhile.
   */
  readonly queue: Array<Queued>
  /** Sends (sign, record, broadcast) in progress per relayer; a relayer is free below `SettlementLimits.sendsPerRelayer`. */
  readonly sending: Map<Relayer, number>
  /** The engine's scope: the sends a dispatch forks live as long as the engine. */
  readonly scope: Scope.Scope
}

/**
 * Node answers that no retry of the same call changes: a refused or reverted call, parameters
 * the node rejects, a nonce or a transaction it already has. Anything else (no answer, a
 * timeout, a server error) may pass on a later try.
 */
const refusedByNode =
  /execution reverted|revert|invalid (argument|params|sender|signature|transaction)|nonce too low|nonce has already been used|replacement transaction underpriced|already known|known transaction|already imported|intrinsic gas too low|exceeds block gas limit/i

/**
 * A node's failure to do `what`, typed: `retryable` unless the node refused the call itself.
 *
 * @since 0.5.0
 * @category errors
 */
export const chainFailure = (mode: string, what: string, cause: unknown): ChainError =>
  new ChainError({ message: `${what} failed on the ${mode} chain`, cause, retryable: !refusedByNode.test(String(cause)) })

/**
 * Runs one call to the node of the context's chain, its failure typed as a {@link ChainError}.
 *
 * @since 0.5.0
 * @category combinators
 */
export const rpc = <A>(context: EngineContext, what: string, run: (client: PublicClient) => Promise<A>): Effect.Effect<A, ChainError> =>
  Effect.tryPromise({ try: () => run(context.client), catch: (cause) => chainFailure(context.chain.mode, what, cause) })

/** The least loaded relayer of the pool. @since 0.5.0 @category combinators */
export const pickRelayer = (context: EngineContext): Relayer =>
  context.relayers.reduce((best, r) => (r.inFlight < best.inFlight ? r : best))

/**
 * Starts tracking `tracked` in flight, and wakes the watcher.
 *
 * @since 0.5.0
 * @category combinators
 */
export const track = (context: EngineContext, tracked: Tracked): void => {
  const group = context.inFlight.get(tracked.txHash)
  if (group === undefined) context.inFlight.set(tracked.txHash, [tracked])
  else group.push(tracked)
  context.bySubmission.set(tracked.request.submissionId, tracked)
  context.tracking(tracked.request.submissionId, true)
  context.watcherWakeup.wakeUnsafe()
}

/**
 * Stops tracking `tracked` (once per entry: the relayer's count is what picks the least loaded one).
 *
 * @since 0.5.0
 * @category combinators
 */
export const untrack = (context: EngineContext, tracked: Tracked): void => {
  const group = context.inFlight.get(tracked.txHash)
  const index = group?.indexOf(tracked) ?? -1
  if (group === undefined || index < 0) return
  group.splice(index, 1)
  if (group.length === 0) context.inFlight.delete(tracked.txHash)
  if (context.bySubmission.get(tracked.request.submissionId) === tracked) {
    context.bySubmission.delete(tracked.request.submissionId)
    context.tracking(tracked.request.submissionId, false)
  }
  tracked.relayer.inFlight = Math.max(0, tracked.relayer.inFlight - 1)
}

/** Every entry in flight. @since 0.5.0 @category combinators */
export const allInFlight = (context: EngineContext): Array<Tracked> => [...context.inFlight.values()].flat()

/** Whether a block is as deep as CHAIN_CONFIRMATIONS asks, counted to the last block scanned. @since 0.5.0 @category combinators */
export const deepEnough = (context: EngineContext, blockNumber: bigint): boolean =>
  blockNumber + BigInt(context.confirmations) - 1n <= context.view.lastScanned

/** Whether the chain's time (at the last block scanned) is past `deadline`. @since 0.5.0 @category combinators */
export const pastDeadline = (context: EngineContext, deadline: bigint | null): boolean =>
  deadline !== null && context.view.latestTimestampSeconds > deadline

/**
 * The confirmation of `tracked` from what the watcher saw mined: the transaction that applied it
 * (its own, or another's), at that block.
 *
 * @since 0.5.0
 * @category combinators
 */
export const confirmationOf = (context: EngineContext, tracked: Tracked, mined: NonNullable<Tracked["mined"]>): Confirmation => ({
  _tag: "Confirmed",
  submissionId: tracked.request.submissionId,
  mode: context.chain.mode,
  txHash: mined.appliedBy ?? tracked.txHash,
  blockNumber: mined.blockNumber,
  blockTimestampSeconds: mined.timestampSeconds
})
