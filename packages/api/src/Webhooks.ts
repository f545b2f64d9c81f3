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
import { EventType, eventTypes } from "./Events.ts"
import { Page } from "./Page.ts"

/**
 * `POST /v1/webhooks` body. `events` is checked by `parseEventTypes`, so an
 * unknown name answers with the field and the offending entry's position.
 *
 * @since 0.1.0
 * @category models
 */
export const CreateWebhookRequest = Schema.Struct({
  url: Schema.String.annotate({ description: "An https URL on a public address (D33); the SSRF policy refuses private and loopback hosts." }),
  // Text, not `EventType`: `parseEventTypes` names the offending entry (`events.1`) and lists the known types.
  events: Schema.Array(Schema.String.annotate({ description: `An event type: ${eventTypes.join(", ")}.` }))
    .annotate({ description: "At least one event type; duplicates are ignored." })
}).annotate({
  identifier: "CreateWebhookRequest",
  examples: [{ url: "https://example.com/hooks/pps", events: ["transfer.confirmed", "transfer.failed"] }]
})

/**
 * A subscription as listed (D33): never its secret.
 *
 * @since 0.1.0
 * @category models
 */
export const WebhookRecord = Schema.Struct({
  webhook_id: Schema.String.annotate({ description: "`wh_` + ULID." }),
  url: Schema.String.annotate({ description: "Where deliveries are POSTed." }),
  events: Schema.Array(EventType).annotate({ description: "The event types delivered." }),
  enabled: Schema.Boolean.annotate({ description: "D59: false while disabled (no new deliveries; pending ones wait)." }),
  created_at: Schema.String.annotate({ description: "ISO 8601 UTC." })
}).annotate({
  identifier: "Webhook",
  description: "D33: a webhook subscription (never its secret).",
  examples: [{
    webhook_id: "wh_01JAZ3Y8X6Q4M2N7P5R9S0T1V2",
    url: "https://example.com/hooks/pps",
    events: ["transfer.confirmed"],
    enabled: true,
    created_at: "2026-11-25T01:00:00.000Z"
  }]
})
export type WebhookRecord = typeof WebhookRecord.Type

/**
 * `PATCH /v1/webhooks/{id}` body (D59): the fields to change; absent ones stay.
 *
 * @since 0.9.0
 * @category models
 */
export const UpdateWebhookRequest = Schema.Struct({
  url: Schema.optionalKey(Schema.String.annotate({ description: "A new URL, under the same rules as at creation (D33, D59)." })),
  events: Schema.optionalKey(
    Schema.Array(Schema.String.annotate({ description: `An event type: ${eventTypes.join(", ")}.` }))
      .annotate({ description: "The new event types (replacing the old), at least one." })
  ),
  enabled: Schema.optionalKey(Schema.Boolean.annotate({ description: "false disables the subscription, true enables it again." }))
}).annotate({
  identifier: "UpdateWebhookRequest",
  examples: [{ enabled: false }, { url: "https://example.com/hooks/v2", events: ["transfer.confirmed"] }]
})
export type UpdateWebhookRequest = typeof UpdateWebhookRequest.Type

/**
 * The create answer: the record and, this once, the secret.
 *
 * @since 0.1.0
 * @category models
 */
export const CreatedWebhook = Schema.Struct({
  webhook_id: Schema.String.annotate({ description: "`wh_` + ULID." }),
  url: Schema.String.annotate({ description: "Where deliveries are POSTed." }),
  events: Schema.Array(EventType).annotate({ description: "The event types delivered." }),
  secret: Schema.String.annotate({ description: "`whsec_…`: signs every delivery (D31); shown in this answer only." }),
  created_at: Schema.String.annotate({ description: "ISO 8601 UTC." })
}).annotate({ identifier: "CreatedWebhook", description: "The new subscription and, this once, its signing secret." })
export type CreatedWebhook = typeof CreatedWebhook.Type

