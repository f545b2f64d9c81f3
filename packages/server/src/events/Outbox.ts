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
import { SqlClient, type SqlError, type Statement } from "effect/sql"
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

/** The events as they will be stored: ids and payloads assigned, all created now. */
const stamp = (events: ReadonlyArray<EventInput>) =>
  Effect.map(Clock.currentTimeMillis, (nowMs) => {
    const createdAt = DateTime.formatIso(DateTime.makeUnsafe(nowMs))
    return events.map((input): StoredEvent => {
      const eventId = makeId("evt", nowMs)
      const { json, type } = encodePayload(input.payload, eventId, createdAt)
      return { eventId, accountId: input.recipientAccountId, mode: input.mode, type, payload: json, createdAt }
    })
  })

/**
 * Runs after the caller's outermost commit (at once without a transaction); discarded on
 * rollback, so a rolled-back event is never announced. The live streams of the accounts
 * concerned are woken too, on every node (D58).
 */
const announceAfterCommit = ({ committed, feed, sql }: OutboxContext, stored: ReadonlyArray<StoredEvent>) =>
  stored.length === 0
    ? Effect.void
    : sql.afterCommit(Effect.andThen(committed.wake, feed.announce([...new Set(stored.map((event) => event.accountId))])))

const append = Effect.fn("Outbox.append")(function*(context: OutboxContext, events: ReadonlyArray<EventInput>) {
  const stored = yield* stamp(events)
  yield* context.store.insert(stored)
  yield* announceAfterCommit(context, stored)
  return stored
})

const appendWithin = Effect.fn("Outbox.appendWithin")(function*(context: OutboxContext, events: ReadonlyArray<EventInput>) {
  const stored = yield* stamp(events)
  yield* announceAfterCommit(context, stored)
  return stored.length === 0 ? undefined : context.store.insertStatement(stored)
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
  /**
   * `append` for a caller that writes the rows within a larger statement of its transaction
   * (transfers/record.ts): the INSERT, not run (undefined for no events), and the relay's wake
   * after that transaction's commit, as `append` does. The caller must run the INSERT in the
   * transaction it calls this in.
   */
  readonly appendWithin: (events: ReadonlyArray<EventInput>) => Effect.Effect<Statement.Fragment | undefined>
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
        append: (events) => append(context, events),
        appendWithin: (events) => appendWithin(context, events)
      })
    })
  ).pipe(Layer.provideMerge(Layer.mergeAll(EventStore.layer, EventFeed.layer)))
}
