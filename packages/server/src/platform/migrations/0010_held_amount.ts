/**
 * A held agent transaction keeps the guardian's statement of its amount, sealed to the
 * owner's key (`Note.sealHeldAmount`): the owner decides on what the guardian will pay,
 * not on the agent's own note, which a client-sealed transfer writes itself. Null for
 * transactions held before this migration (their notes were sealed by the server).
 *
 * @since 0.3.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const heldAmount = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE agent_transactions ADD COLUMN guardian_held_amount bytea`
})