/**
 * `POST /v1/webhooks/{id}/rotate-secret` (ext): the new secret, once, and
 * until when the previous one still signs.
 *
 * @since 0.1.0
 * @category models
 */
export const RotatedSecret = Schema.Struct({
  webhook_id: Schema.String.annotate({ description: "The subscription." }),
  secret: Schema.String.annotate({ description: "The new signing secret, shown once." }),
  previous_secret_expires_at: Schema.String.annotate({ description: "Until then the previous secret signs too (both signatures are sent)." })
}).annotate({ identifier: "RotatedSecret" })
export type RotatedSecret = typeof RotatedSecret.Type

/**
 * @since 0.1.0
 * @category models
 */
export const WebhookList = Schema.Struct({ data: Schema.Array(WebhookRecord).annotate({ description: "Newest first." }) }).annotate({ identifier: "WebhookList" })

/**
 * D34's delivery status (`cancelled` deliveries belong to deleted
 * subscriptions, whose history is not readable any more).
 *
 * @since 0.1.0
 * @category models
 */
export const DeliveryStatus = Schema.Literals(["pending", "succeeded", "failed"]).annotate({ identifier: "DeliveryStatus" })
export type DeliveryStatus = typeof DeliveryStatus.Type

/**
 * One entry of `GET /v1/webhooks/{id}/deliveries` (D34).
 *
 * @since 0.1.0
 * @category models
 */
export const DeliveryRecord = Schema.Struct({
  delivery_id: Schema.String.annotate({ description: "`dlv_` + ULID." }),
  event_id: Schema.String.annotate({ description: "The event delivered (`evt_` + ULID); its `Webhook-Id` header." }),
  event: Schema.String.annotate({ description: "The event's type." }),
  status: DeliveryStatus,
  response_status_code: Schema.NullOr(Schema.Int).annotate({ description: "The receiver's last HTTP status; null before an answer." }),
  retry_count: Schema.Int.annotate({ description: "Attempts after the first." }),
  created_at: Schema.String.annotate({ description: "When the delivery was queued (ISO 8601 UTC)." }),
  last_attempt_at: Schema.NullOr(Schema.String).annotate({ description: "When it was last tried." }),
  next_attempt_at: Schema.NullOr(Schema.String).annotate({ description: "The scheduled retry, if any (D34's schedule)." }),
  failure_reason: Schema.NullOr(Schema.String).annotate({
    description: "D59: why the last attempt failed: `http_<status>`, `dns_error`, `timeout`, `tls_error`, `ssrf_refused`, " +
      "`connection_refused`, `connection_reset`, `network_error` or `invalid_url`; null after a success or before any attempt."
  })
}).annotate({ identifier: "Delivery", description: "D34: one delivery of an event to a subscription." })
export type DeliveryRecord = typeof DeliveryRecord.Type

/**
 * @since 0.1.0
 * @category models
 */
export const DeliveryPage = Page(DeliveryRecord).annotate({ identifier: "DeliveryPage", description: "D34: deliveries, newest first." })
export type DeliveryPage = typeof DeliveryPage.Type

/**
 * D35's answer to a replay.
 *
 * @since 0.1.0
 * @category models
 */
export const ReplayAccepted = Schema.Struct({
  delivery_id: Schema.String.annotate({ description: "The new delivery." }),
  event_id: Schema.String.annotate({ description: "The event replayed." }),
  status: Schema.Literal("pending").annotate({ description: "Queued; follow it in the deliveries." })
}).annotate({ identifier: "ReplayAccepted", description: "D35: the new delivery of the event, queued." })

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
  readonly enabled: boolean
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
  enabled: webhook.enabled,
  created_at: webhook.createdAt
})

/**
 * The associated data binding a sealed secret to its subscription.
 *
 * @since 0.1.0
 * @category constructors
 */
export const secretBinding = (webhookId: string) => `pps/webhook-secret/v1/${webhookId}`
