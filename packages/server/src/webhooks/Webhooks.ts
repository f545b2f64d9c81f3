/**
 * Webhook subscriptions for the API (D33-D35): create, list, delete, rotate
 * the secret (ext), read the delivery history, replay an event.
 *
 * Everything is scoped to the caller's account and mode: another account's
 * subscription, or one of the other mode, is not found. Secrets are generated
 * here, sealed under the KEK with the subscription id as associated data, and
 * returned only by create and rotate.
 *
 * @since 0.1.0
 */
import { Clock, Context, DateTime, Effect, Layer, Option } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import type { Mode } from "@pps/api/ApiKeys"
import { AppConfig } from "../config/AppConfig.ts"
import { EventStore } from "../events/EventStore.ts"
import { EventNotFound, InvalidRequest, WebhookNotFound } from "@pps/api/Errors"
import { OperationReplay } from "../platform/IdempotentOperations.ts"
import { makeId } from "../platform/Ids.ts"
import { SecretBox } from "../platform/SecretBox.ts"
import { checkUrl, type UrlRefusal } from "./AddressPolicy.ts"
import { Dispatcher } from "./Dispatcher.ts"
import {
  type CreatedWebhook,
  type DeliveryPage,
  parseEventTypes,
  type RotatedSecret,
  secretBinding,
  subscriptionsPerAccountMax,
  toWebhookRecord,
  type WebhookRecord
} from "@pps/api/Webhooks"
import { generateSecret } from "./Signature.ts"
import { WebhookClient } from "./WebhookClient.ts"
import { WebhookStore } from "./WebhookStore.ts"

/**
 * Whose subscriptions: the API key's account and mode.
 *
 * @since 0.1.0
 * @category models
 */
export interface Owner {
  readonly accountId: string
  readonly mode: Mode
}

const urlMessages: Record<UrlRefusal, string> = {
  malformed: "The body field 'url' is not a valid absolute URL.",
  scheme: "The body field 'url' must use https (http is allowed only to loopback when the operator enables it).",
  credentials: "The body field 'url' must not contain a user name or password.",
  address: "The body field 'url' points to an address deliveries may not reach (private, loopback, link-local or metadata)."
}

const encoder = new TextEncoder()
const iso = (ms: number) => DateTime.formatIso(DateTime.makeUnsafe(ms))

/**
 * @since 0.1.0
 * @category services
 */
