/**
 * A batch's signed transaction is stored once, by hash. Its bytes were written into
 * every chain_submissions row the transaction carries: a batch of N transfers wrote its
 * N-transfer transaction N times, so the bytes written per transfer grew with the batch
 * (about 40 KB per transfer at 32, against ~1.2 KB of its own call data) and so did the
 * cost of marking a batch sent.
 *
 * A transaction of one call keeps its bytes in `chain_submissions.raw_tx`, as do rows written
 * before this migration or by a node of an earlier version during a rolling deploy; readers
 * take the bytes stored under the row's `tx_hash` first and fall back to the row's own
 * (SubmissionStore, which also says what a node of the earlier version does with a batch row).
 *
 * @since 0.7.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const chainTransactions = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Content-addressed: tx_hash is keccak256(raw_tx), so the bytes never change once written (the same
  // transaction marked again only refreshes created_at, which the settlement's sweep reads).
  yield* sql`
    CREATE TABLE chain_transactions (
      tx_hash text PRIMARY KEY,
      raw_tx bytea NOT NULL,
      created_at timestamptz NOT NULL
    )`
})
