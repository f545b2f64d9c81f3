/**
 * Serving one claimed subscription: its due deliveries, oldest due first, one request at a time,
 * until none is due, its lease is lost or it is deleted. A delivery waiting for its retry does not
 * block later deliveries of its subscription: one poisoned event must not stall a subscription
 * for 24 hours (receivers order by `timestamp` and dedupe by `webhook-id`, as with Svix and
 * Stripe).
 *
 * The next request does not wait for the previous attempt's result to be written: results are
 * queued to the node's writer (recordAttempts.ts), which writes what has accumulated in one
 * statement and one sync of the disk, while this sender goes on with the batch it read (at most
 * `dueBatchMax`). A delivery counts as delivered only once its result is written; every result
 * of a batch is written before the next batch is read, so a delivery is never read as due while
 * its attempt's result is on its way. The lease is known to be held for `leaseMs - leaseFreshMs`
 * more before every request (from the claim, the last result written, or a renewal), as it was
 * when each request waited for the previous result. What changes: a crash can lose the results
 * of up to one batch of requests already sent (sent again after the restart, as the one in flight
 * was before; receivers dedupe by `webhook-id`), and a subscription deleted on another node can
 * still get the requests sent before the next result written tells this one (a delete on this
 * node interrupts its sender at once, as before).
 *
 * @since 0.8.0
 */
import { Clock, Deferred, Effect, Option } from "effect"
import { database, type DependencyUnavailable } from "../../platform/Unavailable.ts"
import { attempt, openSecrets, type SentAttempt, settle } from "./attempt.ts"
import { type DispatchContext, dueBatchMax, iso, leaseFreshMs, leaseMs } from "./DispatchContext.ts"

// Built once: the whole serving loop's store failures are typed here, not per delivery.
const storeUnavailable = database("Dispatcher.serveSubscription")

/** One sender's state: the lease's end as last set and found held, and the results not yet settled. */
interface SenderState {
  heldUntilMs: number
  lost: boolean
  readonly unsettled: Array<SentAttempt>
}

/** Settles the oldest sent attempts: those already written, or (`all`) every one. */
const settleSent = (webhookId: string, state: SenderState, all: boolean) =>
  Effect.gen(function*() {
    while (state.unsettled.length > 0 && (all || Deferred.isDoneUnsafe(state.unsettled[0]!.written))) {
      const held = yield* settle(webhookId, state.unsettled.shift()!)
      if (held === undefined) state.lost = true
      else state.heldUntilMs = Math.max(state.heldUntilMs, held)
    }
  })

/**
 * Makes sure the lease has at least `leaseMs - leaseFreshMs` left before a request: from the
 * results already written, else by renewing it. False when it is lost (or the subscription
 * deleted).
 */
const keepLease = (context: DispatchContext, webhookId: string, state: SenderState) =>
  Effect.gen(function*() {
    yield* settleSent(webhookId, state, false)
    if (state.lost) return false
    const fresh = (nowMs: number) => state.heldUntilMs - nowMs >= leaseMs - leaseFreshMs
    if (fresh(yield* Clock.currentTimeMillis)) return true
    yield* settleSent(webhookId, state, true)
    if (state.lost) return false
    const nowMs = yield* Clock.currentTimeMillis
    if (fresh(nowMs)) return true
    if (!(yield* context.store.extendLease(webhookId, context.nodeId, iso(nowMs + leaseMs)))) {
      state.lost = true
      return false
    }
    state.heldUntilMs = nowMs + leaseMs
    return true
  })

/**
 * @since 0.8.0
 */
export const serveSubscription = (
  context: DispatchContext,
  webhookId: string,
  claimedUntilMs: number
): Effect.Effect<void, DependencyUnavailable> =>
  Effect.gen(function*() {
    const state: SenderState = { heldUntilMs: claimedUntilMs, lost: false, unsettled: [] }
    while (true) {
      const nowMs = yield* Clock.currentTimeMillis
      // None: the subscription was deleted.
      const batch = yield* context.store.dueDeliveries(webhookId, iso(nowMs), dueBatchMax)
      if (Option.isNone(batch)) return
      const { due, sending } = batch.value
      if (due.length === 0) return
      const secrets = yield* openSecrets(context, webhookId, sending, nowMs)
      for (const delivery of due) {
        if (!(yield* keepLease(context, webhookId, state))) break
        state.unsettled.push(yield* attempt(context, webhookId, sending, secrets, delivery))
      }
      yield* settleSent(webhookId, state, true)
      if (state.lost) return
    }
  }).pipe(storeUnavailable)
