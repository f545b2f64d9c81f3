/**
 * How a submission's outcome reaches those waiting for it: the outcome is written once, then
 * the waiters of its id and the subscribers of every outcome are told; a waiter registered
 * late reads the stored outcome instead.
 *
 * Why apart from the engines: one set of waiters serves every mode's engine, and the order
 * (register, then read the store) is what keeps an outcome written in between from being
 * missed.
 *
 * @since 0.5.0
 */
import { Deferred, Duration, Effect, Option, PubSub } from "effect"
import type { SqlError } from "effect/sql"
import type { Resolution } from "./domain.ts"
import type { Confirmation } from "./engine/EngineContext.ts"
import type { SubmissionStore } from "./SubmissionStore.ts"

/**
 * @since 0.5.0
 * @category models
 */
export interface ResolutionsContext {
  readonly store: SubmissionStore["Service"]
  readonly hub: PubSub.PubSub<Resolution>
  readonly waiters: Map<string, Deferred.Deferred<Resolution>>
  /**
   * Submissions this process's engine tracks in flight and has not announced: their outcome
   * reaches the waiters through `announce` or `deliverStored`, so a waiter registered while
   * its id is here need not read the store first (one read per transfer saved). An id leaves
   * before its waiters are looked up, so a waiter that saw it here is registered before that
   * lookup; it also leaves when the engine stops tracking it (concluded before its outcome is
   * written, or signed again), so a waiter then reads the store, as the recovery round's does
   * when a write's answer was lost. A submission another node adopted and finished (this one
   * looked dead) stays until this node's own watcher concludes it (`deliverStored`): later,
   * not lost.
   */
  readonly submittedHere: Set<string>
}

/**
 * @since 0.5.0
 * @category constructors
 */
export const makeResolutions = (store: SubmissionStore["Service"]) =>
  Effect.map(PubSub.unbounded<Resolution>(), (hub): ResolutionsContext => ({
    store,
    hub,
    waiters: new Map(),
    submittedHere: new Set()
  }))

const waiterFor = (context: ResolutionsContext, submissionId: string) =>
  Effect.gen(function*() {
    const existing = context.waiters.get(submissionId)
    if (existing !== undefined) return existing
    const created = yield* Deferred.make<Resolution>()
    context.waiters.set(submissionId, created)
    return created
  })

/** Tells the waiters and subscribers of an outcome just written. */
const announce = (context: ResolutionsContext, resolution: Resolution) =>
  Effect.gen(function*() {
    context.submittedHere.delete(resolution.submissionId)
    yield* Effect.logInfo("submission resolved").pipe(Effect.annotateLogs({
      submission_id: resolution.submissionId,
      outcome: resolution._tag,
      tx_hash: resolution.txHash ?? "none"
    }))
    const waiter = context.waiters.get(resolution.submissionId)
    if (waiter !== undefined) {
      yield* Deferred.succeed(waiter, resolution)
      context.waiters.delete(resolution.submissionId)
    }
    yield* PubSub.publish(context.hub, resolution)
  })

/**
 * An outcome written before this process's own (another node's, after it adopted the
 * submission): the waiters get the stored one, as a waiter registered now would read it.
 */
const deliverStored = (context: ResolutionsContext, submissionId: string) =>
  Effect.gen(function*() {
    context.submittedHere.delete(submissionId)
    const waiter = context.waiters.get(submissionId)
    if (waiter === undefined) return
    const stored = yield* context.store.resolution(submissionId)
    if (Option.isNone(stored)) return
    yield* Deferred.succeed(waiter, stored.value)
    context.waiters.delete(submissionId)
  }).pipe(
    // Never fails its caller (a round's other outcomes still go out): a waiter left waiting
    // answers `pending` at its timeout and the recovery round completes the transfer.
    Effect.catch((error) =>
      Effect.logWarning("reading an outcome written elsewhere failed", error).pipe(
        Effect.annotateLogs({ submission_id: submissionId })
      ))
  )

/**
 * Writes the outcome once, then tells the waiters and subscribers.
 *
 * @since 0.5.0
 * @category steps
 */
export const finish = (context: ResolutionsContext, resolution: Resolution): Effect.Effect<void, SqlError.SqlError> =>
  Effect.gen(function*() {
    if (yield* context.store.resolve(resolution)) yield* announce(context, resolution)
    else yield* deliverStored(context, resolution.submissionId)
  })

/**
 * `finish` for a watcher round's confirmations: one write for all of them.
 *
 * @since 0.5.0
 * @category steps
 */
export const finishConfirmed = (
  context: ResolutionsContext,
  confirmations: ReadonlyArray<Confirmation>
): Effect.Effect<void, SqlError.SqlError> =>
  Effect.gen(function*() {
    const changed = new Set(yield* context.store.confirmMany(confirmations))
    for (const confirmation of confirmations) {
      if (changed.has(confirmation.submissionId)) yield* announce(context, confirmation)
      else yield* deliverStored(context, confirmation.submissionId)
    }
  })

/**
 * The outcome within `timeoutMs`, or None while still pending.
 *
 * @since 0.5.0
 * @category steps
 */
export const awaitResolution = (
  context: ResolutionsContext,
  submissionId: string,
  timeoutMs: number
): Effect.Effect<Option.Option<Resolution>, SqlError.SqlError> =>
  Effect.gen(function*() {
    const waiter = yield* waiterFor(context, submissionId)
    // Tracked here and not announced: its outcome will reach the waiter just registered.
    if (context.submittedHere.has(submissionId)) {
      return yield* Deferred.await(waiter).pipe(Effect.timeoutOption(Duration.millis(timeoutMs)))
    }
    // Read after registering the waiter, so an outcome written in between is not missed.
    const stored = yield* context.store.resolution(submissionId)
    if (Option.isSome(stored)) {
      // Complete the shared waiter before dropping it: another caller may be waiting on it
      // and `finish` may already have looked for it.
      yield* Deferred.succeed(waiter, stored.value)
      context.waiters.delete(submissionId)
      return stored
    }
    return yield* Deferred.await(waiter).pipe(Effect.timeoutOption(Duration.millis(timeoutMs)))
  })

/**
 * What the engine tells on tracking: a submission tracked in flight is "submitted here".
 *
 * @since 0.5.0
 * @category steps
 */
export const trackingIn = (context: ResolutionsContext) => (submissionId: string, tracked: boolean): void => {
  if (tracked) context.submittedHere.add(submissionId)
  else context.submittedHere.delete(submissionId)
}
