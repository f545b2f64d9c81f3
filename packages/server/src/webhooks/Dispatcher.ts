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
 * The lease (30 s) is renewed before every attempt (in the statement that
 * records the previous one) and outlasts an attempt (10 s), so it never
 * lapses mid-attempt. A node that dies leaves leases that
 * expire after 30 s (distributed mode); in embedded mode the process holds the
 * data directory lock, so at start it drops the leases its dead predecessor
 * left and resumes at once. Deleting a subscription cancels its pending
 * deliveries in SQL and interrupts this node's attempt in flight; an attempt
 * in flight elsewhere finishes but cannot revive the delivery (see
 * WebhookStore.recordAttempt).
 *
 * @since 0.1.0
 */
import { Cause, Clock, Context, DateTime, Deferred, Effect, Exit, Fiber, Layer, Option, Queue, Random } from "effect"
import { AppConfig, runsWorkers } from "../config/AppConfig.ts"
import { makeWakeup } from "../events/Wakeup.ts"
import { ulid } from "../platform/Ids.ts"
import { SecretBox } from "../platform/SecretBox.ts"
import { secretBinding } from "@pps/api/Webhooks"
import { nextRetryDelayMs, parseRetryAfterMs } from "./RetrySchedule.ts"
import { deliveryHeaders } from "./Signature.ts"
import { attemptTimeoutMs, WebhookClient } from "./WebhookClient.ts"
import { type AttemptRecord, type DueDelivery, type SendingInfo, WebhookStore } from "./WebhookStore.ts"

/** A subscription's lease: renewed before each attempt, so it must outlast one. */
const leaseMs = 30_000
/**
 * A lease this node set less than this long ago is not renewed again before a batch: the claim and
 * every attempt's record renew it, so each serving round would otherwise cost one more UPDATE
 * (0.17 statements a delivery under the webhooks benchmark, nearly all in its steady-rate phase,
 * where a round serves one delivery). What is left of such a lease (25 s) still outlasts an attempt (10 s) with room for
 * clocks that disagree between nodes.
 */
const leaseFreshMs = 5_000
/** Attempt results written per statement (at most one per served subscription is waiting). */
const recordBatchMax = 256
/** Due deliveries read per query while serving a subscription. */
const dueBatchMax = 50
/** The shortest wait between claim rounds, so a due delivery another node is serving cannot spin the loop. */
const idleWaitMinMs = 20
/** After a failed claim round (database down), wait this long. */
const failureBackoffMs = 1_000

if (leaseMs - leaseFreshMs < 2 * attemptTimeoutMs) throw new Error("the delivery lease must outlast an attempt twice over")

