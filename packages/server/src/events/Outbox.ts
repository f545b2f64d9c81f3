/**
 * The outbox: how every state change records its events (D30).
 *
 * `append` writes the event rows through the layer's SqlClient, so a caller
 * inside `sql.withTransaction` commits its change and its events together, or
 * neither. Once the outermost transaction commits, the relay is woken to
 * publish them; if the process dies first, the rows are still unpublished and
 * the relay publishes them after the restart. Nothing else ever creates events.
 *
 * @since 0.1.0
 */
import { Clock, Context, DateTime, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { makeId } from "../platform/Ids.ts"
import { encodePayload, type EventInput, type StoredEvent } from "@pps/api/Events"
import { EventFeed } from "./EventFeed.ts"
import { EventStore } from "./EventStore.ts"
import { makeWakeup, type Wakeup } from "./Wakeup.ts"

/** What `append` runs over, built once by the layer. */
interface OutboxContext {
  readonly sql: SqlClient.SqlClient
  readonly store: EventStore["Service"]
  readonly committed: Wakeup
  readonly feed: EventFeed["Service"]
}

const append = Effect.fn("Outbox.append")(function*(
  { committed, feed, sql, store }: OutboxContext,
  events: ReadonlyArray<EventInput>
) {
  const nowMs = yield* Clock.currentTimeMillis
  const createdAt = DateTime.formatIso(DateTime.makeUnsafe(nowMs))
  const stored: Array<StoredEvent> = []
  for (const input of events) {
    const eventId = makeId("evt", nowMs)
    const { json, type } = encodePayload(input.payload, eventId, createdAt)
    const event: StoredEvent = {
      eventId,
      accountId: input.recipientAccountId,
      mode: input.mode,
      type,
      payload: json,
      createdAt
    }
    stored.push(event)
  }
  yield* store.insert(stored)
  // Runs after the caller's outermost commit (at once without a transaction);
  // discarded on rollback, so a rolled-back event is never announced.
  // The live streams of the accounts concerned are woken too, on every node (D58).
  if (stored.length > 0) {
    const accountIds = [...new Set(stored.map((event) => event.accountId))]
    yield* sql.afterCommit(Effect.andThen(committed.wake, feed.announce(accountIds)))
  }
  return stored
})

/**
 * @since 0.1.0
 * @category services
 */
export class Outbox extends Context.Service<Outbox, {
  /**
   * Records events in the caller's transaction (when there is one); returns
   * them as stored, ids and payloads assigned.
   */
  readonly append: (events: ReadonlyArray<EventInput>) => Effect.Effect<ReadonlyArray<StoredEvent>, SqlError.SqlError>
  /** Signalled after each commit that appended events (the relay waits on it). */
  readonly committed: Wakeup
}>()("server/events/Outbox") {
  static readonly layer = Layer.effect(
    Outbox,
    Effect.gen(function*() {
      const context: OutboxContext = {
        sql: yield* SqlClient.SqlClient,
        store: yield* EventStore,
        committed: yield* makeWakeup,
        feed: yield* EventFeed
      }
      return Outbox.of({
        committed: context.committed,
        append: (events) => append(context, events)
      })
    })
  ).pipe(Layer.provideMerge(Layer.mergeAll(EventStore.layer, EventFeed.layer)))
}