export class Webhooks extends Context.Service<Webhooks, {
  readonly create: (
    owner: Owner,
    input: { readonly url: string; readonly events: ReadonlyArray<string> }
  ) => Effect.Effect<CreatedWebhook, InvalidRequest | SqlError.SqlError>
  readonly list: (owner: Owner) => Effect.Effect<ReadonlyArray<WebhookRecord>, SqlError.SqlError>
  readonly remove: (owner: Owner, webhookId: string) => Effect.Effect<void, WebhookNotFound | SqlError.SqlError>
  readonly rotateSecret: (owner: Owner, webhookId: string) => Effect.Effect<RotatedSecret, WebhookNotFound | SqlError.SqlError>
  readonly deliveries: (
    owner: Owner,
    webhookId: string,
    page: { readonly limit: number; readonly offset: number }
  ) => Effect.Effect<DeliveryPage, WebhookNotFound | SqlError.SqlError>
  readonly replay: (
    owner: Owner,
    webhookId: string,
    eventId: string
  ) => Effect.Effect<
    { readonly delivery_id: string; readonly event_id: string; readonly status: "pending" },
    WebhookNotFound | EventNotFound | SqlError.SqlError
  >
}>()("server/webhooks/Webhooks") {
  static readonly layer = Layer.effect(
    Webhooks,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const store = yield* WebhookStore
      const events = yield* EventStore
      const box = yield* SecretBox
      const client = yield* WebhookClient
      const dispatcher = yield* Dispatcher
      const sql = yield* SqlClient.SqlClient
      const operations = yield* OperationReplay

      // D36: a retried create whose first request was cut off answers with the subscription it
      // made, secret included, as D6's replay of its first answer would.
      yield* operations.register("webhook", (webhookId, principal) =>
        Effect.gen(function*() {
          const found = yield* store.findActive(webhookId, principal.accountId, principal.mode)
          const sending = yield* store.sendingInfo(webhookId)
          if (Option.isNone(found) || Option.isNone(sending)) {
            return { status: 404, body: { error: WebhookNotFound.of(webhookId).error } }
          }
          const secret = new TextDecoder().decode(yield* box.open(sending.value.secret_sealed, secretBinding(webhookId)))
          const record = toWebhookRecord(found.value)
          return {
            status: 201,
            body: { webhook_id: record.webhook_id, url: record.url, events: record.events, secret, created_at: record.created_at }
          }
        }).pipe(Effect.orDie))

      // D36: a retried replay whose first request was cut off answers with the delivery it made,
      // never a second one (the receiver would get the event twice).
      yield* operations.register("webhook_replay", (deliveryId, principal) =>
        sql<{ delivery_id: string; event_id: string; webhook_id: string }>`
          SELECT d.delivery_id, d.event_id, d.webhook_id FROM webhook_deliveries d JOIN webhooks w ON w.webhook_id = d.webhook_id
          WHERE d.delivery_id = ${deliveryId} AND w.account_id = ${principal.accountId} AND w.mode = ${principal.mode}`.pipe(
          Effect.map((rows) => {
            const row = rows[0]
            return row === undefined
              // Deleted since (its deliveries went with it): what a replay would answer now.
              ? { status: 404, body: { error: WebhookNotFound.of("of this replay").error } }
              : { status: 202, body: { delivery_id: row.delivery_id, event_id: row.event_id, status: "pending" } }
          }),
          Effect.orDie
        ))

      const requireWebhook = (owner: Owner, webhookId: string) =>
        store.findActive(webhookId, owner.accountId, owner.mode).pipe(
          Effect.flatMap(Option.match({
            onNone: () => Effect.fail(WebhookNotFound.of(webhookId)),
            onSome: Effect.succeed
          }))
        )

      return Webhooks.of({
        create: Effect.fn("Webhooks.create")(function*(owner, input) {
          const checked = checkUrl(client.policy, input.url)
          if (checked._tag === "Refused") {
            return yield* Effect.fail(InvalidRequest.of(urlMessages[checked.reason], { param: "url" }))
          }
          const parsed = parseEventTypes(input.events)
          if (parsed._tag === "Invalid") return yield* Effect.fail(InvalidRequest.of(parsed.message, { param: parsed.param }))
          if ((yield* store.countActive(owner.accountId, owner.mode)) >= subscriptionsPerAccountMax) {
            return yield* Effect.fail(
              InvalidRequest.of(`An account may have at most ${subscriptionsPerAccountMax} webhook subscriptions per mode.`)
            )
          }
          const nowMs = yield* Clock.currentTimeMillis
          const webhookId = makeId("wh", nowMs)
          const secret = generateSecret()
          const webhook = {
            webhookId,
            accountId: owner.accountId,
            mode: owner.mode,
            // The normalised form (WHATWG): what is shown is what deliveries use.
            url: checked.url.href,
            eventTypes: parsed.types,
            createdAt: iso(nowMs)
          }
          yield* sql.withTransaction(Effect.gen(function*() {
            yield* store.insert({ ...webhook, secretSealed: box.seal(encoder.encode(secret), secretBinding(webhookId)) })
            yield* operations.bind("webhook", webhookId)
          }))
          const record = toWebhookRecord(webhook)
          return { webhook_id: record.webhook_id, url: record.url, events: record.events, secret, created_at: record.created_at }
        }),
        list: (owner) => store.listActive(owner.accountId, owner.mode).pipe(Effect.map((rows) => rows.map(toWebhookRecord))),
        remove: Effect.fn("Webhooks.remove")(function*(owner, webhookId) {
          const nowMs = yield* Clock.currentTimeMillis
          const deleted = yield* store.softDelete(webhookId, owner.accountId, owner.mode, iso(nowMs))
          if (!deleted) return yield* Effect.fail(WebhookNotFound.of(webhookId))
          yield* dispatcher.cancel(webhookId)
        }),
        rotateSecret: Effect.fn("Webhooks.rotateSecret")(function*(owner, webhookId) {
          const nowMs = yield* Clock.currentTimeMillis
          const secret = generateSecret()
          const previousExpiresAt = iso(nowMs + config.webhookSecretOverlapSeconds * 1_000)
          const rotated = yield* store.rotateSecret({
            webhookId,
            accountId: owner.accountId,
            mode: owner.mode,
            // The previous secret is re-sealed as is: it never leaves its sealed form here.
            seal: (previous) => Effect.succeed({ current: box.seal(encoder.encode(secret), secretBinding(webhookId)), previous }),
            previousExpiresAt
          })
          if (!rotated) return yield* Effect.fail(WebhookNotFound.of(webhookId))
          return { webhook_id: webhookId, secret, previous_secret_expires_at: previousExpiresAt }
        }),
        deliveries: Effect.fn("Webhooks.deliveries")(function*(owner, webhookId, page) {
          yield* requireWebhook(owner, webhookId)
          // One more than asked tells whether there is a next page.
          const rows = yield* store.listDeliveries(webhookId, page.limit + 1, page.offset)
          return {
            data: rows.slice(0, page.limit),
            limit: page.limit,
            offset: page.offset,
            has_more: rows.length > page.limit
          }
        }),
        replay: Effect.fn("Webhooks.replay")(function*(owner, webhookId, eventId) {
          yield* requireWebhook(owner, webhookId)
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
        })
      })
    })
  )
}
