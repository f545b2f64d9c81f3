/**
 * The dashboard's sign-in (D41): one-time enrollment invites, passkeys, the
 * pending WebAuthn challenges and server-side sessions. Every secret a browser
 * holds (invite token, session token) is stored only as its SHA-256 hash, so a
 * read of these tables signs nobody in.
 *
 * @since 0.4.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const dashboard = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE dashboard_invites (
      token_hash bytea PRIMARY KEY,
      account_id text NOT NULL REFERENCES accounts (account_id),
      created_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL,
      used_at timestamptz
    )`
  // One row per WebAuthn credential; the public key is COSE bytes, the counter guards against clones.
  yield* sql`
    CREATE TABLE dashboard_passkeys (
      credential_id text PRIMARY KEY,
      account_id text NOT NULL REFERENCES accounts (account_id),
      public_key bytea NOT NULL,
      sign_count bigint NOT NULL,
      transports text NOT NULL,
      name text NOT NULL,
      created_at timestamptz NOT NULL,
      last_used_at timestamptz
    )`
  yield* sql`CREATE INDEX dashboard_passkeys_account ON dashboard_passkeys (account_id, created_at)`
  // A challenge is taken (deleted) by the ceremony that answers it: it can be answered once.
  yield* sql`
    CREATE TABLE dashboard_challenges (
      challenge text PRIMARY KEY,
      purpose text NOT NULL CHECK (purpose IN ('enroll', 'add_passkey', 'sign_in')),
      account_id text REFERENCES accounts (account_id),
      invite_hash bytea,
      expires_at timestamptz NOT NULL
    )`
  yield* sql`
    CREATE TABLE dashboard_sessions (
      session_id text PRIMARY KEY,
      token_hash bytea NOT NULL UNIQUE,
      account_id text NOT NULL REFERENCES accounts (account_id),
      csrf_token text NOT NULL,
      user_agent text NOT NULL,
      created_at timestamptz NOT NULL,
      last_seen_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL,
      revoked_at timestamptz
    )`
  yield* sql`CREATE INDEX dashboard_sessions_account ON dashboard_sessions (account_id, created_at)`
})
