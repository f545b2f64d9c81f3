/**
 * Webhook subscriptions for the API (D33-D35, D59): create, list, read and change one, delete,
 * rotate the secret (ext), read the delivery history, replay an event.
 *
 * Everything is scoped to the caller's account and mode: another account's
 * subscription, or one of the other mode, is not found. Secrets are generated
 * here, sealed under the KEK with the subscription id as associated data, and
 * returned only by create and rotate. A store that does not answer fails the step with
 * `DependencyUnavailable` (answered 503 `service_unavailable`).
 *
 * The steps are top-level functions over a {@link WebhooksContext} (manage/subscriptions.ts,
 * manage/deliveries.ts, manage/replayAnswers.ts); this layer only wires them.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { EventNotFound, InvalidRequest, WebhookNotFound } from "@pps/api/Errors"
import type { CreatedWebhook, DeliveryPage, RotatedSecret, UpdateWebhookRequest, WebhookRecord } from "@pps/api/Webhooks"
import { AppConfig } from "../config/AppConfig.ts"
import { EventStore } from "../events/EventStore.ts"
import { OperationReplay } from "../platform/IdempotentOperations.ts"
import { SecretBox } from "../platform/SecretBox.ts"
import type { DependencyUnavailable } from "../platform/Unavailable.ts"
import { Dispatcher } from "./Dispatcher.ts"
import * as Deliveries from "./manage/deliveries.ts"
import { registerReplayAnswers } from "./manage/replayAnswers.ts"
import * as Subscriptions from "./manage/subscriptions.ts"
import type { Owner, WebhooksContext } from "./manage/WebhooksContext.ts"
import { WebhookClient } from "./WebhookClient.ts"
import { WebhookStore } from "./WebhookStore.ts"

export type { Owner }

/**
 * @since 0.1.0
 * @category services
 */
export class Webhooks extends Context.Service<Webhooks, {
  readonly create: (
    owner: Owner,
    input: { readonly url: string; readonly events: ReadonlyArray<string> }
  ) => Effect.Effect<CreatedWebhook, InvalidRequest | DependencyUnavailable>
  readonly list: (owner: Owner) => Effect.Effect<ReadonlyArray<WebhookRecord>, DependencyUnavailable>
  /** D59. */
  readonly get: (owner: Owner, webhookId: string) => Effect.Effect<WebhookRecord, WebhookNotFound | DependencyUnavailable>
  /** D59: url, events, enabled. */
  readonly update: (
    owner: Owner,
    webhookId: string,
    input: UpdateWebhookRequest
  ) => Effect.Effect<WebhookRecord, InvalidRequest | WebhookNotFound | DependencyUnavailable>
  readonly remove: (owner: Owner, webhookId: string) => Effect.Effect<void, WebhookNotFound | DependencyUnavailable>
  readonly rotateSecret: (
    owner: Owner,
    webhookId: string
  ) => Effect.Effect<RotatedSecret, WebhookNotFound | DependencyUnavailable>
  readonly deliveries: (
    owner: Owner,
    webhookId: string,
    page: { readonly limit: number; readonly offset: number }
  ) => Effect.Effect<DeliveryPage, WebhookNotFound | DependencyUnavailable>
  readonly replay: (
    owner: Owner,
    webhookId: string,
    eventId: string
  ) => Effect.Effect<
    { readonly delivery_id: string; readonly event_id: string; readonly status: "pending" },
    WebhookNotFound | EventNotFound | DependencyUnavailable
  >
}>()("server/webhooks/Webhooks") {
  static readonly layer = Layer.effect(
    Webhooks,
    Effect.gen(function*() {
      const context: WebhooksContext = {
        config: yield* AppConfig,
        store: yield* WebhookStore,
        events: yield* EventStore,
        box: yield* SecretBox,
        client: yield* WebhookClient,
        dispatcher: yield* Dispatcher,
        sql: yield* SqlClient.SqlClient,
        operations: yield* OperationReplay
      }
      yield* registerReplayAnswers(context)
      return Webhooks.of({
        create: (owner, input) => Subscriptions.create(context, owner, input),
        list: (owner) => Subscriptions.list(context, owner),
        get: (owner, webhookId) => Subscriptions.get(context, owner, webhookId),
        update: (owner, webhookId, input) => Subscriptions.update(context, owner, webhookId, input),
        remove: (owner, webhookId) => Subscriptions.remove(context, owner, webhookId),
        rotateSecret: (owner, webhookId) => Subscriptions.rotateSecret(context, owner, webhookId),
        deliveries: (owner, webhookId, page) => Deliveries.deliveries(context, owner, webhookId, page),
        replay: (owner, webhookId, eventId) => Deliveries.replay(context, owner, webhookId, eventId)
      })
    })
  )
}
