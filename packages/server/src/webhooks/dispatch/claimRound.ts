/**
 * The dispatcher's rounds: claim subscriptions that have a due delivery and nobody serving them
 * (a lease in SQL, `FOR UPDATE SKIP LOCKED`), serve each in a fiber of its own, then sleep until
 * the next retry falls due or a wake. A failed round (database down) is logged and retried
 * after a back-off: the worker never stops.
 *
 * @since 0.8.0
 */
import { Cause, Clock, Effect, Exit, Option } from "effect"
import { database } from "../../platform/Unavailable.ts"
import { type DispatchContext, failureBackoffMs, idleWaitMinMs, iso, leaseMs, type Serving } from "./DispatchContext.ts"
import { serveSubscription } from "./serveSubscription.ts"

/** Serves a claimed subscription in a fiber of the node's scope, and frees it when served. */
const startServing = (context: DispatchContext, webhookId: string, claimedUntilMs: number) =>
  Effect.gen(function*() {
    const { nodeId, serving, store, wakeup } = context
    const entry: Serving = {}
    serving.set(webhookId, entry)
    entry.fiber = yield* serveSubscription(context, webhookId, claimedUntilMs).pipe(
      Effect.onExit((exit) =>
        Effect.gen(function*() {
          if (serving.get(webhookId) === entry) serving.delete(webhookId)
          if (Exit.isFailure(exit) && !Cause.hasInterruptsOnly(exit.cause)) {
            // A fault (database down, a secret that does not open): keep the
            // lease, so nobody retries this subscription before it expires
            // (30 s) instead of at once, in a loop.
            return yield* Effect.logWarning("serving a webhook subscription failed", exit.cause)
          }
          // Done, or stopped (delete, shutdown): free the subscription for any node.
          yield* store.releaseLease(webhookId, nodeId).pipe(Effect.ignore)
          // More may have become due while it was served: look again at once.
          yield* wakeup.wake
        })
      ),
      Effect.ignore,
      Effect.annotateLogs({ webhook_id: webhookId }),
      Effect.forkIn(context.scope)
    )
  })

/**
 * Claims what is due now and starts serving it; returns how many subscriptions it claimed.
 *
 * @since 0.8.0
 */
export const runOnce = (context: DispatchContext) =>
  Effect.gen(function*() {
    const nowMs = yield* Clock.currentTimeMillis
    context.claimedAtMs = nowMs
    const free = context.config.webhookConcurrency - context.serving.size
    if (free <= 0) return 0
    const claimedUntilMs = nowMs + leaseMs
    const claimed = yield* context.store.claimSubscriptions({
      nodeId: context.nodeId,
      now: iso(nowMs),
      leaseUntil: iso(claimedUntilMs),
      limit: free
    })
    for (const webhookId of claimed) yield* startServing(context, webhookId, claimedUntilMs)
    return claimed.length
  }).pipe(database("Dispatcher.runOnce"), Effect.withSpan("Dispatcher.runOnce"))

/**
 * Sleeps until the next retry falls due (so retries go out on time without busy polling), at
 * most the poll interval (deliveries created on other nodes, leases that expire), woken early by
 * fan-out, replays and by a served subscription coming free. Deliveries due now are not waited
 * for: they belong to subscriptions being served, whose server goes on. The wait is measured
 * from the clock read after the query, not before it: time spent in the query (a loaded
 * database) would otherwise be waited a second time, and the retry would go out that much late.
 * What is due is looked for after the last claim's reading (`claimedAtMs`): a delivery due since
 * then is waited for only `idleWaitMinMs`. A failed look waits the poll interval.
 *
 * @since 0.8.0
 */
export const waitForWork = (context: DispatchContext) =>
  Effect.gen(function*() {
    const { config, store, wakeup } = context
    const next = yield* store.nextDueAfter(iso(context.claimedAtMs)).pipe(
      Effect.orElseSucceed(() => Option.none<number>())
    )
    const nowMs = yield* Clock.currentTimeMillis
    const untilNextMs = Option.match(next, {
      onNone: () => config.webhookDispatchPollMs,
      onSome: (atMs) => Math.max(idleWaitMinMs, atMs - nowMs)
    })
    yield* wakeup.wait(Math.min(config.webhookDispatchPollMs, untilNextMs))
  })

/**
 * The worker's loop, for the life of the current scope: a failed round is logged and retried
 * after `failureBackoffMs`.
 *
 * @since 0.8.0
 */
export const runForever = (context: DispatchContext, round: Effect.Effect<number, unknown>) =>
  round.pipe(
    Effect.catchCause((cause) =>
      Effect.logWarning("webhook dispatch round failed", cause).pipe(Effect.andThen(Effect.sleep(failureBackoffMs)))
    ),
    Effect.andThen(waitForWork(context)),
    Effect.forever,
    Effect.forkScoped
  )
