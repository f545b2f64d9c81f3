/**
 * The Promise facade against the real server (child process, embedded PGlite, anvil and
 * guardian): each resource's methods; transfers sealed here, listed across pages and
 * decrypted; an error class per code; an idempotent retry answering the first transfer;
 * a 503 from a faulty hop retried after its Retry-After with the same Idempotency-Key; the
 * faucet; the live event stream as an async iteration, resumed after the last event's id.
 */
import { PublicApi } from "@pps/api/Api"
import { routerErrors } from "@pps/api/Errors"
import { EncryptionKey } from "@pps/crypto"
import { OpenApi } from "effect/http-api"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Errors, Pps, type PpsTypes } from "../src/index.ts"
import { transferOf } from "./support/created.ts"
import { startHop } from "./support/hop.ts"
import { type ServerProcess, startServer } from "./support/server.ts"

describe("Errors", () => {
  it("has a class for every code the API answers: each error of the contract's document, and the router's", () => {
    const document = JSON.stringify(OpenApi.fromApi(PublicApi))
    const declared = [...document.matchAll(/"error":\{"type":"object","properties":\{"code":\{"type":"string","enum":\["([a-z_]+)"\]/g)].map((match) => match[1]!)
    expect(declared.length).toBeGreaterThan(20)
    for (const code of [...declared, ...Object.keys(routerErrors)]) expect(Errors.codes, code).toContain(code)
  })

  it("maps every code to its class, an ApiError with status, code, param, reason and request id", () => {
    for (const code of Errors.codes) {
      const body = JSON.stringify({ error: { code, message: "m", param: "p", reason: "r", request_id: "req_1" } })
      const error = Errors.fromAnswer(418, body, { code, message: "m", param: "p", reason: "r", request_id: "req_1" })
      expect(error).toBeInstanceOf(Errors.ApiError)
      expect(error.constructor).not.toBe(Errors.ApiError)
      expect({ code: error.code, param: error.param, reason: error.reason, requestId: error.requestId, status: error.status })
        .toEqual({ code, param: "p", reason: "r", requestId: "req_1", status: 418 })
    }
    expect(Errors.fromAnswer(402, "", { code: "insufficient_balance", message: "m" })).toBeInstanceOf(Errors.InsufficientBalance)
    // A code this SDK does not know is still an ApiError.
    const future = Errors.fromAnswer(400, "", { code: "from_the_future", message: "m" })
    expect(future.constructor).toBe(Errors.ApiError)
    // Its typed code is none of the contract's; the wire's string stays in `error`.
    expect({ code: future.code, wire: future.error?.code }).toEqual({ code: undefined, wire: "from_the_future" })
    expect([Errors.isCode("insufficient_balance"), Errors.isCode("from_the_future")]).toEqual([true, false])
  })
})

let server: ServerProcess
let alice: { readonly account_id: string; readonly api_key: string }
let bob: { readonly account_id: string; readonly api_key: string }
const aliceKey = EncryptionKey.generate()
const bobKey = EncryptionKey.generate()

beforeAll(async () => {
  server = await startServer()
  ;[alice, bob] = [await server.createAccount("alice"), await server.createAccount("bob")]
  await new Pps({ baseUrl: server.baseUrl, apiKey: alice.api_key, keyPair: aliceKey }).encryptionKey.register()
  await new Pps({ baseUrl: server.baseUrl, apiKey: bob.api_key, keyPair: bobKey }).encryptionKey.register()
  const granted = await new Pps({ apiKey: alice.api_key, baseUrl: server.baseUrl }).faucet({ amount: "100" })
  expect(granted).toMatchObject({ asset: "USDG", amount: "100", tx_hash: expect.stringMatching(/^0x/) })
}, 120_000)

afterAll(async () => {
  await server?.stop()
}, 30_000)

describe("Pps", { timeout: 60_000 }, () => {
  it("transfers: sealed create, idempotent retry, pages, get, decrypt, typed errors", async () => {
    const pps = new Pps({ apiKey: alice.api_key, baseUrl: server.baseUrl, keyPair: aliceKey })
    expect(await pps.encryptionKey.status()).toMatchObject({ confidential_ready: true, public_key: expect.stringMatching(/^0x/) })
    const created = await pps.transfers.create({ to: "@bob", amount: "1.5", memo: "one" }, { idempotencyKey: "facade-1" })
    expect(created).toMatchObject({ kind: "transfer", transfer: { status: "confirmed", to: "@bob", confidential: true } })
    const first = transferOf(created)
    // The same key again: the first transfer, not a second one.
    const again = transferOf(await pps.transfers.create({ to: "@bob", amount: "1.5", memo: "one" }, { idempotencyKey: "facade-1" }))
    expect(again.transfer_id).toBe(first.transfer_id)
    await pps.transfers.create({ to: "@bob", amount: "2" })
    await pps.transfers.create({ to: "@bob", amount: "3", confidential: false })
    const all: Array<string> = []
    for await (const transfer of pps.transfers.list({ pageSize: 1 })) all.push(transfer.transfer_id)
    expect(all).toHaveLength(3)
    expect(new Set(all).size).toBe(3)
    expect(await pps.transfers.get(all[2]!)).toMatchObject({ transfer_id: all[2] })
    const bobPps = new Pps({ apiKey: bob.api_key, baseUrl: server.baseUrl, keyPair: bobKey })
    expect(await bobPps.transfers.decrypt(first.transfer_id)).toMatchObject({ amount: 1_500_000n, memo: "one" })

    const refused = await pps.transfers.create({ to: "@bob", amount: "5000" }).catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(Errors.InsufficientBalance)
    expect((refused as Errors.ApiError).requestId).toMatch(/^req_/)
    const unknown = await pps.transfers.create({ to: "@nobody-here", amount: "1" }).catch((error: unknown) => error)
    expect(unknown).toBeInstanceOf(Errors.RecipientNotFound)
    const missing = await pps.transfers.get("tr_01JZZZZZZZZZZZZZZZZZZZZZZZ").catch((error: unknown) => error)
    expect(missing).toBeInstanceOf(Errors.TransferNotFound)
    const badKey = await new Pps({ apiKey: "hc_test_nope", baseUrl: server.baseUrl }).transfers.get("tr_x").catch((error: unknown) => error)
    expect(badKey).toBeInstanceOf(Errors.Unauthorized)
  })

  it("agents, policies, approvals with the guardian's amount opened here, webhooks, keys", async () => {
    const pps = new Pps({ apiKey: alice.api_key, baseUrl: server.baseUrl, keyPair: aliceKey })
    const agent = await pps.agents.create({ name: "facade-bot", spend_policy: { daily_limit_usdg: 50, per_transaction_limit_usdg: 20, hitl_threshold_usdg: 1 } })
    expect((await pps.agents.list()).agents.map((a) => a.account_id)).toContain(agent.account_id)
    // D61: the paged list, one page and every page, in the same order as the whole list.
    const whole = (await pps.agents.list()).agents.map((a) => a.account_id)
    const all: Array<string> = []
    for await (const each of pps.agents.all({ pageSize: 1 })) all.push(each.account_id)
    expect(all).toEqual(whole)
    expect(await pps.agents.page({ limit: 1 })).toMatchObject({ limit: 1, offset: 0, has_more: whole.length > 1, data: [{ account_id: whole[0] }] })
    expect(await pps.agents.policy.update(agent.account_id, { daily_limit_usdg: 40 })).toMatchObject({ daily_limit_usdg: 40 })
    expect(await pps.agents.policy.get(agent.account_id)).toMatchObject({ daily_limit_usdg: 40, hitl_threshold_usdg: 1 })
    await pps.transfers.create({ to: agent.handle, amount: "10" })
    // The owner issues its agent's key (D44): the value once, the owner's wallet address beside it.
    const agentKey = await pps.agents.keys.create(agent.account_id, { name: "bot" }, { idempotencyKey: "facade-bot-key" })
    expect(agentKey).toMatchObject({ name: "bot", mode: "test", account_id: agent.account_id, owner_address: (await pps.accounts.me()).public_key })
    // Retried with the same key: no second key, and the value is not shown again.
    const retried = await pps.agents.keys.create(agent.account_id, { name: "bot" }, { idempotencyKey: "facade-bot-key" }).catch((error: unknown) => error)
    expect(retried).toBeInstanceOf(Errors.KeyShownOnce)
    expect((await pps.agents.keys.list(agent.account_id)).data.map((key) => key.key_id)).toEqual([agentKey.key_id])
    // The agent seals to its owner's key (its amounts are encrypted to it).
    const bot = new Pps({ apiKey: agentKey.api_key, baseUrl: server.baseUrl, senderKey: aliceKey.publicKey })
    expect((await bot.accounts.me()).account_id).toBe(agent.account_id)
    // D42: without an id, the agent key's own policy.
    expect(await bot.agents.policy.get()).toMatchObject({ daily_limit_usdg: 40, hitl_threshold_usdg: 1 })
    expect(await bot.agents.keys.list(agent.account_id).catch((error: unknown) => error)).toBeInstanceOf(Errors.NotAgentOwner)
    const held = await bot.transfers.create({ to: "@bob", amount: "2.5", memo: "held" })
    expect(held).toMatchObject({ kind: "held", held: { status: "pending_approval" } })
    const heldId = held.kind === "held" ? held.held.transaction_id : ""
    expect(await bot.agents.transactions.get(heldId)).toMatchObject({ transaction_id: heldId, status: "pending_approval" })
    const pending = await pps.approvals.list()
    expect(pending.pending).toHaveLength(1)
    const opened = await pps.approvals.open(pending.pending[0]!.transaction_id)
    expect(opened).toMatchObject({ amount: 2_500_000n, memo: "held", noteMatches: true })
    expect(await pps.approvals.approve(opened.transactionId)).toMatchObject({ status: "approved", transfer_status: "confirmed" })
    expect(await bot.agents.transactions.get(heldId)).toMatchObject({ status: "approved", transfer_status: "confirmed" })
    expect(await pps.agents.transactions.get(heldId)).toMatchObject({ status: "approved" })
    const notAnOwner = await bot.approvals.list().then(() => "listed", (error: unknown) => error)
    expect(notAnOwner === "listed" || notAnOwner instanceof Errors.NotAgentOwner).toBe(true)
    // Revoked by its owner: the agent's next request is refused.
    expect(await pps.agents.keys.revoke(agent.account_id, agentKey.key_id)).toEqual({ key_id: agentKey.key_id, revoked: true })
    expect(await bot.accounts.me().catch((error: unknown) => error)).toBeInstanceOf(Errors.Unauthorized)

    const webhook = await pps.webhooks.create({ url: "https://example.com/hook", events: ["transfer.confirmed"] })
    expect(webhook.secret).toMatch(/^whsec_/)
    expect((await pps.webhooks.list()).data.map((w) => w.webhook_id)).toContain(webhook.webhook_id)
    expect((await pps.webhooks.rotateSecret(webhook.webhook_id)).secret).not.toBe(webhook.secret)
    expect(await pps.webhooks.deliveries(webhook.webhook_id, { limit: 5 })).toMatchObject({ limit: 5, offset: 0 })
    await pps.webhooks.delete(webhook.webhook_id)
    expect(await pps.webhooks.delete(webhook.webhook_id).catch((error: unknown) => error)).toBeInstanceOf(Errors.WebhookNotFound)

    const keys = await pps.keys.list()
    expect(keys[0]?.totals.find((total) => total.asset === "USDG")?.transfers).toBeGreaterThanOrEqual(1n)
  })

  it("goes through the contract: the caller's Idempotency-Key, ids checked by the server, answers decoded, transport failures named", async () => {
    const hop = await startHop(server.baseUrl, () => false)
    try {
      const pps = new Pps({ apiKey: alice.api_key, baseUrl: hop.baseUrl, keyPair: aliceKey })
      const policy = { daily_limit_usdg: 5, per_transaction_limit_usdg: 1 }
      const agent = await pps.agents.create({ name: "contract-bot", spend_policy: policy }, { idempotencyKey: "facade-agent-1" })
      const again = await pps.agents.create({ name: "contract-bot", spend_policy: policy }, { idempotencyKey: "facade-agent-1" })
      expect(again.account_id).toBe(agent.account_id)
      const creates = hop.seen.filter((request) => request.method === "POST" && request.path === "/v1/accounts/me/agents")
      expect(creates.map((request) => request.key)).toEqual(["facade-agent-1", "facade-agent-1"])
    } finally {
      await hop.close()
    }

    const pps = new Pps({ apiKey: alice.api_key, baseUrl: server.baseUrl })
    // Not checked here: the server answers its own 404 for an id that cannot exist, with a request id.
    const malformedId = await pps.transfers.get("tr_x").catch((error: unknown) => error)
    expect(malformedId).toBeInstanceOf(Errors.TransferNotFound)
    expect((malformedId as Errors.ApiError).requestId).toMatch(/^req_/)
    // A limit out of range is the server's 400 naming the parameter.
    const badLimit = await pps.webhooks.deliveries("wh_01JZZZZZZZZZZZZZZZZZZZZZZZ", { limit: 0 }).catch((error: unknown) => error)
    expect(badLimit).toBeInstanceOf(Errors.InvalidRequest)
    expect((badLimit as Errors.ApiError).param).toBe("limit")

    // An answer that is not the contract's is refused, not passed on.
    const garbled = new Pps({
      apiKey: alice.api_key,
      baseUrl: server.baseUrl,
      fetch: async (url, init) => {
        const answer = await fetch(url, init)
        return url.endsWith("/v1/accounts/me/agents")
          ? new Response(JSON.stringify({ agents: [{ account_id: 42 }] }), { status: 200, headers: { "content-type": "application/json" } })
          : answer
      }
    })
    const refused = await garbled.agents.list().catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(Errors.TransportError)
    expect((refused as Errors.TransportError).reason).toBe("malformed_response")

    const unreachable = await new Pps({ apiKey: alice.api_key, baseUrl: "http://127.0.0.1:9", maxRetries: 0 }).agents.list()
      .catch((error: unknown) => error)
    expect(unreachable).toBeInstanceOf(Errors.TransportError)
    expect((unreachable as Errors.TransportError).reason).toBe("unreachable")
    expect((unreachable as Error).message).toContain("http://127.0.0.1:9")
  })

  it("retries a 503 after its Retry-After with the same Idempotency-Key, and pays once", async () => {
    // A faulty hop in front of the real server: the first POST /v1/transfers answers 503.
    const hop = await startHop(server.baseUrl, (request) => request.method === "POST" && request.path === "/v1/transfers")
    try {
      const pps = new Pps({ apiKey: alice.api_key, baseUrl: hop.baseUrl, keyPair: aliceKey })
      const started = Date.now()
      const transfer = transferOf(await pps.transfers.create({ to: "@bob", amount: "0.75" }))
      expect(transfer.status).toBe("confirmed")
      expect(Date.now() - started).toBeGreaterThanOrEqual(1_000)
      const creates = hop.seen.filter((request) => request.method === "POST" && request.path === "/v1/transfers")
      expect(creates).toHaveLength(2)
      expect(creates[0]?.key).toBeDefined()
      expect(creates[1]?.key).toBe(creates[0]?.key)
    } finally {
      await hop.close()
    }
  })

  it("events: the live stream's payloads, typed by the contract, and resumed after the last event's id", async () => {
    const pps = new Pps({ apiKey: bob.api_key, baseUrl: server.baseUrl })
    const alicePps = new Pps({ apiKey: alice.api_key, baseUrl: server.baseUrl, keyPair: aliceKey })
    /** The first event about a transfer; events come a settle window (2 s) after they are recorded. */
    const firstAbout = async (events: AsyncIterable<PpsTypes.Event>, transferId: string) => {
      for await (const event of events) if ("transfer_id" in event && event.transfer_id === transferId) return event
      throw new Error("the stream ended")
    }
    // Resolved once the server answered: a stream without a last event id starts then.
    const live = await pps.events.stream()
    const sent = transferOf(await alicePps.transfers.create({ to: "@bob", amount: "0.1", confidential: false }))
    const first = await firstAbout(live, sent.transfer_id)
    expect(first).toMatchObject({ event: expect.stringMatching(/^transfer\./), direction: "received", account: "@bob", counterparty: "@alice" })
    expect(first.id).toMatch(/^evt_/)
    // Paid while no stream is open: a stream resumed after the first event still gets it.
    const later = transferOf(await alicePps.transfers.create({ to: "@bob", amount: "0.2", confidential: false }))
    const resumed = await firstAbout(await pps.events.stream({ lastEventId: first.id }), later.transfer_id)
    expect(resumed).toMatchObject({ direction: "received", transfer_id: later.transfer_id })
    expect(resumed.id > first.id).toBe(true)
  })
})
