/**
 * The operator's console (D60): an account can be suspended (`suspended_at`, null while it is
 * active), and security actions are written to `audit_events`, which is append-only in SQL: a
 * trigger refuses every UPDATE, DELETE and TRUNCATE of it, whoever asks, so no code path of the
 * service (nor a mistaken statement of an operator's) can rewrite what was recorded. Ids, actions,
 * addresses and request ids only: never an amount, memo, key or secret.
 *
 * @since 0.11.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const operatorConsole = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE accounts ADD COLUMN suspended_at timestamptz`
  yield* sql`CREATE INDEX accounts_created ON accounts (created_at, account_id)`
  yield* sql`
    CREATE TABLE audit_events (
      audit_id text PRIMARY KEY,
      seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
      occurred_at timestamptz NOT NULL,
      action text NOT NULL,
      account_id text,
      actor text NOT NULL,
      target_id text,
      ip text,
      request_id text
    )`
  // `seq` orders entries as they were written (ids drawn in one millisecond are not ordered).
  yield* sql`CREATE INDEX audit_events_account ON audit_events (account_id, seq)`
  yield* sql`CREATE INDEX audit_events_action ON audit_events (action, seq)`
  yield* sql.unsafe(`
    CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'audit_events is append-only: % refused', TG_OP;
    END
    $$`)
  yield* sql`
    CREATE TRIGGER audit_events_no_change BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only()`
  yield* sql`
    CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only()`
})
