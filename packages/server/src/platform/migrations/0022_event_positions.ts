/**
 * D58: each event's position in commit-visibility order, so the live stream can hand out
 * events as soon as they are visible without skipping one that commits late.
 *
 * `tx_id` is the recording transaction's id (`pg_current_xact_id()`, assigned at its first
 * write) and `seq` a sequence value, which orders the events of one transaction. A reader
 * streams only rows whose `tx_id` lies below its snapshot's xmin: every transaction with a
 * smaller id has ended, so no row can appear later before the reader's cursor (D58).
 *
 * Rows recorded before this migration get `tx_id` 0 and `seq` in id order: they sort before
 * every later row and keep the order the stream gave them.
 *
 * @since 0.9.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const eventPositions = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE events ADD COLUMN tx_id xid8 NOT NULL DEFAULT '0'`
  yield* sql`ALTER TABLE events ADD COLUMN seq bigint`
  yield* sql`
    UPDATE events SET seq = ordered.n
    FROM (SELECT event_id, row_number() OVER (ORDER BY event_id) AS n FROM events) ordered
    WHERE events.event_id = ordered.event_id`
  yield* sql`CREATE SEQUENCE events_seq OWNED BY events.seq`
  yield* sql`SELECT setval('events_seq', COALESCE((SELECT max(seq) FROM events), 0) + 1, false)`
  yield* sql`ALTER TABLE events ALTER COLUMN seq SET DEFAULT nextval('events_seq'), ALTER COLUMN seq SET NOT NULL`
  yield* sql`ALTER TABLE events ALTER COLUMN tx_id SET DEFAULT pg_current_xact_id()`
  yield* sql`CREATE INDEX events_account_position ON events (account_id, mode, tx_id, seq)`
})
