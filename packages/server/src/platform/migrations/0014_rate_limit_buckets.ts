/**
 * D7's token buckets shared by every api node of the distributed mode: one row
 * per API key, taken from with one atomic statement, so N nodes allow the configured rate,
 * not N times it. The embedded mode keeps its buckets in process and never touches this table.
 *
 * @since 0.4.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const rateLimitBuckets = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE rate_limit_buckets (
      key_id text PRIMARY KEY,
      tokens double precision NOT NULL,
      refilled_at timestamptz NOT NULL,
      last_allowed boolean NOT NULL
    )`
})
