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
import { statementWithoutWaitingForDisk } from "../platform/CommitDurability.ts"
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

/** The INSERT of new events (never empty): run by `insert`, or written within a larger statement. */
const insertStatement = ({ sql }: EventStoreContext, events: ReadonlyArray<StoredEvent>) =>
  sql`
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

const insert = Effect.fn("EventStore.insert")(function*(context: EventStoreContext, events: ReadonlyArray<StoredEvent>) {
  if (events.length === 0) return
  yield* insertStatement(context, events)
})

const unpublished = ({ sql }: EventStoreContext, limit: number) =>
  sql`SELECT event_id, account_id, mode, type FROM events WHERE published_at IS NULL ORDER BY event_id LIMIT ${limit}`.pipe(
    Effect.flatMap((found) => rowsDecode(decodeMessages(found))),
    Effect.withSpan("EventStore.unpublished")
  )

const markPublished = ({ sql }: EventStoreContext, eventIds: ReadonlyArray<string>, publishedAt: string) =>
  eventIds.length === 0
    ? Effect.void
    // Lost in a crash, the events are published again (deduplicated by id). One statement, not
    // BEGIN, SET, UPDATE and COMMIT: a relay round runs for most commits of the transfer path.
    : statementWithoutWaitingForDisk(sql, (commitSetting) =>
      sql`UPDATE events SET published_at = ${publishedAt}::timestamptz FROM (SELECT ${commitSetting}) AS commit_mode
        WHERE ${sql.in("event_id", eventIds)}`).pipe(
      Effect.asVoid,
      Effect.withSpan("EventStore.markPublished")
    )

const findForAccount = ({ columns, sql }: EventStoreContext, eventId: string, accountId: string, mode: Mode) =>
  rows(
    sql`SELECT ${columns} FROM events WHERE event_id = ${eventId} AND account_id = ${accountId} AND mode = ${mode}`
  ).pipe(Effect.map((found) => Option.fromNullishOr(found[0])))

// Newest first (by position, D58: ids drawn in one millisecond are not ordered), as the transfer
// list (D16); one more than the page says whether more follow.
const listPage = ({ columns, sql }: EventStoreContext, query: ListPageQuery) =>
  rows(sql`
    SELECT ${columns} FROM events
    WHERE account_id = ${query.accountId} AND mode = ${query.mode}
      ${query.types.length === 0 ? sql`` : sql`AND ${sql.in("type", query.types)}`}
    ORDER BY tx_id DESC, seq DESC LIMIT ${query.limit + 1} OFFSET ${query.offset}`).pipe(
    Effect.map((found) => ({ events: found.slice(0, query.limit), hasMore: found.length > query.limit })),
    Effect.withSpan("EventStore.listPage")
  )

/**
 * A row's position as decimal text (64-bit values), under names of their own: an `ORDER BY tx_id,
 * seq` resolves a bare name to an output column before a table column, so text columns named
 * `tx_id` and `seq` would sort the stream as strings ("1000" before "996", seq "10" before "9"),
 * and a page's last row would no longer be its furthest: the next page would hand out again
 * the rows after it, or skip those a LIMIT left out.
 */
const positionColumns = (sql: SqlClient.SqlClient) => sql`tx_id::text AS position_tx_id, seq::text AS position_seq`

const PositionRow = Schema.Struct({ position_tx_id: Schema.String, position_seq: Schema.String })
const decodePositions = Schema.decodeUnknownEffect(Schema.Array(PositionRow))
const toPosition = (row: typeof PositionRow.Type): EventPosition => ({ txId: row.position_tx_id, seq: row.position_seq })
const positionRows = (statement: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>) =>
  Effect.flatMap(statement, (found) => rowsDecode(decodePositions(found))).pipe(
    Effect.map((decoded) => Option.fromNullishOr(decoded[0]).pipe(Option.map(toPosition)))
  )

const positionOf = ({ sql }: EventStoreContext, eventId: string, accountId: string, mode: Mode) =>
  positionRows(sql`
    SELECT ${positionColumns(sql)} FROM events WHERE event_id = ${eventId} AND account_id = ${accountId} AND mode = ${mode}`)

// The earliest position among the events with a larger id: resuming just before it misses none of them.
const firstPositionAfterId = ({ sql }: EventStoreContext, eventId: string, accountId: string, mode: Mode) =>
  positionRows(sql`
    SELECT ${positionColumns(sql)} FROM events WHERE account_id = ${accountId} AND mode = ${mode} AND event_id > ${eventId}
    ORDER BY tx_id, seq LIMIT 1`)

/**
 * D58's visibility watermark, read before the rows it guards: every transaction of this
 * database with a smaller id has ended (so its rows are visible to any later statement), and
 * every transaction that has not ended has an id at or above it. It is the smallest id among
 * this database's running transactions (`pg_stat_activity`), or the snapshot's xmax when none
 * runs: a transaction that gets its id after this read gets a larger one. Other databases on
 * the same PostgreSQL server do not hold it back, as the snapshot's xmin (server-wide) would.
 * `backend_xid` is 32 bits: widened to 64 next to xmax (ids in use lie within 2^31 of it).
 * `pg_current_snapshot()` is the statement's snapshot, taken before pg_stat_activity is read: a
 * transaction missing from that read got its id after the snapshot, so at or above its xmax.
 * PostgreSQL shows every session's `datid` and `backend_xid` to every role (only the query, state
 * and client are kept from a role without pg_read_all_stats), so the service's role needs no grant
 * (docs/operations.md, "Database"; test/events-watermark-role.postgres.test.ts).
 */
const watermark = ({ sql }: EventStoreContext) =>
  sql<{ readonly xmax: string; readonly running: ReadonlyArray<string> | null }>`
    SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS xmax,
      (SELECT array_agg(backend_xid::text) FROM pg_stat_activity
        WHERE datid = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND backend_xid IS NOT NULL AND pid <> pg_backend_pid()) AS running`.pipe(
    Effect.map((found) => {
      const xmax = BigInt(found[0]?.xmax ?? "0")
      return (found[0]?.running ?? []).reduce((lowest, xid) => {
        const widened = widenXid(xmax, BigInt(xid))
        return widened < lowest ? widened : lowest
      }, xmax)
    }),
    Effect.withSpan("EventStore.watermark")
  )

const epochSpan = 1n << 32n
const halfEpoch = 1n << 31n

/** A 32-bit transaction id as the 64-bit one nearest `reference`. */
export const widenXid = (reference: bigint, xid: bigint): bigint => {
  const candidate = (reference - (reference % epochSpan)) + xid
  if (candidate > reference + halfEpoch) return candidate - epochSpan
  if (candidate < reference - halfEpoch) return candidate + epochSpan
  return candidate
}

const visibleFrom = (context: EventStoreContext) =>
  watermark(context).pipe(Effect.map((lowest): EventPosition => ({ txId: lowest.toString(), seq: "0" })))

const PositionedRow = Schema.Struct({ ...EventRow.fields, ...PositionRow.fields })
const decodePositioned = Schema.decodeUnknownEffect(Schema.Array(PositionedRow))

const listAfterPosition = (context: EventStoreContext, query: ListAfterPositionQuery) =>
  Effect.gen(function*() {
    const { columns, sql } = context
    // First the watermark, then the rows: the rows' snapshot is taken after it (D58).
    const below = yield* watermark(context)
    const found = yield* sql`
      SELECT ${columns}, ${positionColumns(sql)}
      FROM events
      WHERE account_id = ${query.accountId} AND mode = ${query.mode}
        AND (tx_id, seq) > (${query.after.txId}::xid8, ${query.after.seq}::bigint)
        ${query.types.length === 0 ? sql`` : sql`AND ${sql.in("type", query.types)}`}
      ORDER BY tx_id, seq LIMIT ${query.limit}`.pipe(Effect.flatMap((rows) => rowsDecode(decodePositioned(rows))))
    // Ordered by transaction id, so the settled rows are a prefix; the rest wait for the
    // transactions before them to end.
    const settled = found.filter((row) => BigInt(row.position_tx_id) < below)
    const page: PositionedPage = {
      events: settled.map((row) => ({ ...toEvent(row), position: toPosition(row) })),
      heldBack: settled.length < found.length
    }
    return page
  }).pipe(Effect.withSpan("EventStore.listAfterPosition"))

/**
 * Deletes old events; their deliveries go by the cascade of their key to the event, and their
 * deliveries' attempt logs here (the log keeps no key to its delivery, D72). Every CTE reads the
 * table as it was before the statement, so the deliveries are still there to be joined.
 */
const deleteOlderThan = ({ sql }: EventStoreContext, cutoff: string) =>
  sql<{ event_id: string }>`
    WITH gone AS (
      DELETE FROM events e WHERE e.created_at < ${cutoff}::timestamptz
        AND NOT EXISTS (
          SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.event_id AND d.status = 'pending')
      RETURNING e.event_id
    ), attempts AS (
      DELETE FROM webhook_attempts a USING webhook_deliveries d, gone g
      WHERE a.delivery_id = d.delivery_id AND d.event_id = g.event_id
    )
    SELECT event_id FROM gone`.pipe(Effect.map((deleted) => deleted.length), Effect.withSpan("EventStore.deleteOlderThan"))

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
 * What `listPage` reads (`GET /v1/events`, D59).
 *
 * @since 0.9.0
 * @category models
 */
export interface ListPageQuery {
  readonly accountId: string
  readonly mode: Mode
  /** Only these types; empty for all. */
  readonly types: ReadonlyArray<string>
  readonly limit: number
  readonly offset: number
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
   * `insert`'s statement, not run: for a caller that writes it within a larger statement (one
   * round trip for several tables' rows, transfers/record.ts). At least one event.
   */
  readonly insertStatement: (events: ReadonlyArray<StoredEvent>) => Statement.Fragment
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
  /** The account's events of a mode, newest first, a page at a time (D59). */
  readonly listPage: (
    query: ListPageQuery
  ) => Effect.Effect<{ readonly events: ReadonlyArray<StoredEvent>; readonly hasMore: boolean }, SqlError.SqlError>
  /** Where an event of this account and mode sits in the stream's order (D58). */
  readonly positionOf: (eventId: string, accountId: string, mode: Mode) => Effect.Effect<Option.Option<EventPosition>, SqlError.SqlError>
  /** The earliest position among the account's events whose id sorts after `eventId`. */
  readonly firstPositionAfterId: (
    eventId: string,
    accountId: string,
    mode: Mode
  ) => Effect.Effect<Option.Option<EventPosition>, SqlError.SqlError>
  /** A position every event committed from now on sorts after (the watermark, D58). */
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
        insertStatement: (events) => insertStatement(context, events),
        unpublished: (limit) => unpublished(context, limit),
        markPublished: (eventIds, publishedAt) => markPublished(context, eventIds, publishedAt),
        findForAccount: (eventId, accountId, mode) => findForAccount(context, eventId, accountId, mode),
        listPage: (query) => listPage(context, query),
        positionOf: (eventId, accountId, mode) => positionOf(context, eventId, accountId, mode),
        firstPositionAfterId: (eventId, accountId, mode) => firstPositionAfterId(context, eventId, accountId, mode),
        visibleFrom: visibleFrom(context),
        listAfterPosition: (query) => listAfterPosition(context, query),
        deleteOlderThan: (cutoff) => deleteOlderThan(context, cutoff)
      })
    })
  )
}