const iso = (ms: number) => DateTime.formatIso(DateTime.makeUnsafe(ms))
const encoder = new TextEncoder()
const decoder = new TextDecoder()

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
  readonly runOnce: Effect.Effect<number, unknown>
}>()("server/webhooks/Dispatcher") {
  static readonly layer = Layer.effect(
    Dispatcher,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const store = yield* WebhookStore
      const client = yield* WebhookClient
      const box = yield* SecretBox
      const scope = yield* Effect.scope
      const nodeId = `node_${ulid()}`
      const wakeup = yield* makeWakeup
      const serving = new Map<string, { fiber?: Fiber.Fiber<void> }>()

      if (Option.isNone(config.databaseUrl)) yield* Effect.orDie(store.releaseAllLeases)

      // Attempt results from every subscription this node serves are written
      // together: while one batch is being written the next accumulates, so a
      // quiet node writes each at once and a busy one in few statements.
      const pendingRecords = yield* Queue.unbounded<{
        readonly attempt: AttemptRecord
        readonly done: Deferred.Deferred<{ readonly recorded: boolean; readonly leaseHeld: boolean }, unknown>
      }>()
      yield* Effect.gen(function*() {
        const batch = yield* Queue.takeBetween(pendingRecords, 1, recordBatchMax)
        yield* store.recordAttempts(batch.map((entry) => entry.attempt)).pipe(
          Effect.matchEffect({
            onSuccess: (results) =>
              Effect.forEach(batch, (entry, index) => Deferred.succeed(entry.done, results[index]!), { discard: true }),
            onFailure: (error) => Effect.forEach(batch, (entry) => Deferred.fail(entry.done, error), { discard: true })
          })
        )
      }).pipe(Effect.forever, Effect.forkScoped)
      const recordAttempt = (attempt: AttemptRecord) =>
        Effect.gen(function*() {
          const done = yield* Deferred.make<{ readonly recorded: boolean; readonly leaseHeld: boolean }, unknown>()
          yield* Queue.offer(pendingRecords, { attempt, done })
          return yield* Deferred.await(done)
        })

      const openSecrets = Effect.fn("Dispatcher.openSecrets")(function*(webhookId: string, info: SendingInfo, nowMs: number) {
        const current = decoder.decode(yield* Effect.orDie(box.open(info.secret_sealed, secretBinding(webhookId))))
        const previousValid = info.previous_secret_sealed !== null && info.previous_secret_expires_at !== null &&
          Date.parse(info.previous_secret_expires_at) > nowMs
        if (!previousValid || info.previous_secret_sealed === null) return [current] as const
        const previous = decoder.decode(yield* Effect.orDie(box.open(info.previous_secret_sealed, secretBinding(webhookId))))
        return [current, previous] as const
      })

      const attempt = Effect.fn("Dispatcher.attempt")(function*(
        webhookId: string,
        url: string,
        secrets: readonly [string, string?],
        delivery: DueDelivery
      ) {
        const startedMs = yield* Clock.currentTimeMillis
        const body = encoder.encode(delivery.payload)
        const headers = deliveryHeaders({
          secrets,
          eventId: delivery.event_id,
          deliveryId: delivery.delivery_id,
          timestampSeconds: Math.floor(startedMs / 1_000),
          body
        })
        const outcome = yield* client.send({ url, headers, body })
        const finishedMs = yield* Clock.currentTimeMillis
        const attemptNumber = delivery.attempt_count + 1
        const succeeded = outcome.statusCode !== undefined && outcome.statusCode >= 200 && outcome.statusCode < 300
        const delayMs = succeeded ? undefined : nextRetryDelayMs({
          attemptsMade: attemptNumber,
          jitterUnit: yield* Random.next,
          retryAfterMs: parseRetryAfterMs(outcome.retryAfter, finishedMs),
          elapsedMs: finishedMs - Date.parse(delivery.created_at)
        })
        const status = succeeded ? "succeeded" as const : delayMs === undefined ? "failed" as const : {
          nextAttemptAt: iso(finishedMs + delayMs)
        }
        const leaseUntilMs = finishedMs + leaseMs
        const { leaseHeld, recorded } = yield* recordAttempt({
          webhookId,
          leaseUntil: iso(leaseUntilMs),
          deliveryId: delivery.delivery_id,
          attemptNumber,
          nodeId,
          startedAt: iso(startedMs),
          durationMs: outcome.durationMs,
          statusCode: outcome.statusCode,
          error: outcome.error,
          status
        })
        yield* Effect.logInfo("webhook attempt").pipe(Effect.annotateLogs({
          webhook_id: webhookId,
          delivery_id: delivery.delivery_id,
          event_id: delivery.event_id,
          attempt: attemptNumber,
          status_code: outcome.statusCode ?? null,
          error: outcome.error ?? null,
          duration_ms: outcome.durationMs,
          outcome: typeof status === "string" ? status : "retry",
          recorded
        }))
        // The lease's new end when this node still holds it; undefined when it was lost (or deleted).
        return leaseHeld ? leaseUntilMs : undefined
      })

      const serveSubscription = (webhookId: string, claimedUntilMs: number): Effect.Effect<void, unknown> =>
        Effect.gen(function*() {
          // The end of the lease as this node last set it and found it held (the claim, then each record).
          let heldUntilMs = claimedUntilMs
          while (true) {
            const nowMs = yield* Clock.currentTimeMillis
            // None: the subscription was deleted.
            const batch = yield* store.dueDeliveries(webhookId, iso(nowMs), dueBatchMax)
            if (Option.isNone(batch)) return
            const { due, sending } = batch.value
            if (due.length === 0) return
            const secrets = yield* openSecrets(webhookId, sending, nowMs)
            // The lease is renewed here unless this node renewed it lately (`leaseFreshMs`), and
            // then by each attempt's record, so it is fresh before every attempt; losing it (or a
            // delete) stops the sender.
            if (heldUntilMs - nowMs < leaseMs - leaseFreshMs) {
              if (!(yield* store.extendLease(webhookId, nodeId, iso(nowMs + leaseMs)))) return
              heldUntilMs = nowMs + leaseMs
            }
            for (const delivery of due) {
              const held = yield* attempt(webhookId, sending.url, secrets, delivery)
              if (held === undefined) return
              heldUntilMs = held
            }
          }
        })

      /**
       * The clock reading of the last round's claim: `waitForWork` looks for what falls due after
       * it, not after its own later reading, so a delivery that fell due while the claim's query
       * ran (time passes in a query: a loaded database, or the embedded one on its own thread) is
       * claimed at the next round instead of after a whole poll interval.
       */
      let claimedAtMs = 0
      const runOnce = Effect.gen(function*() {
        const nowMs = yield* Clock.currentTimeMillis
        claimedAtMs = nowMs
        const free = config.webhookConcurrency - serving.size
        if (free <= 0) return 0
        const claimedUntilMs = nowMs + leaseMs
        const claimed = yield* store.claimSubscriptions({ nodeId, now: iso(nowMs), leaseUntil: iso(claimedUntilMs), limit: free })
        for (const webhookId of claimed) {
          const entry: { fiber?: Fiber.Fiber<void> } = {}
          serving.set(webhookId, entry)
          entry.fiber = yield* serveSubscription(webhookId, claimedUntilMs).pipe(
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
            Effect.forkIn(scope)
          )
        }
        return claimed.length
      }).pipe(Effect.withSpan("Dispatcher.runOnce"))

      // Sleep until the next retry falls due (so retries go out on time without
      // busy polling), at most the poll interval (deliveries created on other
      // nodes, leases that expire), woken early by fan-out, replays and by a
      // served subscription coming free. Deliveries due now are not waited for:
      // they belong to subscriptions being served, whose server goes on.
      // The wait is measured from the clock read after the query, not before it: time spent
      // in the query (a loaded database) would otherwise be waited a second time, and the
      // retry would go out that much late. What is due is looked for after the last claim's
      // reading (`claimedAtMs`): a delivery due since then is waited for only `idleWaitMinMs`.
      const waitForWork = Effect.gen(function*() {
        const next = yield* store.nextDueAfter(iso(claimedAtMs)).pipe(
          Effect.orElseSucceed(() => Option.none<number>())
        )
        const nowMs = yield* Clock.currentTimeMillis
        const untilNextMs = Option.match(next, {
          onNone: () => config.webhookDispatchPollMs,
          onSome: (atMs) => Math.max(idleWaitMinMs, atMs - nowMs)
        })
        yield* wakeup.wait(Math.min(config.webhookDispatchPollMs, untilNextMs))
      })

      // Deliveries leave from worker nodes only (an api-only node never claims a subscription).
      if (runsWorkers(config)) {
        yield* runOnce.pipe(
          Effect.catchCause((cause) =>
            Effect.logWarning("webhook dispatch round failed", cause).pipe(Effect.andThen(Effect.sleep(failureBackoffMs)))
          ),
          Effect.andThen(waitForWork),
          Effect.forever,
          Effect.forkScoped
        )
      }

      return Dispatcher.of({
        nodeId,
        wake: wakeup.wake,
        cancel: (webhookId) =>
          Effect.suspend(() => {
            const entry = serving.get(webhookId)
            return entry?.fiber === undefined ? Effect.void : Fiber.interrupt(entry.fiber)
          }),
        runOnce
      })
    })
  )
}
