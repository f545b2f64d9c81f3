/**
 * `pps mcp` against the real server (child process, embedded PGlite, anvil and guardian),
 * reached by the official MCP client (`@modelcontextprotocol/sdk`), as an AI agent's client
 * reaches it: over stdio it lists its tools, pays sealed (confirmed), pays once when `pay` is
 * retried with the idempotency key it answered and twice for two calls without one, and
 * refuses with a tool error that names the rule and the field; an account's key reads its
 * balance decrypted here; a recording proxy between the MCP server and the API sees no canary
 * amount or memo in any form, and neither does the server's stderr. Over HTTP the same tools
 * answer only with the bearer token, and a foreign Host or Origin is refused 403.
 */
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { EncryptionKey } from "@pps/crypto"
import { KeyFile, Pps } from "@pps/sdk"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freePort } from "../../../scripts/freePort.ts"
import { canaryForms, startRecordingProxy } from "../../server/test/support/recordingProxy.ts"
import { anvilRpcUrl, type ServerProcess, startServer } from "../../sdk/test/support/server.ts"
import { runScenario, startBearerHop } from "./support/conformance.ts"
import { connectHttp, connectStdio, startHttp } from "./support/mcp.ts"

let server: ServerProcess
let alice: { readonly account_id: string; readonly api_key: string }
let bob: { readonly account_id: string; readonly api_key: string }
const aliceKey = EncryptionKey.generate()
// Alice's key file is where `pps` looks for it by default: ~/.pps/<account_id>.key under this HOME.
const aliceHome = fs.mkdtempSync(path.join(os.tmpdir(), "pps-mcp-home-"))

beforeAll(async () => {
  server = await startServer()
  ;[alice, bob] = [await server.createAccount("alice"), await server.createAccount("bob")]
  KeyFile.write(KeyFile.defaultPath(alice.account_id, aliceHome), { accountId: alice.account_id, keyPair: aliceKey }, { overwrite: false })
  await new Pps({ baseUrl: server.baseUrl, apiKey: alice.api_key, keyPair: aliceKey }).encryptionKey.register()
  await new Pps({ baseUrl: server.baseUrl, apiKey: bob.api_key, keyPair: EncryptionKey.generate() }).encryptionKey.register()
  await new Pps({ baseUrl: server.baseUrl, apiKey: alice.api_key }).faucet({ amount: "100" })
}, 120_000)

afterAll(async () => {
  await server?.stop()
  fs.rmSync(aliceHome, { recursive: true, force: true })
}, 30_000)

const accountTools = ["pay", "balance", "get_transfer", "list_transfers", "fetch_paid"]

/** Neither what the MCP server sent the API (through the proxy) nor its stderr holds the canary, in any form. */
const expectNoCanary = (sent: Buffer, stderr: string, canary: { readonly decimal: string; readonly baseUnits: bigint }, memo: string) => {
  const wire = sent.toString("latin1")
  expect(wire).toContain("POST /v1/transfers")
  for (const form of canaryForms(canary, memo)) {
    expect(wire, form).not.toContain(form)
    expect(stderr, form).not.toContain(form)
  }
}

