/**
 * Events (the outbox), webhook subscriptions, their deliveries and the attempt log.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * @since 0.1.0
 * @category migrations
 */
export const eventsAndWebhooks = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // The outbox and the event log in one table (D30): a row is written in the
  // same transaction as the state change it reports; `published_at` is null
  // until the relay has handed it to the bus. `account_id` is the account whose
  // subscriptions receive it (the owner, for agent events); `payload` is the
  // exact JSON body every delivery of the event sends, fixed at write time so
  // retries and replays are byte-identical. Kept at least 30 days (D35).
  yield* sql`
    CREATE TABLE events (
      event_id text PRIMARY KEY,
      account_id text NOT NULL REFERENCES accounts (account_id),
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      type text NOT NULL,
      payload text NOT NULL,
      created_at timestamptz NOT NULL,
      published_at timestamptz
    )`
  yield* sql`CREATE INDEX events_unpublished ON events (event_id) WHERE published_at IS NULL`
  yield* sql`CREATE INDEX events_created_at ON events (created_at)`
  // D33. `event_types` is a comma-separated list (event names hold no commas).
  // Secrets are sealed under the KEK with the webhook id as associated data; the
  // previous secret stays valid for signing until `previous_secret_expires_at`
  // (rotation overlap). `lease_*` is the subscription's delivery lease: the one
  // worker (across nodes) that sends its deliveries, one at a time.
  yield* sql`
    CREATE TABLE webhooks (
      webhook_id text PRIMARY KEY,
      account_id text NOT NULL REFERENCES accounts (account_id),
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      url text NOT NULL,
      event_types text NOT NULL,
      secret_sealed bytea NOT NULL,
      previous_secret_sealed bytea,
      previous_secret_expires_at timestamptz,
      created_at timestamptz NOT NULL,
      deleted_at timestamptz,
      lease_owner text,
      lease_until timestamptz
    )`
  yield* sql`CREATE INDEX webhooks_account ON webhooks (account_id, mode, created_at) WHERE deleted_at IS NULL`
  // One row per (event, subscription) from fan-out (unique, so a re-published
  // event fans out once), plus one per replay. `next_attempt_at` is the
  // persisted schedule (D32): a restarted node resumes on time.
  yield* sql`
    CREATE TABLE webhook_deliveries (
      delivery_id text PRIMARY KEY,
      webhook_id text NOT NULL REFERENCES webhooks (webhook_id) ON DELETE CASCADE,
      event_id text NOT NULL REFERENCES events (event_id) ON DELETE CASCADE,
      trigger text NOT NULL CHECK (trigger IN ('event', 'replay')),
      status text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed', 'cancelled')),
      attempt_count integer NOT NULL DEFAULT 0,
      response_status_code integer,
      last_error text,
      next_attempt_at timestamptz,
      created_at timestamptz NOT NULL,
      last_attempt_at timestamptz
    )`
  yield* sql`
    CREATE UNIQUE INDEX webhook_deliveries_fanout ON webhook_deliveries (event_id, webhook_id) WHERE trigger = 'event'`
  // Matches dueDeliveries' ORDER BY, so a subscription's backlog is read a page at a time.
  yield* sql`
    CREATE INDEX webhook_deliveries_due ON webhook_deliveries (webhook_id, next_attempt_at, delivery_id)
    WHERE status = 'pending'`
  yield* sql`CREATE INDEX webhook_deliveries_next ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'`
  yield* sql`CREATE INDEX webhook_deliveries_history ON webhook_deliveries (webhook_id, created_at, delivery_id)`
  // The attempt log: status code, duration and an error class, never a body.
  // The primary key also refuses a second record of the same attempt.
  yield* sql`
    CREATE TABLE webhook_attempts (
      delivery_id text NOT NULL REFERENCES webhook_deliveries (delivery_id) ON DELETE CASCADE,
      attempt_number integer NOT NULL,
      node_id text NOT NULL,
      started_at timestamptz NOT NULL,
      duration_ms integer NOT NULL,
      response_status_code integer,
      error text,
      PRIMARY KEY (delivery_id, attempt_number)
    )`
})
