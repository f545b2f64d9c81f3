/**
 * The recovery point of a client-sealed transfer: the replay nonce and attestation deadline
 * it was first sent to the guardian with, committed before that call. A create retried after
 * the guardian's answer was lost (a timeout, a crash before the transfer row) sends the very
 * same request again, so the guardian replays its decision instead of refusing a reused
 * transfer id with another nonce, which left the intent unpayable under its key (D36).
 * Ids and numbers only: nothing here says anything about the amount.
 *
 * @since 0.4.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const sealedAttempts = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE sealed_attempts (
      transfer_id text PRIMARY KEY,
      sender_account_id text NOT NULL,
      replay_nonce text NOT NULL,
      deadline_seconds text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
})
