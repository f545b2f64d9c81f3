/**
 * Webhook subscriptions and deliveries as the API shows them (D33-D35), and
 * their rules.
 *
 * Pure: no HTTP, no SQL.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import type { Mode } from "./ApiKeys.ts"
import { type EventType, eventTypes } from "./Events.ts"
import { Page } from "./Page.ts"

/**
 * `POST /v1/webhooks` body. `events` is checked by `parseEventTypes`, so an
 * unknown name answers with the field and the offending entry's position.
 *
 * @since 0.1.0
 * @category models
 */
export const CreateWebhookRequest = Schema.Struct({
  url: Schema.String,
  events: Schema.Array(Schema.String)
})

/**
 * A subscription as listed (D33): never its secret.
 *
 * @since 0.1.0
 * @category models
 */
export const WebhookRecord = Schema.Struct({
  webhook_id: Schema.String,
  url: Schema.String,
  events: Schema.Array(Schema.String),
  created_at: Schema.String
})
export type WebhookRecord = typeof WebhookRecord.Type

/**
 * The create answer: the record and, this once, the secret.
 *
 * @since 0.1.0
 * @category models
 */
export const CreatedWebhook = Schema.Struct({
  webhook_id: Schema.String,
  url: Schema.String,
  events: Schema.Array(Schema.String),
  secret: Schema.String,
  created_at: Schema.String
})
export type CreatedWebhook = typeof CreatedWebhook.Type

/**
 * `POST /v1/webhooks/{id}/rotate-secret` (ext): the new secret, once, and
 * until when the previous one still signs.
 *
 * @since 0.1.0
 * @category models
 */
export const RotatedSecret = Schema.Struct({
  webhook_id: Schema.String,
  secret: Schema.String,
  previous_secret_expires_at: Schema.String
})
export type RotatedSecret = typeof RotatedSecret.Type

/**
 * @since 0.1.0
 * @category models
 */
export const WebhookList = Schema.Struct({ data: Schema.Array(WebhookRecord) })

/**
 * D34's delivery status (`cancelled` deliveries belong to deleted
 * subscriptions, whose history is not readable any more).
 *
 * @since 0.1.0
 * @category models
 */
export const DeliveryStatus = Schema.Literals(["pending", "succeeded", "failed"])
export type DeliveryStatus = typeof DeliveryStatus.Type

/**
 * One entry of `GET /v1/webhooks/{id}/deliveries` (D34).
 *
 * @since 0.1.0
 * @category models
 */
export const DeliveryRecord = Schema.Struct({
  delivery_id: Schema.String,
  event_id: Schema.String,
  event: Schema.String,
  status: DeliveryStatus,
  response_status_code: Schema.NullOr(Schema.Number),
  retry_count: Schema.Number,
  created_at: Schema.String,
  last_attempt_at: Schema.NullOr(Schema.String),
  next_attempt_at: Schema.NullOr(Schema.String)
})
export type DeliveryRecord = typeof DeliveryRecord.Type

/**
 * @since 0.1.0
 * @category models
 */
export const DeliveryPage = Page(DeliveryRecord)
export type DeliveryPage = typeof DeliveryPage.Type

/**
 * D35's answer to a replay.
 *
 * @since 0.1.0
 * @category models
 */
export const ReplayAccepted = Schema.Struct({
  delivery_id: Schema.String,
  event_id: Schema.String,
  status: Schema.Literal("pending")
})

/**
 * Subscriptions one account may have per mode: bounds the fan-out of one event.
 *
 * @since 0.1.0
 * @category constants
 */
export const subscriptionsPerAccountMax = 50

/**
 * Validates and de-duplicates the `events` of a subscription (D33: non-empty,
 * every name known). Returns the first bad position otherwise.
 *
 * @since 0.1.0
 * @category constructors
 */
export const parseEventTypes = (
  names: ReadonlyArray<string>
): { readonly _tag: "Ok"; readonly types: ReadonlyArray<EventType> } | {
  readonly _tag: "Invalid"
  readonly param: string
  readonly message: string
} => {
  if (names.length === 0) return { _tag: "Invalid", param: "events", message: "The body field 'events' must list at least one event type." }
  const known = new Set<string>(eventTypes)
  const types: Array<EventType> = []
  for (const [index, name] of names.entries()) {
    if (!known.has(name)) {
      return {
        _tag: "Invalid",
        param: `events.${index}`,
        message: `The body field 'events.${index}' is not a known event type; known types: ${eventTypes.join(", ")}.`
      }
    }
    if (!types.includes(name as EventType)) types.push(name as EventType)
  }
  return { _tag: "Ok", types }
}

/**
 * A subscription as stored (secrets sealed).
 *
 * @since 0.1.0
 * @category models
 */
export interface Webhook {
  readonly webhookId: string
  readonly accountId: string
  readonly mode: Mode
  readonly url: string
  readonly eventTypes: ReadonlyArray<EventType>
  readonly createdAt: string
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const toWebhookRecord = (webhook: Webhook): WebhookRecord => ({
  webhook_id: webhook.webhookId,
  url: webhook.url,
  events: webhook.eventTypes,
  created_at: webhook.createdAt
})

/**
 * The associated data binding a sealed secret to its subscription.
 *
 * @since 0.1.0
 * @category constructors
 */
export const secretBinding = (webhookId: string) => `pps/webhook-secret/v1/${webhookId}`