describe("pps mcp with an account's key and its key file", { timeout: 60_000 }, () => {
  it("over stdio: lists its tools, pays sealed, retries with the key once, pays twice without one, refuses by rule and field", async () => {
    const proxy = await startRecordingProxy(server.baseUrl)
    const mcp = await connectStdio({ PPS_API_KEY: alice.api_key, PPS_BASE_URL: proxy.baseUrl, HOME: aliceHome })
    try {
      const { tools } = await mcp.client.listTools()
      expect(tools.map((tool) => tool.name)).toEqual(accountTools)
      for (const tool of tools) {
        expect(tool.description, tool.name).toMatch(/^\S.{40,}$/)
        expect(tool.inputSchema.type).toBe("object")
      }
      expect(tools.find((tool) => tool.name === "pay")?.inputSchema.required).toEqual(["to", "amount"])

      // 3.217 USDG and a memo no request may carry, in any encoding.
      const canary = { decimal: "3.217", baseUnits: 3_217_000n }
      const memo = "mcp canary memo 7f3a"
      const paid = await mcp.call("pay", { to: "@bob", amount: canary.decimal, memo })
      expect(paid.isError, paid.text).toBe(false)
      expect(paid.structured).toMatchObject({ kind: "transfer", status: "confirmed", to: "@bob", asset: "USDG" })
      const key = String(paid.structured?.["idempotency_key"])
      expect(key).toMatch(/^mcp_[0-9a-f-]{36}$/)

      // Retried with the key it answered: the same transfer, not a second one.
      const retried = await mcp.call("pay", { to: "@bob", amount: canary.decimal, memo, idempotency_key: key })
      expect(retried.structured).toMatchObject({ kind: "transfer", transfer_id: paid.structured?.["transfer_id"], idempotency_key: key })
      // Two calls with the same arguments and no key: two payments, each with its own key.
      const [first, second] = [await mcp.call("pay", { to: "@bob", amount: "0.5" }), await mcp.call("pay", { to: "@bob", amount: "0.5" })]
      expect(first.structured?.["transfer_id"]).not.toBe(second.structured?.["transfer_id"])
      expect(first.structured?.["idempotency_key"]).not.toBe(second.structured?.["idempotency_key"])

      const got = await mcp.call("get_transfer", { transfer_id: String(paid.structured?.["transfer_id"]) })
      expect(got.structured).toMatchObject({ transfer_id: paid.structured?.["transfer_id"], status: "confirmed", direction: "sent" })
      const listed = await mcp.call("list_transfers", { limit: 2 })
      expect(listed.structured).toMatchObject({ has_more: true })
      expect((listed.structured?.["transfers"] as ReadonlyArray<unknown>).length).toBe(2)
      // 3.217 + 0.5 + 0.5 of the faucet's 100, decrypted here.
      const balance = await mcp.call("balance")
      expect(balance.structured).toEqual({ balances: expect.arrayContaining([{ asset: "USDG", amount: "95.783" }]) })

      const broke = await mcp.call("pay", { to: "@bob", amount: "5000" })
      expect(broke).toMatchObject({ isError: true })
      expect(broke.text).toMatch(/^refused: insufficient balance: amount is more than the balance of asset \(insufficient_balance, request req_\w+\); nothing was paid$/)
      const nobody = await mcp.call("pay", { to: "@nobody-here", amount: "1" })
      expect(nobody.text).toMatch(/^refused: recipient not found: to names no account/)
      // A misspelt key is refused, never ignored into a second payment.
      const misspelt = await mcp.call("pay", { to: "@bob", amount: "0.5", idempotencyKey: key })
      expect(misspelt.isError).toBe(true)
      expect(misspelt.text).toMatch(/idempotencyKey/)

      expectNoCanary(proxy.sent(), mcp.stderr(), canary, memo)
    } finally {
      await mcp.close()
      await proxy.close()
    }
  })

  it("over Streamable HTTP: the same tools behind the bearer token it printed, and 403 to a foreign Host or Origin", async () => {
    const port = await freePort()
    const served = await startHttp({ PPS_API_KEY: alice.api_key, PPS_BASE_URL: server.baseUrl, HOME: aliceHome }, port)
    try {
      expect(served.url).toBe(`http://127.0.0.1:${port}/mcp`)
      const initialize = JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "curl", version: "1" } }
      })
      const post = (headers: Record<string, string>) =>
        fetch(served.url, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers }, body: initialize })
      const bearer = { authorization: `Bearer ${served.token}` }
      expect((await post({})).status).toBe(401)
      expect((await post({ authorization: "Bearer mcp_not-the-token" })).status).toBe(401)
      // Node's fetch sets Host from the URL; a DNS-rebinding page's request names its own host.
      const rebound = await new Promise<number>((resolve, reject) => {
        const request = http.request(
          { host: "127.0.0.1", port, path: "/mcp", method: "POST", headers: { host: `evil.example:${port}`, "content-type": "application/json", ...bearer } },
          (response) => {
            response.resume()
            resolve(response.statusCode ?? 0)
          }
        )
        request.on("error", reject)
        request.end(initialize)
      })
      expect(rebound).toBe(403)
      expect((await post({ ...bearer, origin: "http://evil.example" })).status).toBe(403)
      const accepted = await post({ ...bearer, origin: `http://localhost:${port}` })
      expect(accepted.status).toBe(200)
      // The session ends with DELETE (with the token), and is then unknown.
      const session = { ...bearer, "mcp-session-id": accepted.headers.get("mcp-session-id") ?? "", "mcp-protocol-version": "2025-11-25" }
      expect((await fetch(served.url, { method: "DELETE", headers: session })).status).toBe(204)
      const ended = await fetch(served.url, {
        method: "POST",
        headers: { ...session, "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping" })
      })
      expect(ended.status).toBe(404)

      const mcp = await connectHttp(served)
      try {
        expect((await mcp.client.listTools()).tools.map((tool) => tool.name)).toEqual(accountTools)
        const listed = await mcp.call("list_transfers", { limit: 1, status: "confirmed" })
        expect(listed.structured).toMatchObject({ transfers: [{ status: "confirmed" }] })
        const paid = await mcp.call("pay", { to: "@bob", amount: "0.25" })
        expect(paid.structured).toMatchObject({ kind: "transfer", status: "confirmed" })
        // Error handling: a tool the holder's key does not have is a JSON-RPC error, not a call.
        await expect(mcp.call("get_spend_policy")).rejects.toThrow(/-32602.*get_spend_policy/)
      } finally {
        await mcp.close()
      }
    } finally {
      await served.stop()
    }
  })
})

