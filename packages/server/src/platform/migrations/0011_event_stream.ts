/**
 * The live event stream (`GET /v1/events/stream`) reads an account's events of a mode in
 * id order after a cursor: this index serves that read.
 *
 * @since 0.3.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const eventStream = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX events_account_stream ON events (account_id, mode, event_id)`
})
