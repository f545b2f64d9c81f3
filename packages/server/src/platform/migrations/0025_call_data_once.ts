/**
 * D79: a transfer's attested call (~760 bytes) kept once, and only while it may still be sent.
 *
 * - `transfers.call_data`: the chain submission recorded in the same transaction (record.ts) holds
 *   the same bytes, so new rows store none (empty, not null: a node of an earlier version reads the
 *   column as bytes). Rows that already have their submission drop theirs here; a row without one
 *   (an earlier version that died between its commit and its submit) keeps its call, which its
 *   recovery submits.
 * - `chain_submissions.call_data`: only an open submission's call is read (signed, adopted,
 *   recovered); a final one is answered from its outcome. Final rows drop theirs here, and from now
 *   on in the statement that makes a row final.
 *
 * @since 0.14.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const callDataOnce = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`UPDATE chain_submissions SET call_data = '' WHERE status IN ('confirmed', 'failed') AND call_data <> ''`
  yield* sql`
    UPDATE transfers t SET call_data = '' WHERE t.call_data <> ''
      AND EXISTS (SELECT 1 FROM chain_submissions s WHERE s.submission_id = t.transfer_id)`
})
