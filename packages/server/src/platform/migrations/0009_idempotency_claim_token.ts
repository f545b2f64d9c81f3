/**
 * D36's fencing token: each run of an idempotent request holds a token of its own, and
 * only the run holding the claim's current token may bind an operation to it or store
 * its response. A node whose heartbeat stalled long enough to look dead, while its
 * request still ran, can then never record a second operation under a key that a
 * retry on another node took over: its SQL transaction rolls back.
 *
 * @since 0.2.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const idempotencyClaimToken = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE idempotency_keys ADD COLUMN claim_token text`
})
