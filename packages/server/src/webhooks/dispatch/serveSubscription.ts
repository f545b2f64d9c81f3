/**
 * Serving one claimed subscription: its due deliveries, oldest due first, one request at a time,
 * until none is due, its lease is lost or it is deleted. A delivery waiting for its retry does not
 * block later deliveries of its subscription: one poisoned event must not stall a subscription
 * for 24 hours (receivers order by `timestamp` and dedupe by `webhook-id`, as with Svix and
 * Stripe).
 *
 * The next request does not wait for the previous attempt's result to be written: results are
 * queued to the node's writer (recordAttempts.ts), which writes what has accumulated in one
 * statement, while this sender goes on. At most `dueBatchMax` of its results are unwritten at
 * once (the sender waits for the oldest before it sends more). A delivery counts as delivered only
 * once its result is written, and is never read as due while its result is on its way: the
 * sender's reads exclude the deliveries whose results it has not seen written. After a full batch
 * it reads the next at once (a backlog: the requests go on while the last batch's results are
 * written, instead of the sender waiting for them, then for the write that waits for the disk
 * when the writer goes idle, then for the read); after a short one it waits for every result
 * first, then reads again, and stops when nothing is due. The lease is known to be held for
 * `leaseMs - leaseFreshMs` more before every request (from the claim, the last result written,
 * or a renewal), as it was when each request waited for the previous result. What changes: a
 * crash can lose the results of up to `dueBatchMax` requests of a subscription already sent
 * (sent again after the restart, as the one in flight was before; receivers dedupe by
 * `webhook-id`), and a subscription deleted on another node can still get the requests sent
 * before the next result written tells this one (a delete on this node interrupts its sender at
 * once, as before).
 *
 * @since 0.8.0
 */
import { Clock, Deferred, Effect, Option } from "effect"
import { database, type DependencyUnavailable } from "../../platform/Unavailable.ts"
import type { DueBatch } from "../WebhookStore.ts"
import { attempt, openSecrets, type SentAttempt, settle } from "./attempt.ts"
import { type DispatchContext, dueBatchMax, iso, leaseFreshMs, leaseMs, senderHurryAt } from "./DispatchContext.ts"

// Built once: the whole serving loop's store failures are typed here, not per delivery.
const storeUnavailable = database("Dispatcher.serveSubscription")

/**
 * One sender's state: the lease's end as last set and found held, the results not yet settled,
 * and how to tell the writer this sender waits for one.
 */
interface SenderState {
  heldUntilMs: number
  lost: boolean
  readonly unsettled: Array<SentAttempt>
  readonly hurry: () => void
}

/**
 * Settles the oldest sent attempt (waits for its write): the lease's end it set, or lost. The
 * writer is told first when the result is not written yet, so it stops lingering for more.
 */
const settleOldest = (webhookId: string, state: SenderState) =>
  Effect.gen(function*() {
    const oldest = state.unsettled.shift()!
    if (!Deferred.isDoneUnsafe(oldest.written)) state.hurry()
    const held = yield* settle(webhookId, oldest)
    if (held === undefined) state.lost = true
    else state.heldUntilMs = Math.max(state.heldUntilMs, held)
  })

/** Settles the oldest sent attempts: those already written, or (`all`) every one. */
const settleSent = (webhookId: string, state: SenderState, all: boolean) =>
  Effect.gen(function*() {
    while (state.unsettled.length > 0 && (all || Deferred.isDoneUnsafe(state.unsettled[0]!.written))) {
      yield* settleOldest(webhookId, state)
    }
  })

/** Waits for the oldest results until fewer than `dueBatchMax` are unwritten (the bound on what a crash sends again). */
const settleRoom = (webhookId: string, state: SenderState) =>
  Effect.gen(function*() {
    while (state.unsettled.length >= dueBatchMax) yield* settleOldest(webhookId, state)
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
 * Sends one read batch, oldest due first; false when the lease was lost (or the subscription
 * deleted). Half its room unwritten, the sender hurries the writer, so its room does not fill.
 */
const sendBatch = (context: DispatchContext, webhookId: string, state: SenderState, batch: DueBatch, nowMs: number) =>
  Effect.gen(function*() {
    const secrets = yield* openSecrets(context, webhookId, batch.sending, nowMs)
    for (const delivery of batch.due) {
      yield* settleRoom(webhookId, state)
      if (state.lost || !(yield* keepLease(context, webhookId, state))) return false
      state.unsettled.push(yield* attempt(context, webhookId, batch.sending, secrets, delivery))
      if (state.unsettled.length === senderHurryAt) state.hurry()
    }
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
    const state: SenderState = { heldUntilMs: claimedUntilMs, lost: false, unsettled: [], hurry: context.recorder.hurry }
    while (true) {
      const nowMs = yield* Clock.currentTimeMillis
      const unwritten = state.unsettled.map((sent) => sent.delivery.delivery_id)
      // None: the subscription was deleted (or disabled).
      const batch = yield* context.store.dueDeliveries(webhookId, iso(nowMs), dueBatchMax, unwritten)
      if (Option.isNone(batch) || batch.value.due.length === 0) {
        // Nothing (more) is due. With results on their way, look again once they are written
        // (more may have come due meanwhile); with none, the subscription is served.
        const waited = state.unsettled.length > 0
        yield* settleSent(webhookId, state, true)
        if (!waited || Option.isNone(batch) || state.lost) return
        continue
      }
      if (!(yield* sendBatch(context, webhookId, state, batch.value, nowMs))) return yield* settleSent(webhookId, state, true)
      // A short batch: what is due now was all read; wait for its results before reading again.
      if (batch.value.due.length < dueBatchMax) yield* settleSent(webhookId, state, true)
      if (state.lost) return
    }
  }).pipe(storeUnavailable)
