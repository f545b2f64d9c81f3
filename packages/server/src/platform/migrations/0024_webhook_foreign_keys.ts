/**
 * D72: two foreign keys the webhook worker paid for on every row, dropped.
 *
 * - `webhook_attempts.delivery_id`: every attempt's log row checked its delivery by a trigger that
 *   locks the row (a share lock written into it), in the statement that has just updated that very
 *   row (store/recordAttempts.ts); on the embedded database that check cost more than the insert
 *   itself. The retention sweep, the one place that deletes deliveries, now deletes their attempts
 *   in the same statement (events/EventStore.ts), as the cascade did.
 * - `webhook_deliveries.webhook_id`: checked on every fan-out row. A subscription is never deleted,
 *   only marked deleted, so nothing could violate it or cascade through it.
 *
 * The delivery's key to its event stays: retention deletes events and must take their deliveries.
 *
 * @since 0.9.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const webhookForeignKeys = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE webhook_attempts DROP CONSTRAINT webhook_attempts_delivery_id_fkey`
  yield* sql`ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_webhook_id_fkey`
})
