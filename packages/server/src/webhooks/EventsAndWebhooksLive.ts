/**
 * Events and webhooks as one layer for the server: the outbox, the bus, the
 * relay, fan-out, the delivery worker, the retention sweep and the API service.
 *
 * Build order matters in the embedded mode: fan-out registers as the bus
 * consumer before the relay starts publishing.
 *
 * @since 0.1.0
 */
import { Layer } from "effect"
import { EventBus } from "../events/EventBus.ts"
import { Outbox } from "../events/Outbox.ts"
import { Relay } from "../events/Relay.ts"
import { RetentionLive } from "../events/Retention.ts"
import { Dispatcher } from "./Dispatcher.ts"
import { FanoutLive } from "./Fanout.ts"
import { WebhookClient } from "./WebhookClient.ts"
import { Webhooks } from "./Webhooks.ts"
import { WebhookStore } from "./WebhookStore.ts"

/**
 * Needs SqlClient, AppConfig and SecretBox; provides Outbox (for every concern
 * that changes state), EventStore, EventBus, Relay, Dispatcher, Webhooks and
 * the stores.
 *
 * @since 0.1.0
 * @category layers
 */
export const EventsAndWebhooksLive = Layer.mergeAll(Webhooks.layer, Relay.layer, RetentionLive).pipe(
  Layer.provideMerge(FanoutLive),
  Layer.provideMerge(Dispatcher.layer),
  Layer.provideMerge(Layer.mergeAll(WebhookStore.layer, WebhookClient.layer, EventBus.layer, Outbox.layer))
)
