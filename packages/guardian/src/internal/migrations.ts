/**
 * The guardian's schema, in its own database (never the api server's). Every amount
 * column is `*_sealed bytea` (internal/atRest.ts); instants are unix milliseconds as
 * bigint, read back as text so PGlite and PostgreSQL behave alike.
 *
 * Never edit a migration that has shipped: add the next one.
 */
import { Effect } from "effect"
import { Migrator, SqlClient } from "effect/sql"

/** 0001, first half: balances and reservations. */
const ledgerBalances = Effect.gen(function*() {
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
})

/** 0001, second half: agents' spend and reported credits. */
const ledgerSpend = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
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

/** The first migration: its statements in the order it shipped with, in two named halves. */
const ledger = Effect.andThen(ledgerBalances, ledgerSpend)

/**
 * D39: credits come from the chain. The follower's durable progress, one row per credited
 * log (exactly once), the recipient side of a reservation booked once whichever of the
 * event and `settle` comes first, alerts instead of freezes, and the keys pinned for
 * addresses without a registration.
 */
const chainCredits = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // The next block to read, per chain and scope: `discovery` (GuardianRotated logs naming
  // this guardian, any contract) or a followed ConfidentialToken's address (its credit logs).
  yield* sql`
    CREATE TABLE guardian_chain_cursors (
      chain_id text NOT NULL,
      scope text NOT NULL,
      next_block bigint NOT NULL,
      updated_at_ms bigint NOT NULL,
      PRIMARY KEY (chain_id, scope)
    )`
  // One row per credit log the guardian has applied (or deliberately not applied: out of
  // range, unknown transfer). Inserted in the transaction that changes the balance, so a
  // log re-read after a crash or a rewound cursor is never booked twice. No amount.
  yield* sql`
    CREATE TABLE guardian_chain_credits (
      chain_id text NOT NULL,
      tx_hash text NOT NULL,
      log_index integer NOT NULL,
      contract text NOT NULL,
      account text NOT NULL,
      kind text NOT NULL CHECK (kind IN ('shield', 'transfer_in')),
      transfer_id text,
      block_number bigint NOT NULL,
      outcome text NOT NULL CHECK (outcome IN ('booked', 'already_booked', 'out_of_range', 'unknown_transfer')),
      created_at_ms bigint NOT NULL,
      PRIMARY KEY (chain_id, tx_hash, log_index)
    )`
  // Whether a confidential transfer's recipient has been credited (by its event or by
  // settle, whichever came first). Transfers confirmed before this migration were
  // credited by settle.
  yield* sql`ALTER TABLE guardian_reservations ADD COLUMN recipient_credited boolean NOT NULL DEFAULT false`
  yield* sql`UPDATE guardian_reservations SET recipient_credited = true WHERE status = 'confirmed' AND kind = 'confidential'`
  yield* sql`
    CREATE TABLE guardian_alerts (
      chain_id text NOT NULL,
      contract text NOT NULL,
      account text NOT NULL,
      kind text NOT NULL,
      since_ms bigint NOT NULL,
      last_seen_ms bigint NOT NULL,
      explanation text NOT NULL,
      PRIMARY KEY (chain_id, contract, account, kind)
    )`
  // A reconciliation mismatch no longer freezes (an outsider's deposit could cause one):
  // earlier freezes become alerts.
  yield* sql`
    INSERT INTO guardian_alerts (chain_id, contract, account, kind, since_ms, last_seen_ms, explanation)
    SELECT chain_id, contract, account, 'reconciliation_mismatch', coalesce(frozen_at_ms, 0), coalesce(frozen_at_ms, 0),
      'frozen by a reconciliation mismatch before credits came from the chain'
    FROM guardian_balances WHERE frozen_reason = 'reconciliation_mismatch'`
  yield* sql`UPDATE guardian_balances SET frozen_reason = NULL, frozen_at_ms = NULL WHERE frozen_reason = 'reconciliation_mismatch'`
  // The key the guardian encrypts an address's copies to when the address has no key in
  // the contract's registry (an agent: its owner's key), pinned on first use.
  yield* sql`
    CREATE TABLE guardian_key_pins (
      chain_id text NOT NULL,
      contract text NOT NULL,
      account text NOT NULL,
      public_key text NOT NULL,
      created_at_ms bigint NOT NULL,
      PRIMARY KEY (chain_id, contract, account)
    )`
})

/**
 * The guardian's vetoes of rotation proposals it was not told to accept: one row per
 * (chain, contract, proposal id), with the signed cancellation, so the veto survives a
 * restart and can be relayed (and re-relayed) by anyone from the guardian's health.
 */
