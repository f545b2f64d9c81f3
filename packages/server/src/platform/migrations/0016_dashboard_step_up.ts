/**
 * Dashboard step-up (D41): a session records when it was last verified by a
 * fresh user-verified passkey assertion (`verified_at`, set at sign-in, at
 * enrollment and by a "step_up" ceremony), so that adding or removing a passkey
 * and creating an API key can demand a recent one; and which passkey opened it
 * (`credential_id`), so that removing the passkey ends the sessions it opened.
 * Sessions opened before this migration have neither: they must step up before
 * those actions, and no passkey removal ends them (they end by expiry).
 *
 * @since 0.4.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const dashboardStepUp = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE dashboard_sessions ADD COLUMN verified_at timestamptz`
  yield* sql`ALTER TABLE dashboard_sessions ADD COLUMN credential_id text`
  yield* sql`CREATE INDEX dashboard_sessions_credential ON dashboard_sessions (credential_id)`
  // The inline CHECK of 0012 has PostgreSQL's default name (table_column_check).
  yield* sql`ALTER TABLE dashboard_challenges DROP CONSTRAINT dashboard_challenges_purpose_check`
  yield* sql`
    ALTER TABLE dashboard_challenges ADD CONSTRAINT dashboard_challenges_purpose_check
    CHECK (purpose IN ('enroll', 'add_passkey', 'sign_in', 'step_up'))`
})