const agentTools = ["pay", "get_transfer", "list_transfers", "get_spend_policy", "wait_for_approval", "fetch_paid"]

describe("pps mcp with an agent's key alone", { timeout: 60_000 }, () => {
  it("pays under the threshold, refuses over the per-transaction limit by name, holds above the threshold until the owner approves", async () => {
    const owner = new Pps({ baseUrl: server.baseUrl, apiKey: alice.api_key, keyPair: aliceKey })
    const policy = { daily_limit_usdg: 50, per_transaction_limit_usdg: 20, hitl_threshold_usdg: 1 }
    const agent = await owner.agents.create({ name: "mcp-bot", spend_policy: policy })
    const key = await owner.agents.keys.create(agent.account_id, { name: "mcp" })
    await expect(owner.transfers.create({ to: agent.handle, amount: "30" })).resolves.toMatchObject({ kind: "transfer" })
    // Every key checked against the chain: the operator's deployment and the owner's wallet, pinned here.
    const status = await owner.encryptionKey.status()
    const pinned = {
      PPS_RPC_URL: anvilRpcUrl(server.dataDir),
      PPS_CHAIN_ID: String(status.chain_id),
      PPS_CONTRACT_USDG: status.contracts.USDG,
      PPS_OWNER_WALLET: key.owner_address,
      PPS_TRUST: "chain"
    }
    const home = fs.mkdtempSync(path.join(os.tmpdir(), "pps-mcp-agent-"))
    const proxy = await startRecordingProxy(server.baseUrl)
    const mcp = await connectStdio({ PPS_API_KEY: key.api_key, PPS_BASE_URL: proxy.baseUrl, HOME: home, ...pinned })
    try {
      expect((await mcp.client.listTools()).tools.map((tool) => tool.name)).toEqual(agentTools)
      expect((await mcp.call("get_spend_policy")).structured).toMatchObject(policy)

      const under = await mcp.call("pay", { to: "@bob", amount: "0.75" })
      expect(under.isError, under.text).toBe(false)
      expect(under.structured).toMatchObject({ kind: "transfer", status: "confirmed" })

      const over = await mcp.call("pay", { to: "@bob", amount: "25" })
      expect(over).toMatchObject({ isError: true })
      expect(over.text).toMatch(
        /^refused: per-transaction limit: amount is above the spend policy's per_transaction_limit_usdg \(policy_violation per_transaction_limit_exceeded, request req_\w+\); nothing was paid$/
      )

      const canary = { decimal: "2.613", baseUnits: 2_613_000n }
      const memo = "held canary memo 51c9"
      const held = await mcp.call("pay", { to: "@bob", amount: canary.decimal, memo })
      expect(held.structured).toMatchObject({ kind: "held", status: "pending_approval", expires_at: expect.any(String) })
      const transactionId = String(held.structured?.["transaction_id"])
      // Retried with its key: the same held transaction, not a second one.
      const again = await mcp.call("pay", { to: "@bob", amount: canary.decimal, memo, idempotency_key: String(held.structured?.["idempotency_key"]) })
      expect(again.structured).toMatchObject({ kind: "held", transaction_id: transactionId })
      expect((await mcp.call("wait_for_approval", { transaction_id: transactionId, timeout_seconds: 0 })).structured).toMatchObject({
        outcome: "still_held",
        status: "pending_approval",
        transfer_id: null
      })

      // The owner approves through the API while the agent waits.
      const waiting = mcp.call("wait_for_approval", { transaction_id: transactionId, timeout_seconds: 30 })
      await new Promise((resolve) => setTimeout(resolve, 1_500))
      expect(await owner.approvals.approve(transactionId)).toMatchObject({ status: "approved" })
      const decided = await waiting
      expect(decided.structured).toMatchObject({ outcome: "approved", status: "approved", transfer_id: expect.stringMatching(/^tr_/) })
      const transfer = await mcp.call("get_transfer", { transfer_id: String(decided.structured?.["transfer_id"]) })
      expect(transfer.structured).toMatchObject({ status: "confirmed", from: agent.handle, to: "@bob" })
      expect(await mcp.call("wait_for_approval", { transaction_id: transactionId, timeout_seconds: 51 })).toMatchObject({ isError: true })

      expectNoCanary(proxy.sent(), mcp.stderr(), canary, memo)
    } finally {
      await mcp.close()
      await proxy.close()
      fs.rmSync(home, { recursive: true, force: true })
    }
  })
})