const rotationVetoes = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE guardian_rotation_vetoes (
      chain_id text NOT NULL,
      contract text NOT NULL,
      proposal_id text NOT NULL,
      new_signer text NOT NULL,
      executable_at bigint NOT NULL,
      tx_hash text NOT NULL,
      block_number bigint NOT NULL,
      signature text NOT NULL,
      seen_at_ms bigint NOT NULL,
      PRIMARY KEY (chain_id, contract, proposal_id)
    )`
})

/**
 * Per-key totals (D40): which API key asked for each reservation (an opaque id, never a
 * secret), and per (account, key) the sum of its confirmed debits, sealed like every amount.
 */
const keyTotals = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE guardian_reservations ADD COLUMN api_key_id text`
  yield* sql`
    CREATE TABLE guardian_key_totals (
      chain_id text NOT NULL,
      contract text NOT NULL,
      account text NOT NULL,
      api_key_id text NOT NULL,
      total_sealed bytea NOT NULL,
      transfers bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (chain_id, contract, account, api_key_id)
    )`
})

/**
 * One decision per transfer id. A refusal (policy, balance) or a hold reserves nothing, so
 * without a record the same guardian box could be asked about again and again with other
 * policies: a caller holding the box (an api tier) would binary-search its amount. The row
 * keeps the keyed digest of the request that was decided (never an amount), whether it was
 * held, and how many other requests (an owner's approvals) were decided since.
 */
const decisions = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE guardian_decisions (
      transfer_id text PRIMARY KEY,
      request_digest text NOT NULL,
      held boolean NOT NULL,
      redecisions integer NOT NULL DEFAULT 0,
      decided_at_ms bigint NOT NULL
    )`
})

/**
 * Refunds (D43): a refund's reservation names the transfer it sends back, so the refunds of a
 * transfer (in flight and confirmed) are found, and summed, under its recipient's balance lock.
 */
const refunds = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE guardian_reservations ADD COLUMN refund_of text`
  yield* sql`CREATE INDEX guardian_reservations_refund_of ON guardian_reservations (refund_of) WHERE refund_of IS NOT NULL`
})

/**
 * D55: an account's key rotation hold, kept with the books so that a restart inside the window
 * still refuses the account's transfers. One row per account while its rotation's attestation can
 * be mined: until `ForgetKey` deletes it or `until_ms` (the attestation's deadline plus the
 * reservation margin) passes.
 */
const keyRotationHolds = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE guardian_key_rotation_holds (
      chain_id text NOT NULL,
      contract text NOT NULL,
      account text NOT NULL,
      until_ms bigint NOT NULL,
      created_at_ms bigint NOT NULL,
      PRIMARY KEY (chain_id, contract, account)
    )`
})

/**
 * D68: an agent wallet's attested rotations: the key its pin moves to if the chain's balance
 * becomes the attested one (`balance_digest`, the attestation's fresh ciphertext, which only a
 * mined rotation puts there), and the instant past which it can no longer be mined. Deleted
 * when the pin moves, or once that instant has passed.
 */
const keyRepins = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE guardian_key_repins (
      chain_id text NOT NULL,
      contract text NOT NULL,
      account text NOT NULL,
      balance_digest text NOT NULL,
      new_key text NOT NULL,
      until_ms bigint NOT NULL,
      created_at_ms bigint NOT NULL,
      PRIMARY KEY (chain_id, contract, account, balance_digest)
    )`
})

/**
 * D55: which of an account's attestations its hold last took (one hold per account holds them
 * all): the nonce and balance digest of the latest, and the latest deadline of any. A report on an
 * earlier one lifts nothing unless the chain shows the latest dead too (steps/KeyRotation.ts).
 * Null in a row placed before this: a report is then judged on what it names.
 */
const keyRotationLatest = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE guardian_key_rotation_holds
      ADD COLUMN latest_nonce text,
      ADD COLUMN latest_previous_digest text,
      ADD COLUMN latest_deadline bigint`
})

/**
 * D68: a repin is told mined by the attested handles alone (`handles_digest`: the owner's and
 * the guardian's handle), not the whole balance: a permissionless `shield` to the agent adds to
 * the commitment after the rotation is mined and would hide it for ever. A row written before
 * (a whole-balance digest) matches nothing and lapses at its instant.
 */
const repinHandles = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE guardian_key_repins RENAME COLUMN balance_digest TO handles_digest`
})

/** Runs the migrations that have not run yet (locked, so concurrent starts run each once). */
export const migrate = Migrator.make({})({
  loader: Migrator.fromRecord({ "0001_ledger": ledger, "0002_chain_credits": chainCredits, "0003_rotation_vetoes": rotationVetoes,
    "0004_key_totals": keyTotals, "0005_decisions": decisions, "0006_refunds": refunds,
    "0007_key_rotation_holds": keyRotationHolds, "0008_key_repins": keyRepins,
    "0009_key_rotation_latest": keyRotationLatest, "0010_repin_handles": repinHandles
  }),
  table: "guardian_migrations"
})
