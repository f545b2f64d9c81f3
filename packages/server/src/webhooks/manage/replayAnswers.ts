/**
 * D36: how a retried create or replay whose first request was cut off is answered, from the
 * record it made. A database that does not answer the lookup is answered 503
 * `service_unavailable` (the client retries later with the same key), not 500.
 *
 * @since 0.8.0
 */
import { Effect, Option } from "effect"
import { WebhookNotFound } from "@pps/api/Errors"
import { secretBinding, toWebhookRecord } from "@pps/api/Webhooks"
import type { ReplayedResponse } from "../../platform/IdempotentOperations.ts"
import * as Invariant from "../../platform/Invariant.ts"
import { answerServiceUnavailable, database, type DependencyUnavailable } from "../../platform/Unavailable.ts"
import type { Owner, WebhooksContext } from "./WebhooksContext.ts"

const decoder = new TextDecoder()

/**
 * A lookup the database did not answer, answered as a request would be: logged, then 503
 * `service_unavailable` (the envelope adds `Retry-After`).
 */
const unavailableAnswered = <R>(
  self: Effect.Effect<ReplayedResponse, DependencyUnavailable, R>
): Effect.Effect<ReplayedResponse, never, R> =>
  self.pipe(
    answerServiceUnavailable,
    Effect.catch((unavailable) => Effect.succeed({ status: 503, body: { error: unavailable.error } }))
  )

/**
 * A retried create answers with the subscription it made, secret included, as D6's replay of
 * its first answer would.
 */
const createdWebhook = (
  { box, store }: WebhooksContext,
  webhookId: string,
  principal: Owner
) =>
  Effect.gen(function*() {
    const found = yield* store.findActive(webhookId, principal.accountId, principal.mode)
    const sending = yield* store.sendingInfo(webhookId)
    if (Option.isNone(found) || Option.isNone(sending)) {
      return { status: 404, body: { error: WebhookNotFound.of(webhookId).error } }
    }
    const sealed = box.open(sending.value.secret_sealed, secretBinding(webhookId))
    const secret = decoder.decode(
      yield* sealed.pipe(Invariant.orDie("a subscription's secret opens under the key and binding it was sealed with"))
    )
    const record = toWebhookRecord(found.value)
    return {
      status: 201,
      body: { webhook_id: record.webhook_id, url: record.url, events: record.events, secret, created_at: record.created_at }
    }
  }).pipe(database("Webhooks.replayCreate"), unavailableAnswered)

/**
 * A retried replay answers with the delivery it made, never a second one (the receiver would
 * get the event twice).
 */
const replayedDelivery = (
  { sql }: WebhooksContext,
  deliveryId: string,
  principal: Owner
) =>
  sql<{ delivery_id: string; event_id: string; webhook_id: string }>`
    SELECT d.delivery_id, d.event_id, d.webhook_id FROM webhook_deliveries d JOIN webhooks w ON w.webhook_id = d.webhook_id
    WHERE d.delivery_id = ${deliveryId} AND w.account_id = ${principal.accountId} AND w.mode = ${principal.mode}`.pipe(
    Effect.map((rows): ReplayedResponse => {
      const row = rows[0]
      return row === undefined
        // Deleted since (its deliveries went with it): what a replay would answer now.
        ? { status: 404, body: { error: WebhookNotFound.of("of this replay").error } }
        : { status: 202, body: { delivery_id: row.delivery_id, event_id: row.event_id, status: "pending" } }
    }),
    database("Webhooks.replayDelivery"),
    unavailableAnswered
  )

/**
 * Registers both answers with the idempotency layer.
 *
 * @since 0.8.0
 */
export const registerReplayAnswers = (context: WebhooksContext) =>
  Effect.all([
    context.operations.register("webhook", (webhookId, principal) => createdWebhook(context, webhookId, principal)),
    context.operations.register("webhook_replay", (deliveryId, principal) => replayedDelivery(context, deliveryId, principal))
  ], { discard: true })
