/**
 * The guardian's schema, in its own database (never the api server's). Every amount
 * column is `*_sealed bytea` (internal/atRest.ts); instants are unix milliseconds as
 * bigint, read back as text so PGlite and PostgreSQL behave alike.
 *
 * Never edit a migration that has shipped: add the next one.
 */
import { Effect } from "effect"
import { Migrator, SqlClient } from "effect/sql"

const ledger = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // One row per (chain, ConfidentialToken, account): confirmed is what the chain holds
  // once every settled transfer is applied; reserved is the sum of in-flight debits.
  // `owned` marks accounts the periodic reconciliation checks (senders and credited
  // accounts; a recipient the guardian only ever credited through transfers is booked
  // but not swept, because shields into it are not reported to the guardian).
  yield* sql`
    CREATE TABLE guardian_balances (
      chain_id text NOT NULL,
      contract text NOT NULL,
      account text NOT NULL,
      confirmed_sealed bytea NOT NULL,
      reserved_sealed bytea NOT NULL,
      version bigint NOT NULL DEFAULT 0,
      owned boolean NOT NULL DEFAULT false,
      frozen_reason text,
      frozen_at_ms bigint,
      PRIMARY KEY (chain_id, contract, account)
    )`
  yield* sql`CREATE INDEX guardian_balances_frozen ON guardian_balances (chain_id) WHERE frozen_reason IS NOT NULL`
  // A reservation per attested transfer. `result` is the Authorized answer (ciphertext
  // points and signature, never the amount), replayed for a repeated transfer id.
  // The unique nonce per sender and contract is the guardian's half of replay protection:
  // a nonce is attested for one transfer only.
  yield* sql`
    CREATE TABLE guardian_reservations (
      transfer_id text PRIMARY KEY,
      chain_id text NOT NULL,
      contract text NOT NULL,
      from_account text NOT NULL,
      to_account text NOT NULL,
      kind text NOT NULL CHECK (kind IN ('confidential', 'public')),
      nonce text NOT NULL,
      deadline bigint NOT NULL,
      expires_at_ms bigint NOT NULL,
      amount_sealed bytea NOT NULL,
      spend_bucket bigint,
      request_digest text NOT NULL,
      result text NOT NULL,
      status text NOT NULL CHECK (status IN ('reserved', 'confirmed', 'failed', 'expired')),
      created_at_ms bigint NOT NULL,
      settled_at_ms bigint,
      UNIQUE (chain_id, contract, from_account, nonce)
    )`
  yield* sql`CREATE INDEX guardian_reservations_due ON guardian_reservations (expires_at_ms) WHERE status = 'reserved'`
  yield* sql`
    CREATE INDEX guardian_reservations_open_from ON guardian_reservations (chain_id, contract, from_account)
    WHERE status = 'reserved'`
  yield* sql`
    CREATE INDEX guardian_reservations_open_to ON guardian_reservations (chain_id, contract, to_account)
    WHERE status = 'reserved'`
  // An agent's spend (confirmed and in flight) per 15-minute UTC bucket: any local day,
  // in any time zone the policy names now, is a range of buckets (internal/dayWindow.ts).
  yield* sql`
    CREATE TABLE guardian_agent_spend (
      chain_id text NOT NULL,
      contract text NOT NULL,
      agent text NOT NULL,
      bucket bigint NOT NULL,
      spent_sealed bytea NOT NULL,
      PRIMARY KEY (chain_id, contract, agent, bucket)
    )`
  yield* sql`
    CREATE TABLE guardian_credits (
      credit_id text PRIMARY KEY,
      chain_id text NOT NULL,
      contract text NOT NULL,
      account text NOT NULL,
      amount_sealed bytea NOT NULL,
      request_digest text NOT NULL,
      created_at_ms bigint NOT NULL
    )`
})

/** Runs the migrations that have not run yet (locked, so concurrent starts run each once). */
export const migrate = Migrator.make({})({
  loader: Migrator.fromRecord({ "0001_ledger": ledger }),
  table: "guardian_migrations"
})
