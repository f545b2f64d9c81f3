/**
 * D36: an idempotency key names one operation for 24 hours, whatever happens to the
 * process that ran it.
 *
 * The claim now names the node that runs it (`owner_node`, whose liveness is its
 * heartbeat row) and, once the operation has a durable record, that record
 * (`operation_kind`, `operation_id`), written in the same SQL transaction as the
 * record itself. A retry whose first request's node is gone answers from that
 * record instead of running the operation again.
 *
 * The key is stored only as a keyed digest, and the request's fingerprint is keyed
 * by the idempotency key's own value (which is never stored): the api tier, holding
 * the database and every one of its secrets, cannot recompute a fingerprint for a
 * guessed amount or memo (docs/security.md). The claims of the previous table are dropped:
 * they live 24 hours and no release has shipped with them.
 *
 * @since 0.2.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const idempotentOperations = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP TABLE idempotency_keys`
  yield* sql`
    CREATE TABLE idempotency_keys (
      account_id text NOT NULL,
      mode text NOT NULL,
      key_digest bytea NOT NULL,
      request_hash bytea NOT NULL,
      -- The node running the first request; null once that request ended without a
      -- response (its operation, if it has a record, is answered from the record).
      owner_node text,
      operation_kind text,
      operation_id text,
      response_status integer,
      response_body text,
      created_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, mode, key_digest)
    )`
  yield* sql`CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at)`
  // A node is alive while its heartbeat is fresh; a claim of a node that is not is resolved
  // by whichever node sees the retry.
  yield* sql`
    CREATE TABLE node_heartbeats (
      node_id text PRIMARY KEY,
      started_at timestamptz NOT NULL,
      beat_at timestamptz NOT NULL
    )`
  // The test faucet's grants (D36: a faucet request is one grant, even across a crash).
  // The amount is public (a shield's always is).
  yield* sql`
    CREATE TABLE faucet_grants (
      grant_id text PRIMARY KEY,
      account_id text NOT NULL REFERENCES accounts (account_id),
      wallet_address text NOT NULL,
      amount text NOT NULL,
      from_block text NOT NULL,
      tx_hash text UNIQUE,
      created_at timestamptz NOT NULL
    )`
})
