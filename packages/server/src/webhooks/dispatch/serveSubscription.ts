/**
 * Serving one claimed subscription: its due deliveries, oldest due first, one at a time, until
 * none is due, its lease is lost or it is deleted. A delivery waiting for its retry does not
 * block later deliveries of its subscription: one poisoned event must not stall a subscription
 * for 24 hours (receivers order by `timestamp` and dedupe by `webhook-id`, as with Svix and
 * Stripe).
 *
 * @since 0.8.0
 */
import { Clock, Effect, Option } from "effect"
import { database, type DependencyUnavailable } from "../../platform/Unavailable.ts"
import { attempt, openSecrets } from "./attempt.ts"
import { type DispatchContext, dueBatchMax, iso, leaseFreshMs, leaseMs } from "./DispatchContext.ts"

// Built once: the whole serving loop's store failures are typed here, not per delivery.
const storeUnavailable = database("Dispatcher.serveSubscription")

/**
 * @since 0.8.0
 */
export const serveSubscription = (
  context: DispatchContext,
  webhookId: string,
  claimedUntilMs: number
): Effect.Effect<void, DependencyUnavailable> =>
  Effect.gen(function*() {
    const { nodeId, store } = context
    // The end of the lease as this node last set it and found it held (the claim, then each record).
    let heldUntilMs = claimedUntilMs
    while (true) {
      const nowMs = yield* Clock.currentTimeMillis
      // None: the subscription was deleted.
      const batch = yield* store.dueDeliveries(webhookId, iso(nowMs), dueBatchMax)
      if (Option.isNone(batch)) return
      const { due, sending } = batch.value
      if (due.length === 0) return
      const secrets = yield* openSecrets(context, webhookId, sending, nowMs)
      // The lease is renewed here unless this node renewed it lately (`leaseFreshMs`), and
      // then by each attempt's record, so it is fresh before every attempt; losing it (or a
      // delete) stops the sender.
      if (heldUntilMs - nowMs < leaseMs - leaseFreshMs) {
        if (!(yield* store.extendLease(webhookId, nodeId, iso(nowMs + leaseMs)))) return
        heldUntilMs = nowMs + leaseMs
      }
      for (const delivery of due) {
        const held = yield* attempt(context, webhookId, sending, secrets, delivery)
        if (held === undefined) return
        heldUntilMs = held
      }
    }
  }).pipe(storeUnavailable)
