/**
 * Encryption keys, transfers and their per-sender replay nonces.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const transfers = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // D12: an account's encryption public key, registered on the mode's chain
  // (one registration per asset contract); `registered_at` null until mined.
  yield* sql`
    CREATE TABLE encryption_keys (
      account_id text NOT NULL REFERENCES accounts (account_id),
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      public_key bytea NOT NULL,
      registered_at timestamptz,
      created_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, mode)
    )`
  // The contract's replay nonces are per sender address and may be used in any
  // order (a bitmap): a counter per account and mode hands out fresh ones.
  yield* sql`
    CREATE TABLE transfer_nonces (
      account_id text NOT NULL,
      mode text NOT NULL,
      next_nonce bigint NOT NULL,
      PRIMARY KEY (account_id, mode)
    )`
  // A transfer never holds its amount or memo: only ciphertexts (points), the
  // boxes sealed to the parties, and the calldata that carries the ciphertexts.
  yield* sql`
    CREATE TABLE transfers (
      transfer_id text PRIMARY KEY,
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      sender_account_id text NOT NULL REFERENCES accounts (account_id),
      recipient_account_id text REFERENCES accounts (account_id),
      recipient_address text NOT NULL,
      recipient_display text NOT NULL,
      asset text NOT NULL,
      confidential boolean NOT NULL,
      status text NOT NULL CHECK (status IN ('pending', 'confirmed', 'failed')),
      tx_hash text,
      api_key_id text NOT NULL,
      replay_nonce text NOT NULL,
      deadline_seconds text NOT NULL,
      sender_box bytea NOT NULL,
      recipient_box bytea NOT NULL,
      sealed_digest text NOT NULL,
      ciphertext text NOT NULL,
      call_data bytea NOT NULL,
      guardian_settled boolean NOT NULL DEFAULT false,
      created_at timestamptz NOT NULL,
      confirmed_at timestamptz
    )`
  yield* sql`CREATE INDEX transfers_sender ON transfers (sender_account_id, mode, created_at DESC, transfer_id DESC)`
  yield* sql`CREATE INDEX transfers_recipient ON transfers (recipient_account_id, mode, created_at DESC, transfer_id DESC)`
  yield* sql`CREATE INDEX transfers_unsettled ON transfers (mode) WHERE status = 'pending' OR guardian_settled = false`
})
