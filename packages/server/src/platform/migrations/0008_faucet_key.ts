/**
 * The contracts' owner key leaves the api tier (docs/security.md): the api server keeps only
 * the test faucet's key, a minter of test USDG that can touch no confidential
 * balance. An embedded data directory from before keeps its old `operator` row only
 * until the next start hands the minter role to the faucet key and deletes it
 * (Chains.ts).
 *
 * @since 0.2.0
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export const faucetKey = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE chain_keys DROP CONSTRAINT chain_keys_role_check`
  yield* sql`ALTER TABLE chain_keys ADD CONSTRAINT chain_keys_role_check CHECK (role IN ('operator', 'relayer', 'faucet'))`
})
