/**
 * Fan-out: the bus consumer that turns each event into one delivery per
 * matching subscription (same account, same mode — D9 —, event type
 * subscribed), then wakes the dispatcher.
 *
 * Idempotent, as the bus requires: a re-published or redelivered event meets
 * the unique index on (event, subscription) and adds nothing.
 *
 * @since 0.1.0
 */
import { Clock, DateTime, Effect, Layer } from "effect"
import type { EventMessage } from "@pps/api/Events"
import { AppConfig, runsWorkers } from "../config/AppConfig.ts"
import { EventBus } from "../events/EventBus.ts"
import { makeId } from "../platform/Ids.ts"
import { Dispatcher } from "./Dispatcher.ts"
import { type NewDelivery, WebhookStore } from "./WebhookStore.ts"

/** Rows per INSERT (one JSON parameter): bounds one statement's size and time. */
const insertBatchMax = 1_000

/**
 * Creates the deliveries of a batch of events; returns how many were new.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fanOut = Effect.fn("Fanout.fanOut")(function*(messages: ReadonlyArray<EventMessage>) {
  const store = yield* WebhookStore
  const accountIds = [...new Set(messages.map((message) => message.account_id))]
  const subscriptions = yield* store.subscribersOf(accountIds)
  const nowMs = yield* Clock.currentTimeMillis
  const now = DateTime.formatIso(DateTime.makeUnsafe(nowMs))
  const rows: Array<NewDelivery> = []
  for (const message of messages) {
    for (const subscription of subscriptions) {
      if (
        subscription.accountId === message.account_id && subscription.mode === message.mode &&
        subscription.eventTypes.includes(message.type)
      ) {
        rows.push({
          deliveryId: makeId("dlv", nowMs),
          webhookId: subscription.webhookId,
          eventId: message.event_id,
          trigger: "event",
          createdAt: now
        })
      }
    }
  }
  let inserted = 0
  for (let start = 0; start < rows.length; start += insertBatchMax) {
    inserted += yield* store.insertDeliveries(rows.slice(start, start + insertBatchMax), now)
  }
  return inserted
})

/**
 * Registers fan-out as the bus consumer for the life of the layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const FanoutLive = Layer.effectDiscard(
  Effect.gen(function*() {
    const bus = yield* EventBus
    const store = yield* WebhookStore
    const dispatcher = yield* Dispatcher
    // An api-only node does not consume: the workers fan out (the durable consumer is shared).
    if (!runsWorkers(yield* AppConfig)) return
    yield* bus.consume((messages) =>
      fanOut(messages).pipe(
        Effect.provideService(WebhookStore, store),
        Effect.tap((inserted) => (inserted > 0 ? dispatcher.wake : Effect.void))
      )
    )
  })
)
