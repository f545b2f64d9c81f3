/**
 * The per-mode settlement engine: builds the {@link EngineContext} (relayers, the transactions
 * in flight, the watcher's view of the chain), recovers what the last run left open, starts the
 * watcher (and the adoption of dead nodes' work), and answers `submit` / `submitRecorded` with
 * the steps of `Batch`, `Send` and `Recover`. Only wiring: every step is a function of its own.
 *
 * @since 0.5.0
 */
import { Effect, Option } from "effect"
import { makeWakeup } from "../../events/Wakeup.ts"
import { SettlementLimits, type SubmissionRequest } from "../domain.ts"
import { makeRelayer } from "../Relayer.ts"
import { claimed, enqueue } from "./Batch.ts"
import { type ChainView, chainFailure, type EngineContext, type EngineOptions, type StepError } from "./EngineContext.ts"
import { adoptOrphansForever, recover, recoverAtStart } from "./Recover.ts"
import { runWatcher } from "./Watch.ts"

/**
 * @since 0.5.0
 * @category models
 */
export interface Engine {
  readonly submit: (request: SubmissionRequest) => Effect.Effect<void, StepError>
  readonly submitRecorded: (request: SubmissionRequest) => Effect.Effect<void, StepError>
}

/** The context of a mode's engine, its relayers made and its chain view read from the latest block. */
const makeContext = Effect.fnUntraced(function*(options: EngineOptions) {
  const { chain } = options
  const client = chain.client
  const latest = yield* Effect.tryPromise({
    try: () => client.getBlock({ blockTag: "latest" }),
    catch: (cause) => chainFailure(chain.mode, "reading the latest block", cause)
  })
  const view: ChainView = {
    baseFeeWei: latest.baseFeePerGas ?? 0n,
    latestTimestampSeconds: 0n,
    lastScanned: 0n,
    head: 0n,
    headSeenAtMs: 0,
    headSeenWithinMs: 0,
    headStep: 0n,
    headReadAtMs: 0,
    lagWarnedAtMs: 0,
    nonceGapsTriedAtMs: 0
  }
  const relayers = yield* Effect.forEach(chain.relayers, (account) => makeRelayer(client, chain.chainId, account, () => view.baseFeeWei))
  const context: EngineContext = {
    ...options,
    client,
    relayers,
    relayerByAddress: new Map(relayers.map((r) => [r.address.toLowerCase(), r])),
    inFlight: new Map(),
    bySubmission: new Map(),
    watcherWakeup: yield* makeWakeup,
    view,
    scannedHashes: new Map(),
    hashesKept: BigInt(options.confirmations + SettlementLimits.reorgDepthMax),
    heldAfterMs: Math.max(SettlementLimits.heldCheckAfterMs, 3 * options.blockTimeMs),
    heldCheckedAtMs: new Map(),
    signing: new Set(),
    queue: [],
    sending: new Map(relayers.map((relayer) => [relayer, 0])),
    scope: yield* Effect.scope
  }
  return context
})

/**
 * `submit`: records the call (or finds it recorded before) and signs it, unless it was
 * submitted already.
 */
const submitStep = (context: EngineContext, request: SubmissionRequest): Effect.Effect<void, StepError> =>
  claimed(
    context,
    request.submissionId,
    Effect.gen(function*() {
      const id = request.submissionId
      if (yield* context.store.record(request)) return yield* enqueue(context, request)
      // Submitted before: nothing to do, unless it is still only recorded (its first signing
      // failed): then this call signs it. Callers' recovery rounds re-drive it this way.
      const stored = yield* context.store.get(id)
      if (Option.isNone(stored)) return
      if (stored.value.status === "recorded") return yield* enqueue(context, stored.value.request)
      // Sent by this node yet not tracked here: a write whose answer the database link lost
      // (its bytes recorded, then the error; or untracked to conclude, then the outcome's
      // write failed). No one else drives it while this node lives: recover it as at start.
      if (stored.value.status === "sent" && stored.value.ownedHere) {
        yield* Effect.logWarning("driving again a sent submission this node had lost track of").pipe(
          Effect.annotateLogs({ submission_id: id })
        )
        yield* recover(context, stored.value)
      }
    })
  ).pipe(Effect.withSpan("Settlement.submit"))

/**
 * The per-mode machinery: relayers, the transactions in flight, the block watcher.
 *
 * @since 0.5.0
 * @category constructors
 */
export const makeEngine = Effect.fnUntraced(function*(options: EngineOptions) {
  const context = yield* makeContext(options)
  yield* recoverAtStart(context)
  yield* runWatcher(context)
  if (options.adoptsOrphans) yield* adoptOrphansForever(context)
  const engine: Engine = {
    // Recorded in the caller's committed transaction: no INSERT, no read. Another submit of the
    // same id (a retry's `current`, the recovery round) meanwhile finds it claimed or tracked;
    // should one have signed and concluded it in the microseconds before this claim, the second
    // transaction is refused by the contract's replay nonce, and its failure is not written
    // over the final row (`resolve` leaves a final row as it is).
    submitRecorded: (request) =>
      claimed(context, request.submissionId, enqueue(context, request)).pipe(Effect.withSpan("Settlement.submitRecorded")),
    submit: (request) => submitStep(context, request)
  }
  return engine
})
