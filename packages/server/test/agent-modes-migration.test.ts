/**
 * Migration 0007 (D38) on a database that already holds agents: each existing
 * agent gets a mode from its keys (live only when every key it ever had is
 * live; test otherwise, including no key and keys of both modes), and a key of
 * the other mode than its agent is revoked, so no agent keeps acting outside
 * its mode. Other accounts' keys are untouched. Real PGlite, the real
 * migrations in order.
 */
import { assert, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { pgliteLayer } from "../src/platform/Database.ts"
import { migrations } from "../src/platform/migrations/index.ts"

const before0007 = Object.keys(migrations).filter((name) => name < "0007_agent_modes").sort()

describe("migration 0007_agent_modes", () => {
  it.effect("gives existing agents the mode of their keys and revokes keys of the other mode", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      assert.include(Object.keys(migrations), "0007_agent_modes")
      for (const name of before0007) yield* migrations[name]!
      let wallet = 0
      const account = (id: string, type: string, owner: string | null) =>
        sql`
          INSERT INTO accounts (account_id, handle, type, owner_account_id, wallet_address, wallet_key_sealed, kyc_status,
            created_at)
          VALUES (${id}, ${id.replace("_", "-")}, ${type}, ${owner}, ${"0x" + String(++wallet).padStart(40, "0")},
            ${new Uint8Array([1])}, 'verified', now())`
      const agent = (id: string) =>
        Effect.gen(function*() {
          yield* account(id, "agent", "acct_owner")
          yield* sql`
            INSERT INTO agents (account_id, owner_account_id, name, status, policy_id, created_at)
            VALUES (${id}, 'acct_owner', ${id}, 'active', ${"pol_" + id}, now())`
        })
      const key = (id: string, accountId: string, mode: string, revoked = false) =>
        sql`
          INSERT INTO api_keys (key_id, account_id, name, mode, key_hash, key_hint, created_at, revoked_at)
          VALUES (${id}, ${accountId}, 'k', ${mode}, ${new TextEncoder().encode(id)}, 'abcd', now(),
            ${revoked ? new Date().toISOString() : null}::timestamptz)`
      yield* account("acct_owner", "personal", null)
      yield* key("key_owner_test", "acct_owner", "test")
      yield* key("key_owner_live", "acct_owner", "live")
      yield* agent("acct_nokey")
      yield* agent("acct_testonly")
      yield* key("key_t1", "acct_testonly", "test")
      yield* agent("acct_liveonly")
      yield* key("key_l1", "acct_liveonly", "live")
      yield* key("key_l2", "acct_liveonly", "live", true)
      yield* agent("acct_mixed")
      yield* key("key_m_test", "acct_mixed", "test", true)
      yield* key("key_m_live", "acct_mixed", "live")

      yield* migrations["0007_agent_modes"]!

      const modes = yield* sql<{ account_id: string; mode: string }>`SELECT account_id, mode FROM agents ORDER BY account_id`
      expect(modes).toEqual([
        { account_id: "acct_liveonly", mode: "live" },
        { account_id: "acct_mixed", mode: "test" },
        { account_id: "acct_nokey", mode: "test" },
        { account_id: "acct_testonly", mode: "test" }
      ])
      const keys = yield* sql<{ key_id: string; revoked: boolean }>`
        SELECT key_id, revoked_at IS NOT NULL AS revoked FROM api_keys ORDER BY key_id`
      expect(keys).toEqual([
        { key_id: "key_l1", revoked: false },
        { key_id: "key_l2", revoked: true },
        // The mixed agent is test: its live key could otherwise spend on mainnet for a test agent.
        { key_id: "key_m_live", revoked: true },
        { key_id: "key_m_test", revoked: true },
        { key_id: "key_owner_live", revoked: false },
        { key_id: "key_owner_test", revoked: false },
        { key_id: "key_t1", revoked: false }
      ])
      // New rows must name their mode.
      const missing = yield* sql`
        INSERT INTO agents (account_id, owner_account_id, name, status, policy_id, created_at)
        VALUES ('acct_owner', 'acct_owner', 'x', 'active', 'pol_x', now())`.pipe(Effect.flip)
      assert.strictEqual(missing.cause._tag, "ConstraintError")
      assert.match(String(missing.cause.cause), /"mode"/)
    }).pipe(Effect.provide(pgliteLayer(undefined))), { timeout: 60_000 })
})
