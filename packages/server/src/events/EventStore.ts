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

const positionColumns = (sql: SqlClient.SqlClient) => sql`tx_id::text AS tx_id, seq::text AS seq`

const PositionRow = Schema.Struct({ tx_id: Schema.String, seq: Schema.String })
const decodePositions = Schema.decodeUnknownEffect(Schema.Array(PositionRow))
const positionRows = (statement: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>) =>
  Effect.flatMap(statement, (found) => rowsDecode(decodePositions(found))).pipe(
    Effect.map((decoded) => Option.fromNullishOr(decoded[0]).pipe(Option.map((row): EventPosition => ({ txId: row.tx_id, seq: row.seq }))))
  )

const positionOf = ({ sql }: EventStoreContext, eventId: string, accountId: string, mode: Mode) =>
  positionRows(sql`
    SELECT ${positionColumns(sql)} FROM events WHERE event_id = ${eventId} AND account_id = ${accountId} AND mode = ${mode}`)

// The earliest position among the events with a larger id: resuming just before it misses none of them.
const firstPositionAfterId = ({ sql }: EventStoreContext, eventId: string, accountId: string, mode: Mode) =>
  positionRows(sql`
    SELECT ${positionColumns(sql)} FROM events WHERE account_id = ${accountId} AND mode = ${mode} AND event_id > ${eventId}
    ORDER BY tx_id, seq LIMIT 1`)

// Every transaction with an id below the snapshot's xmin has ended: rows of later ones sort after.
const visibleFrom = ({ sql }: EventStoreContext) =>
  sql<{ readonly xmin: string }>`SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin`.pipe(
    Effect.map((found): EventPosition => ({ txId: found[0]?.xmin ?? "0", seq: "0" }))
  )

const SettledRow = Schema.Struct({ ...EventRow.fields, ...PositionRow.fields, settled: Schema.Boolean })
const decodeSettled = Schema.decodeUnknownEffect(Schema.Array(SettledRow))

const listAfterPosition = ({ columns, sql }: EventStoreContext, query: ListAfterPositionQuery) =>
  sql`
    SELECT ${columns}, ${positionColumns(sql)}, tx_id < pg_snapshot_xmin(pg_current_snapshot()) AS settled
    FROM events
    WHERE account_id = ${query.accountId} AND mode = ${query.mode}
      AND (tx_id, seq) > (${query.after.txId}::xid8, ${query.after.seq}::bigint)
      ${query.types.length === 0 ? sql`` : sql`AND ${sql.in("type", query.types)}`}
    ORDER BY tx_id, seq LIMIT ${query.limit}`.pipe(
    Effect.flatMap((found) => rowsDecode(decodeSettled(found))),
    Effect.map((found): PositionedPage => {
      // Ordered by transaction id, so the settled rows are a prefix; the rest wait for the
      // transactions before them to end.
      const settled = found.filter((row) => row.settled)
      return {
        events: settled.map((row) => ({ ...toEvent(row), position: { txId: row.tx_id, seq: row.seq } })),
        heldBack: settled.length < found.length
      }
    }),
    Effect.withSpan("EventStore.listAfterPosition")
  )

const deleteOlderThan = ({ sql }: EventStoreContext, cutoff: string) =>
  sql<{ event_id: string }>`
    DELETE FROM events e WHERE e.created_at < ${cutoff}::timestamptz
      AND NOT EXISTS (
        SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.event_id AND d.status = 'pending')
    RETURNING e.event_id`.pipe(Effect.map((deleted) => deleted.length), Effect.withSpan("EventStore.deleteOlderThan"))

/**
 * Where an event sits in the stream's order (D58): its transaction's id, then its sequence
 * number within the table. Decimal strings (64-bit values).
 *
 * @since 0.9.0
 * @category models
 */
export interface EventPosition {
  readonly txId: string
  readonly seq: string
}

/**
 * What `listAfterPosition` reads.
 *
 * @since 0.9.0
 * @category models
 */
export interface ListAfterPositionQuery {
  readonly accountId: string
  readonly mode: Mode
  readonly after: EventPosition
  /** Only these types; empty for all. */
  readonly types: ReadonlyArray<string>
  readonly limit: number
}

/**
 * A page of the stream: the events now safe to hand out, in order, and whether later rows
 * were seen that wait for an earlier transaction to end (the reader asks again soon).
 *
 * @since 0.9.0
 * @category models
 */
export interface PositionedPage {
  readonly events: ReadonlyArray<StoredEvent & { readonly position: EventPosition }>
  readonly heldBack: boolean
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
  /** Where an event of this account and mode sits in the stream's order (D58). */
  readonly positionOf: (eventId: string, accountId: string, mode: Mode) => Effect.Effect<Option.Option<EventPosition>, SqlError.SqlError>
  /** The earliest position among the account's events whose id sorts after `eventId`. */
  readonly firstPositionAfterId: (
    eventId: string,
    accountId: string,
    mode: Mode
  ) => Effect.Effect<Option.Option<EventPosition>, SqlError.SqlError>
  /** A position every event committed from now on sorts after (the snapshot's xmin, D58). */
  readonly visibleFrom: Effect.Effect<EventPosition, SqlError.SqlError>
  /** The account's events after a position, in stream order, only those safe to hand out (D58). */
  readonly listAfterPosition: (query: ListAfterPositionQuery) => Effect.Effect<PositionedPage, SqlError.SqlError>
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
        positionOf: (eventId, accountId, mode) => positionOf(context, eventId, accountId, mode),
        firstPositionAfterId: (eventId, accountId, mode) => firstPositionAfterId(context, eventId, accountId, mode),
        visibleFrom: visibleFrom(context),
        listAfterPosition: (query) => listAfterPosition(context, query),
        deleteOlderThan: (cutoff) => deleteOlderThan(context, cutoff)
      })
    })
  )
}
