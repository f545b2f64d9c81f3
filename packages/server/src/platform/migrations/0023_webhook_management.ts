/**
 * D59: a subscription can be disabled (no new deliveries, its pending ones wait) and the
 * operator can let an account deliver to a receiver on loopback.
 *
 * `webhooks.disabled_at` is null for an enabled subscription. `webhook_loopback_accounts` lists
 * the (account, mode) pairs whose subscriptions may use `http`/`https` URLs on loopback (never the
 * service's own ports, AddressPolicy.ts); a row is read at each create, update and attempt, so a
 * grant or a withdrawal takes effect without a restart.
 *
 * @since 0.9.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const webhookManagement = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE webhooks ADD COLUMN disabled_at timestamptz`
  yield* sql`
    CREATE TABLE webhook_loopback_accounts (
      account_id text NOT NULL REFERENCES accounts (account_id),
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      granted_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, mode)
    )`
})
