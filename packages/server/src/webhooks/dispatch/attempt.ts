/**
 * One delivery attempt: sign the stored payload bytes (D31), POST them (WebhookClient: SSRF
 * checks, pinned address, 10 s, no redirects), record status code, duration and error class
 * (never the response body), then succeed on 2xx or schedule the next attempt (RetrySchedule,
 * D32) by writing `next_attempt_at`. Time comes from Effect's Clock and jitter from Effect's
 * Random, so TestClock drives the whole schedule in tests.
 *
 * @since 0.8.0
 */
import { Clock, Effect, Random } from "effect"
import * as Invariant from "../../platform/Invariant.ts"
import { secretBinding } from "@pps/api/Webhooks"
import { nextRetryDelayMs, parseRetryAfterMs } from "../RetrySchedule.ts"
import { deliveryHeaders } from "../Signature.ts"
import type { DueDelivery, SendingInfo } from "../WebhookStore.ts"
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
 * Sends one delivery and records its result. Returns the lease's new end when this node still
 * holds it; undefined when it was lost (or the subscription deleted): the sender stops.
 *
 * @since 0.8.0
 */
export const attempt = Effect.fn("Dispatcher.attempt")(function*(
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
  const outcome = yield* context.client.send({ url: target.url, headers, body, loopbackGranted: target.loopback_allowed })
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
  const { leaseHeld, recorded } = yield* context.recordAttempt({
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
  return leaseHeld ? leaseUntilMs : undefined
})
