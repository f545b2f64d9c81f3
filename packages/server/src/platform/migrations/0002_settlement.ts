/**
 * Settlement: the chain accounts the server signs with, the contract addresses
 * per mode, and every submission to the chain.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const settlement = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Generated keys of the embedded chain (operator and relayers), sealed under
  // WALLET_KEK like custodial wallets. External chains take them from configuration.
  yield* sql`
    CREATE TABLE chain_keys (
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      role text NOT NULL CHECK (role IN ('operator', 'relayer')),
      position integer NOT NULL,
      address text NOT NULL,
      key_sealed bytea NOT NULL,
      PRIMARY KEY (mode, role, position)
    )`
  yield* sql`
    CREATE TABLE chain_deployments (
      mode text PRIMARY KEY CHECK (mode IN ('test', 'live')),
      chain_id integer NOT NULL,
      addresses text NOT NULL,
      updated_at timestamptz NOT NULL
    )`
  // One row per contract call to get mined exactly once. `raw_tx` is the signed
  // transaction as broadcast, kept so a restart can broadcast the very same bytes.
  yield* sql`
    CREATE TABLE chain_submissions (
      submission_id text PRIMARY KEY,
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      kind text NOT NULL,
      target text NOT NULL,
      call_data bytea NOT NULL,
      gas_limit text NOT NULL,
      deadline_seconds text,
      replay_sender text,
      replay_nonce text,
      replay_transfer_id text,
      relayer text,
      relayer_nonce integer,
      raw_tx bytea,
      tx_hash text,
      status text NOT NULL CHECK (status IN ('recorded', 'sent', 'confirmed', 'failed')),
      failure_reason text,
      block_number text,
      block_timestamp text,
      broadcasts integer NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX chain_submissions_open ON chain_submissions (mode, status) WHERE status IN ('recorded', 'sent')`
  yield* sql`CREATE INDEX chain_submissions_tx ON chain_submissions (tx_hash)`
})
