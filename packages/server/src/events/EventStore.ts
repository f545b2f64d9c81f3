/**
 * The events table: the outbox rows the relay publishes, and the event log
 * replays read from (D35).
 *
 * Every statement runs on the SqlClient of the layer, so a caller inside
 * `sql.withTransaction` of the same client writes in its transaction.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, type SqlError, type Statement } from "effect/sql"
import { Mode } from "@pps/api/ApiKeys"
import { EventMessage, EventType, type StoredEvent } from "@pps/api/Events"
import { withoutWaitingForDisk } from "../platform/CommitDurability.ts"
import * as Invariant from "../platform/Invariant.ts"

const EventRow = Schema.Struct({
  event_id: Schema.String,
  account_id: Schema.String,
  mode: Mode,
  type: EventType,
  payload: Schema.String,
  created_at: Schema.String
})

const toEvent = (row: typeof EventRow.Type): StoredEvent => ({
  eventId: row.event_id,
  accountId: row.account_id,
  mode: row.mode,
  type: row.type,
  payload: row.payload,
  createdAt: row.created_at
})

/** What every statement runs over, built once by the layer. */
interface EventStoreContext {
  readonly sql: SqlClient.SqlClient
  readonly columns: Statement.Fragment
}

const decodeRows = Schema.decodeUnknownEffect(Schema.Array(EventRow))
const decodeMessages = Schema.decodeUnknownEffect(Schema.Array(EventMessage))

// A row that does not decode breaks our own schema (the migrations write what it reads): a defect.
const rowsDecode = Invariant.orDie("the events table's rows decode with the schema its migrations define")

const rows = (statement: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>) =>
  Effect.flatMap(statement, (found) => rowsDecode(decodeRows(found))).pipe(
    Effect.map((decoded) => decoded.map(toEvent))
  )

const insert = Effect.fn("EventStore.insert")(function*({ sql }: EventStoreContext, events: ReadonlyArray<StoredEvent>) {
  if (events.length === 0) return
  yield* sql`
    INSERT INTO events ${
    sql.insert(events.map((event): Record<string, unknown> => ({
      event_id: event.eventId,
      account_id: event.accountId,
      mode: event.mode,
      type: event.type,
      payload: event.payload,
      created_at: event.createdAt
    })) as [Record<string, unknown>, ...Array<Record<string, unknown>>])
  }`
})

const unpublished = ({ sql }: EventStoreContext, limit: number) =>
  sql`SELECT event_id, account_id, mode, type FROM events WHERE published_at IS NULL ORDER BY event_id LIMIT ${limit}`.pipe(
    Effect.flatMap((found) => rowsDecode(decodeMessages(found))),
    Effect.withSpan("EventStore.unpublished")
  )

const markPublished = ({ sql }: EventStoreContext, eventIds: ReadonlyArray<string>, publishedAt: string) =>
  eventIds.length === 0
    ? Effect.void
    // Lost in a crash, the events are published again (deduplicated by id).
    : withoutWaitingForDisk(
      sql,
      sql`UPDATE events SET published_at = ${publishedAt}::timestamptz WHERE ${sql.in("event_id", eventIds)}`
    ).pipe(
      Effect.asVoid,
      Effect.withSpan("EventStore.markPublished")
    )

const findForAccount = ({ columns, sql }: EventStoreContext, eventId: string, accountId: string, mode: Mode) =>
  rows(
    sql`SELECT ${columns} FROM events WHERE event_id = ${eventId} AND account_id = ${accountId} AND mode = ${mode}`
  ).pipe(Effect.map((found) => Option.fromNullishOr(found[0])))

const listAfter = ({ columns, sql }: EventStoreContext, query: ListAfterQuery) =>
  rows(sql`
    SELECT ${columns} FROM events
    WHERE account_id = ${query.accountId} AND mode = ${query.mode} AND event_id > ${query.afterEventId}
      AND created_at < ${query.createdBefore}::timestamptz
    ORDER BY event_id LIMIT ${query.limit}`)

const deleteOlderThan = ({ sql }: EventStoreContext, cutoff: string) =>
  sql<{ event_id: string }>`
    DELETE FROM events e WHERE e.created_at < ${cutoff}::timestamptz
      AND NOT EXISTS (
        SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.event_id AND d.status = 'pending')
    RETURNING e.event_id`.pipe(Effect.map((deleted) => deleted.length), Effect.withSpan("EventStore.deleteOlderThan"))

/**
 * What `listAfter` reads.
 *
 * @since 0.8.0
 * @category models
 */
export interface ListAfterQuery {
  readonly accountId: string
  readonly mode: Mode
  readonly afterEventId: string
  readonly createdBefore: string
  readonly limit: number
}

/**
 * @since 0.1.0
 * @category services
 */
export class EventStore extends Context.Service<EventStore, {
  /** One statement for the whole batch (a transfer's two sides, a burst). */
  readonly insert: (events: ReadonlyArray<StoredEvent>) => Effect.Effect<void, SqlError.SqlError>
  /**
   * The oldest unpublished events, at most `limit`, as the bus carries them (ids, account, mode,
   * type): the relay re-reads this on every commit, so it reads no payload it would not publish.
   */
  readonly unpublished: (limit: number) => Effect.Effect<ReadonlyArray<EventMessage>, SqlError.SqlError>
  readonly markPublished: (eventIds: ReadonlyArray<string>, publishedAt: string) => Effect.Effect<void, SqlError.SqlError>
  /** An event of this account and mode (D35: another account's event is not found). */
  readonly findForAccount: (
    eventId: string,
    accountId: string,
    mode: Mode
  ) => Effect.Effect<Option.Option<StoredEvent>, SqlError.SqlError>
  /**
   * The account's events of a mode after `afterEventId` in id order, created before
   * `createdBefore` (the live stream's settle window), at most `limit`.
   */
  readonly listAfter: (query: ListAfterQuery) => Effect.Effect<ReadonlyArray<StoredEvent>, SqlError.SqlError>
  /** Deletes events created before `cutoff` that no pending delivery needs; returns how many. */
  readonly deleteOlderThan: (cutoff: string) => Effect.Effect<number, SqlError.SqlError>
}>()("server/events/EventStore") {
  static readonly layer = Layer.effect(
    EventStore,
    SqlClient.SqlClient.useSync((sql) => {
      const context: EventStoreContext = {
        sql,
        columns: sql`event_id, account_id, mode, type, payload, iso_utc(created_at) AS created_at`
      }
      return EventStore.of({
        insert: (events) => insert(context, events),
        unpublished: (limit) => unpublished(context, limit),
        markPublished: (eventIds, publishedAt) => markPublished(context, eventIds, publishedAt),
        findForAccount: (eventId, accountId, mode) => findForAccount(context, eventId, accountId, mode),
        listAfter: (query) => listAfter(context, query),
        deleteOlderThan: (cutoff) => deleteOlderThan(context, cutoff)
      })
    })
  )
}
