/**
 * The delivery history and replay steps of the subscription API.
 *
 * @since 0.8.0
 */
import { Clock, Effect, Option } from "effect"
import { EventNotFound } from "@pps/api/Errors"
import type { DeliveryPage } from "@pps/api/Webhooks"
import { makeId } from "../../platform/Ids.ts"
import { database } from "../../platform/Unavailable.ts"
import { requireWebhook } from "./subscriptions.ts"
import { iso, type Owner, type WebhooksContext } from "./WebhooksContext.ts"

/** @since 0.8.0 */
export const deliveries = Effect.fn("Webhooks.deliveries")(function*(
  context: WebhooksContext,
  owner: Owner,
  webhookId: string,
  page: { readonly limit: number; readonly offset: number }
) {
  yield* requireWebhook(context, owner, webhookId)
  // One more than asked tells whether there is a next page.
  const rows = yield* context.store.listDeliveries(webhookId, page.limit + 1, page.offset)
  const answer: DeliveryPage = {
    data: rows.slice(0, page.limit),
    limit: page.limit,
    offset: page.offset,
    has_more: rows.length > page.limit
  }
  return answer
}, database("Webhooks.deliveries"))

/** @since 0.8.0 */
export const replay = Effect.fn("Webhooks.replay")(function*(
  context: WebhooksContext,
  owner: Owner,
  webhookId: string,
  eventId: string
) {
  const { dispatcher, events, operations, sql, store } = context
  yield* requireWebhook(context, owner, webhookId)
  const event = yield* events.findForAccount(eventId, owner.accountId, owner.mode)
  if (Option.isNone(event)) return yield* Effect.fail(EventNotFound.of(eventId))
  const nowMs = yield* Clock.currentTimeMillis
  const deliveryId = makeId("dlv", nowMs)
  yield* sql.withTransaction(Effect.gen(function*() {
    yield* store.insertDeliveries(
      [{ deliveryId, webhookId, eventId, trigger: "replay", createdAt: iso(nowMs) }],
      iso(nowMs)
    )
    yield* operations.bind("webhook_replay", deliveryId)
  }))
  yield* dispatcher.wake
  return { delivery_id: deliveryId, event_id: eventId, status: "pending" as const }
}, database("Webhooks.replay"))
