/**
 * The webhook delivery worker ("the webhook actor").
 *
 * Each node runs one. It claims subscriptions that have a due delivery and
 * nobody serving them (a lease in SQL, `FOR UPDATE SKIP LOCKED`: one server per
 * subscription across all nodes), and serves each claimed subscription in a
 * fiber of its own: its due deliveries, oldest due first, one at a time. So a
 * slow or dead receiver holds up only its own subscription, a receiver never
 * sees two requests of one subscription at once, and no delivery is ever
 * attempted twice concurrently. A delivery waiting for its retry does not
 * block later deliveries of its subscription: one poisoned event must not
 * stall a subscription for 24 hours (receivers order by `timestamp` and dedupe
 * by `webhook-id`, as with Svix and Stripe).
 *
 * An attempt: sign the stored payload bytes (D31), POST them (WebhookClient:
 * SSRF checks, pinned address, 10 s, no redirects), record status code,
 * duration and error class (never the response body), then succeed on 2xx or
 * schedule the next attempt (RetrySchedule, D32) by writing `next_attempt_at`.
 * The schedule lives in the database, so a restarted node resumes on time.
 * Time comes from Effect's Clock and jitter from Effect's Random: TestClock
 * drives the whole schedule in tests.
 *
 * The lease (30 s) is known to have 25 s left before every attempt (set by
 * the statement that records a previous one, or renewed) and outlasts an
 * attempt (10 s), so it never lapses mid-attempt. A sender does not wait for
 * an attempt's record before its next request: the records are written in
 * batches (dispatch/recordAttempts.ts), at most 50 of a sender's unwritten at
 * once, and a sender's reads skip the deliveries whose records are on their
 * way (dispatch/serveSubscription.ts). A node that dies leaves leases that
 * expire after 30 s (distributed mode); in embedded mode the process holds the
 * data directory lock, so at start it drops the leases its dead predecessor
 * left and resumes at once. Deleting a subscription cancels its pending
 * deliveries in SQL and interrupts this node's attempt in flight; attempts
 * under way elsewhere finish but cannot revive a delivery (see
 * store/recordAttempts.ts). A database outage fails a round or a subscription's serving, typed
 * (`DependencyUnavailable`), is logged, and is retried: the worker keeps going through it.
 *
 * The steps are top-level functions over a {@link DispatchContext} built once here
 * (dispatch/claimRound.ts, dispatch/serveSubscription.ts, dispatch/attempt.ts,
 * dispatch/recordAttempts.ts); this layer only wires them.
 *
 * @since 0.1.0
 */
import { Context, Effect, Fiber, Layer, Option } from "effect"
import { AppConfig, runsWorkers } from "../config/AppConfig.ts"
import { makeWakeup } from "../events/Wakeup.ts"
import { ulid } from "../platform/Ids.ts"
import { SecretBox } from "../platform/SecretBox.ts"
import { database, type DependencyUnavailable } from "../platform/Unavailable.ts"
import { runForever, runOnce } from "./dispatch/claimRound.ts"
import type { DispatchContext } from "./dispatch/DispatchContext.ts"
import { makeAttemptRecorder } from "./dispatch/recordAttempts.ts"
import { WebhookClient } from "./WebhookClient.ts"
import { WebhookStore } from "./WebhookStore.ts"

/**
 * @since 0.1.0
 * @category services
 */
export class Dispatcher extends Context.Service<Dispatcher, {
  /** This node's lease owner id. */
  readonly nodeId: string
  /** Look for due deliveries now (fan-out and replay call it). */
  readonly wake: Effect.Effect<void>
  /** Stops this node's work on a deleted subscription at once. */
  readonly cancel: (webhookId: string) => Effect.Effect<void>
  /** Claims what is due now and starts serving it; returns how many subscriptions it claimed. */
  readonly runOnce: Effect.Effect<number, DependencyUnavailable>
}>()("server/webhooks/Dispatcher") {
  static readonly layer = Layer.effect(
    Dispatcher,
    Effect.gen(function*() {
      const context = yield* makeDispatchContext
      // Embedded mode: this process holds the data directory lock, so any lease is a dead
      // predecessor's. Dropping them only saves waiting for them to expire: a failure is logged.
      if (Option.isNone(context.config.databaseUrl)) {
        yield* context.store.releaseAllLeases.pipe(
          database("Dispatcher.releaseAllLeases"),
          Effect.catch((error) => Effect.logWarning("cannot drop the leases left by a previous process", error))
        )
      }
      const round = runOnce(context)
      // Deliveries leave from worker nodes only (an api-only node never claims a subscription).
      if (runsWorkers(context.config)) yield* runForever(context, round)
      return Dispatcher.of({
        nodeId: context.nodeId,
        wake: context.wakeup.wake,
        cancel: (webhookId) => cancel(context, webhookId),
        runOnce: round
      })
    })
  )
}

const makeDispatchContext = Effect.gen(function*() {
  const store = yield* WebhookStore
  const context: DispatchContext = {
    config: yield* AppConfig,
    store,
    client: yield* WebhookClient,
    box: yield* SecretBox,
    scope: yield* Effect.scope,
    nodeId: `node_${ulid()}`,
    wakeup: yield* makeWakeup,
    serving: new Map(),
    recorder: yield* makeAttemptRecorder(store),
    claimedAtMs: 0
  }
  return context
})

const cancel = (context: DispatchContext, webhookId: string) =>
  Effect.suspend(() => {
    const entry = context.serving.get(webhookId)
    return entry?.fiber === undefined ? Effect.void : Fiber.interrupt(entry.fiber)
  })
