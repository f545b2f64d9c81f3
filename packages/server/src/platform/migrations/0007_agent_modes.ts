/**
 * D38: an agent belongs to one mode, the mode of the key that created it, like
 * every other resource (D9). Its policy and its held transactions follow it, and
 * its API keys are of its mode only, so an agent's transfers never leave its mode.
 *
 * Rows that existed before the creating key's mode was recorded get a mode from
 * what the agent has done: its keys (every transfer and held transaction of an
 * agent was made with one of them, and keys are never deleted). An agent whose
 * every key is live is live; any other agent, including one with no key yet or
 * with keys of both modes, is test. Test is the side on which a wrong guess
 * costs no real money: no code path lets a test resource reach mainnet (D9).
 * A key of the other mode than its agent would let the agent act outside its
 * mode, so such keys are revoked here (the owner issues a new one in the
 * agent's mode).
 *
 * @since 0.2.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const agentModes = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE agents ADD COLUMN mode text CHECK (mode IN ('test', 'live'))`
  yield* sql`
    UPDATE agents SET mode = CASE
      WHEN EXISTS (SELECT 1 FROM api_keys k WHERE k.account_id = agents.account_id)
        AND NOT EXISTS (SELECT 1 FROM api_keys k WHERE k.account_id = agents.account_id AND k.mode <> 'live')
      THEN 'live' ELSE 'test' END`
  yield* sql`ALTER TABLE agents ALTER COLUMN mode SET NOT NULL`
  yield* sql`
    UPDATE api_keys SET revoked_at = now()
    WHERE revoked_at IS NULL
      AND EXISTS (SELECT 1 FROM agents g WHERE g.account_id = api_keys.account_id AND g.mode <> api_keys.mode)`
  // The owner's list is read in one mode (GET /v1/accounts/me/agents).
  yield* sql`DROP INDEX agents_owner`
  yield* sql`CREATE INDEX agents_owner ON agents (owner_account_id, mode, created_at)`
})
