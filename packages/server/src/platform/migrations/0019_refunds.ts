/**
 * Refunds (D43): a refund is a transfer whose `refund_of` names the transfer it sends back,
 * indexed so a transfer's refunds (`refunds` in its representation) are one index probe away; a
 * held agent refund keeps the same link until its owner decides it. Ids only.
 *
 * @since 0.10.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const refunds = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE transfers ADD COLUMN refund_of text REFERENCES transfers (transfer_id)`
  yield* sql`CREATE INDEX transfers_refund_of ON transfers (refund_of, created_at) WHERE refund_of IS NOT NULL`
  yield* sql`ALTER TABLE agent_transactions ADD COLUMN refund_of text REFERENCES transfers (transfer_id)`
})
