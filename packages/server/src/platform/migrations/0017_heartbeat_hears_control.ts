/**
 * Whether a node acts on control messages now (its control-channel subscription is
 * registered and reliable): a revoking node waits for the answers of those nodes only.
 * A node starting (not subscribed yet), cut from NATS or stopping caches no API key, so
 * waiting for it only delayed a revocation by the full wait and named it in a warning.
 *
 * @since 0.7.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const heartbeatHearsControl = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // True unless written otherwise: a node of an earlier version, which caches keys and never
  // writes the column, is still waited for during a rolling deploy (the safe side). This
  // version writes it in every insert of its row.
  yield* sql`ALTER TABLE node_heartbeats ADD COLUMN hears_control boolean NOT NULL DEFAULT true`
})
