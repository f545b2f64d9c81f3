/**
 * Accounts, API keys and the idempotency store.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const accountsAndKeys = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // D5's timestamp form, computed by the database so PostgreSQL and PGlite (which
  // return timestamptz as different JS types) both hand the application text.
  yield* sql`
    CREATE FUNCTION iso_utc(ts timestamptz) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT
    AS $$ SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') $$`
  // Handles are unique case-insensitively (D10): stored lower-cased, checked by the constraint.
  yield* sql`
    CREATE TABLE accounts (
      account_id text PRIMARY KEY,
      handle text NOT NULL UNIQUE CHECK (handle = lower(handle)),
      type text NOT NULL CHECK (type IN ('personal', 'business', 'agent')),
      owner_account_id text REFERENCES accounts (account_id),
      wallet_address text NOT NULL UNIQUE,
      wallet_key_sealed bytea NOT NULL,
      kyc_status text NOT NULL CHECK (kyc_status IN ('unverified', 'pending', 'verified', 'enhanced')),
      created_at timestamptz NOT NULL
    )`
  // Only the keyed hash of a key is stored (D8); `key_hint` is the last 4 characters, for humans.
  yield* sql`
    CREATE TABLE api_keys (
      key_id text PRIMARY KEY,
      account_id text NOT NULL REFERENCES accounts (account_id),
      name text NOT NULL,
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      key_hash bytea NOT NULL UNIQUE,
      key_hint text NOT NULL,
      created_at timestamptz NOT NULL,
      last_used_at timestamptz,
      request_count bigint NOT NULL DEFAULT 0,
      revoked_at timestamptz
    )`
  yield* sql`CREATE INDEX api_keys_account ON api_keys (account_id, created_at)`
  // D6: scoped to the account and mode of the API key; `request_hash` tells a
  // replay from a reuse; `response_*` is null while the first request runs.
  yield* sql`
    CREATE TABLE idempotency_keys (
      account_id text NOT NULL,
      mode text NOT NULL,
      idempotency_key text NOT NULL,
      request_hash bytea NOT NULL,
      response_status integer,
      response_body text,
      -- A crashed first request must not block its key for 24 hours: past this
      -- lease, an unfinished entry may be taken over by a retry.
      lease_until timestamptz NOT NULL,
      created_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, mode, idempotency_key)
    )`
  yield* sql`CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at)`
})