/**
 * The suite's server scenarios that need none of its fixture tools, resources or prompts, and
 * pass (docs/mcp.md lists every scenario with why the others do not apply or fail).
 */
const conformanceScenarios = ["server-initialize", "ping", "tools-list", "logging-set-level", "resources-list", "prompts-list", "dns-rebinding-protection"]

describe("the official MCP conformance suite against pps mcp --http", { timeout: 60_000 }, () => {
  it(`passes ${conformanceScenarios.join(", ")}`, async () => {
    const port = await freePort()
    const served = await startHttp({ PPS_API_KEY: alice.api_key, PPS_BASE_URL: server.baseUrl, HOME: aliceHome }, port)
    const hop = await startBearerHop(port, served.token)
    try {
      const results = await Promise.all(conformanceScenarios.map(async (scenario) => ({ scenario, ...(await runScenario(hop.url, scenario)) })))
      for (const result of results) {
        expect(result.checks.length, `${result.scenario}\n${result.output}`).toBeGreaterThan(0)
        expect(result.checks.map((check) => [check.id, check.status, check.errorMessage]), result.scenario)
          .toEqual(result.checks.map((check) => [check.id, "SUCCESS", undefined]))
        expect(result.passed, result.output).toBe(true)
      }
      // Without the hop's token the same server answers the suite nothing.
      const unauthenticated = await runScenario(served.url, "server-initialize")
      expect(unauthenticated.passed).toBe(false)
    } finally {
      await hop.close()
      await served.stop()
    }
  })
})
