/**
 * Agents for tests, over the real API: an owner with a registered key and faucet USDG, and its
 * agent (with an API key of its own) funded by a normal transfer.
 */
import { assert, expect } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { AgentRecord } from "@pps/api/Agents"
import { TransferRecord } from "@pps/api/Transfers"
import { registerKey } from "./confidentialClient.ts"
import { bearer, createAccount, decodeAnswer as decode, postJson, send } from "./http.ts"
import type { TestServerShape } from "./TestServer.ts"

/** An owner with a registered key and faucet USDG, and one agent (with its own key) funded by a transfer. */
export const ownerWithAgent = (
  server: Pick<TestServerShape, "baseUrl" | "adminUrl" | "adminToken">,
  owner: string,
  policy: Record<string, unknown>,
  options: { readonly faucetUsdg: string; readonly fundAgentUsdg?: string }
) =>
  Effect.gen(function*() {
    const account = yield* createAccount(server, owner)
    const ownerKey = yield* registerKey(server.baseUrl, account.api_key)
    const grant = yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(account.api_key), { amount: options.faucetUsdg }))
    assert.strictEqual(grant.status, 200, grant.text)
    const agent = decode(
      AgentRecord,
      yield* send(`${server.baseUrl}/v1/accounts/me/agents`, postJson(bearer(account.api_key), { name: "bot", spend_policy: policy })),
      201
    )
    const issued = yield* send(`${server.adminUrl}/admin/keys`, postJson(bearer(server.adminToken), {
      account_id: agent.account_id,
      name: "agent"
    }))
    const agentKey = Schema.decodeUnknownSync(Schema.Struct({ api_key: Schema.String }))(issued.json).api_key
    // The owner funds its agent with a normal transfer to @owner/bot (none asked: never paid, nothing pinned).
    if (options.fundAgentUsdg === undefined) return { owner: account, ownerKey, agent, agentKey }
    const funding = yield* send(
      `${server.baseUrl}/v1/transfers`,
      postJson(bearer(account.api_key), { to: `@${owner}/bot`, amount: options.fundAgentUsdg })
    )
    expect(decode(TransferRecord, funding, 201)).toMatchObject({ status: "confirmed", to: `@${owner}/bot` })
    return { owner: account, ownerKey, agent, agentKey }
  })
