/**
 * One delivery attempt: sign the stored payload bytes (D31), POST them (WebhookClient: SSRF
 * checks, pinned address, 10 s, no redirects), record status code, duration and error class
 * (never the response body), then succeed on 2xx or schedule the next attempt (RetrySchedule,
 * D32) by writing `next_attempt_at`. Time comes from Effect's Clock and jitter from Effect's
 * Random, so TestClock drives the whole schedule in tests.
 *
 * @since 0.8.0
 */
import { Clock, Deferred, Effect, Random } from "effect"
import * as Invariant from "../../platform/Invariant.ts"
import type { DependencyUnavailable } from "../../platform/Unavailable.ts"
import { secretBinding } from "@pps/api/Webhooks"
import { nextRetryDelayMs, parseRetryAfterMs } from "../RetrySchedule.ts"
import { deliveryHeaders } from "../Signature.ts"
import type { AttemptOutcome } from "../WebhookClient.ts"
import type { AttemptRecord, DueDelivery, RecordedAttempt, SendingInfo } from "../WebhookStore.ts"
import { type DispatchContext, iso, leaseMs } from "./DispatchContext.ts"

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** Built once: a secret this server sealed for this subscription opens under the same key. */
const secretOpens = Invariant.orDie("a subscription's secret opens under the key and binding it was sealed with")

/**
 * The secrets deliveries are signed with: the current one, and the previous one while its overlap
 * after a rotation lasts.
 *
 * @since 0.8.0
 */
export const openSecrets = Effect.fn("Dispatcher.openSecrets")(function*(
  { box }: DispatchContext,
  webhookId: string,
  info: SendingInfo,
  nowMs: number
) {
  const current = decoder.decode(yield* secretOpens(box.open(info.secret_sealed, secretBinding(webhookId))))
  const previousValid = info.previous_secret_sealed !== null && info.previous_secret_expires_at !== null &&
    Date.parse(info.previous_secret_expires_at) > nowMs
  if (!previousValid || info.previous_secret_sealed === null) return [current] as const
  const previous = decoder.decode(yield* secretOpens(box.open(info.previous_secret_sealed, secretBinding(webhookId))))
  return [current, previous] as const
})

/**
 * An attempt sent, its result queued to be written.
 *
 * @since 0.8.0
 * @category models
 */
export interface SentAttempt {
  readonly delivery: DueDelivery
  readonly attemptNumber: number
  readonly outcome: AttemptOutcome
  readonly status: AttemptRecord["status"]
  /** The lease's end the record sets. */
  readonly leaseUntilMs: number
  readonly written: Deferred.Deferred<RecordedAttempt, DependencyUnavailable>
}

/**
 * Sends one delivery and queues its result to be written; the caller waits for the write with
 * {@link settle}. The delivery counts as delivered only once that write commits. Untraced: a
 * span and a captured stack a delivery were a measurable share of its CPU (issue 49); the
 * attempt's log line carries what a span would.
 *
 * @since 0.8.0
 */
export const attempt = Effect.fnUntraced(function*(
  context: DispatchContext,
  webhookId: string,
  target: { readonly url: string; readonly loopback_allowed: boolean },
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
  const outcome = yield* context.recorder.sending(
    context.client.send({ url: target.url, headers, body, loopbackGranted: target.loopback_allowed })
  )
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
  const written = yield* context.recorder.record({
    webhookId,
    leaseUntil: iso(leaseUntilMs),
    deliveryId: delivery.delivery_id,
    attemptNumber,
    nodeId: context.nodeId,
    startedAt: iso(startedMs),
    durationMs: outcome.durationMs,
    statusCode: outcome.statusCode,
    error: outcome.error,
    status
  })
  const sent: SentAttempt = { delivery, attemptNumber, outcome, status, leaseUntilMs, written }
  return sent
})

/**
 * Waits until a sent attempt's result is written, and logs it. Returns the lease's new end when
 * this node still holds it; undefined when it was lost (or the subscription deleted): the sender
 * stops.
 *
 * @since 0.8.0
 */
export const settle = Effect.fnUntraced(function*(webhookId: string, sent: SentAttempt) {
  const { leaseHeld, recorded } = yield* Deferred.await(sent.written)
  const { delivery, outcome, status } = sent
  yield* Effect.logInfo("webhook attempt").pipe(Effect.annotateLogs({
    webhook_id: webhookId,
    delivery_id: delivery.delivery_id,
    event_id: delivery.event_id,
    attempt: sent.attemptNumber,
    status_code: outcome.statusCode ?? null,
    error: outcome.error ?? null,
    duration_ms: outcome.durationMs,
    outcome: typeof status === "string" ? status : "retry",
    recorded
  }))
  return leaseHeld ? sent.leaseUntilMs : undefined
})
