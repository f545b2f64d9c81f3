/**
 * Agents, their spend policies and their held transactions (D21-D28).
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const agents = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // An agent is an account (type 'agent', handle 'owner/name'); this row adds what only
  // agents have. The name is unique per owner (D21).
  yield* sql`
    CREATE TABLE agents (
      account_id text PRIMARY KEY REFERENCES accounts (account_id),
      owner_account_id text NOT NULL REFERENCES accounts (account_id),
      name text NOT NULL,
      status text NOT NULL CHECK (status IN ('active')),
      policy_id text NOT NULL UNIQUE,
      created_at timestamptz NOT NULL,
      UNIQUE (owner_account_id, name)
    )`
  yield* sql`CREATE INDEX agents_owner ON agents (owner_account_id, created_at)`
  // Limits are USDG base units as decimal text (exact, D4); lists are JSON arrays.
  // allowed_recipients NULL means any recipient (D22).
  yield* sql`
    CREATE TABLE spend_policies (
      policy_id text PRIMARY KEY,
      agent_account_id text NOT NULL UNIQUE REFERENCES accounts (account_id),
      daily_limit_units text NOT NULL,
      per_transaction_limit_units text NOT NULL,
      hitl_threshold_units text,
      allowed_recipients text,
      assets text NOT NULL,
      active_hours text NOT NULL,
      time_zone text NOT NULL,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    )`
  // A held transaction keeps everything needed to authorize it again at approval, and no
  // plaintext: the boxes (the sender's is sealed to the owner's key), the guardian's note,
  // the keys they were sealed to, the transfer id and replay nonce they are bound to. A
  // standard (public) transfer's amount, which the guardian request and the calldata need
  // in clear, is kept sealed under the wallet KEK and erased when the transaction is decided.
  yield* sql`
    CREATE TABLE agent_transactions (
      transaction_id text PRIMARY KEY,
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      agent_account_id text NOT NULL REFERENCES accounts (account_id),
      owner_account_id text NOT NULL REFERENCES accounts (account_id),
      transfer_id text NOT NULL UNIQUE,
      recipient_account_id text REFERENCES accounts (account_id),
      recipient_address text NOT NULL,
      recipient_display text NOT NULL,
      asset text NOT NULL,
      confidential boolean NOT NULL,
      api_key_id text NOT NULL,
      replay_nonce text NOT NULL,
      from_key bytea NOT NULL,
      to_key bytea,
      sender_box bytea NOT NULL,
      recipient_box bytea NOT NULL,
      guardian_note bytea NOT NULL,
      sealed_digest text NOT NULL,
      public_amount_sealed bytea,
      approval_deadline_seconds text,
      status text NOT NULL CHECK (status IN ('pending_approval', 'approved', 'rejected', 'expired')),
      requested_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL,
      decided_at timestamptz
    )`
  yield* sql`CREATE INDEX agent_transactions_due ON agent_transactions (expires_at) WHERE status = 'pending_approval'`
  yield* sql`CREATE INDEX agent_transactions_owner ON agent_transactions (owner_account_id, mode, requested_at)`
  yield* sql`CREATE INDEX agent_transactions_agent ON agent_transactions (agent_account_id, mode, requested_at)`
})
