/**
 * The confidential x402 scheme end to end (D57): a resource server on `@x402/express` with the
 * scheme's merchant, a client on `@x402/fetch`'s `wrapFetchWithPayment`, a real PPS server
 * (child process: embedded PGlite, anvil, guardian). Each test states its goal; none mocks the
 * API, the chain or the HTTP peers.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { EncryptionKey } from "@pps/crypto"
import { Errors, KeyFile, Pps } from "@pps/sdk"
import { x402Client, x402HTTPClient } from "@x402/core/client"
import { decodePaymentRequiredHeader, decodePaymentSignatureHeader } from "@x402/core/http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { connectStdio } from "../../mcp/test/support/mcp.ts"
import { childEnvironment, childNodeFlags } from "../../../scripts/childEnvironment.ts"
import { freePort } from "../../../scripts/freePort.ts"
import { anvilRpcUrl, chainRpc, repositoryRoot, runNode, type ServerProcess, startServer } from "../../sdk/test/support/server.ts"
import { wrapFetchWithPayment } from "@x402/fetch"
import { startExactShop } from "./support/exact.ts"
import { canaryForms, startRecordingProxy } from "../../server/test/support/recordingProxy.ts"
import { Binding, Client, Scheme } from "../src/index.ts"
import { type Shop, startShop } from "./support/shop.ts"

let server: ServerProcess
let alice: Pps
let aliceKey: { readonly apiKey: string; readonly keyPair: EncryptionKey.KeyPair }
let shopPayee: Pps
let shopKey: { readonly apiKey: string; readonly keyPair: EncryptionKey.KeyPair; readonly accountId: string }
let agent: Pps
let agentKey: string
let shop: Shop

beforeAll(async () => {
  server = await startServer()
  const [aliceAccount, shopAccount] = [await server.createAccount("alice"), await server.createAccount("shop")]
  aliceKey = { apiKey: aliceAccount.api_key, keyPair: EncryptionKey.generate() }
  alice = new Pps({ baseUrl: server.baseUrl, apiKey: aliceKey.apiKey, keyPair: aliceKey.keyPair })
  shopKey = { apiKey: shopAccount.api_key, keyPair: EncryptionKey.generate(), accountId: shopAccount.account_id }
  shopPayee = new Pps({ baseUrl: server.baseUrl, apiKey: shopKey.apiKey, keyPair: shopKey.keyPair })
  await alice.encryptionKey.register()
  await shopPayee.encryptionKey.register()
  await alice.faucet({ amount: "100" })
  const created = await alice.agents.create({
    name: "shopper",
    spend_policy: { daily_limit_usdg: 50, per_transaction_limit_usdg: 2, hitl_threshold_usdg: 0.5 }
  })
  const key = await alice.agents.keys.create(created.account_id, { name: "x402" })
  agentKey = key.api_key
  agent = new Pps({ baseUrl: server.baseUrl, apiKey: agentKey })
  await alice.transfers.create({ to: "@alice/shopper", amount: "10" })
  shop = await startShop(shopPayee)
}, 180_000)

afterAll(async () => {
  await shop?.close()
  await server?.stop()
}, 30_000)

/** Fetch that records the PAYMENT-SIGNATURE each request carried. */
const recording = () => {
  const signatures: Array<string> = []
  const fetchImpl: typeof globalThis.fetch = (input, init) => {
    const request = new Request(input, init)
    const signature = request.headers.get("payment-signature")
    if (signature !== null) signatures.push(signature)
    return globalThis.fetch(request)
  }
  return { signatures, fetchImpl }
}

const received = async (): Promise<Array<string>> => {
  const ids: Array<string> = []
  for await (const transfer of shopPayee.transfers.list()) if (transfer.direction === "received") ids.push(transfer.transfer_id)
  return ids
}

/** The reason a 402 gives (the PAYMENT-REQUIRED header's `error`). */
const reasonOf = (response: Response): string | undefined => {
  const header = response.headers.get("payment-required")
  return header === null ? undefined : decodePaymentRequiredHeader(header).error
}

const replay = (path: string, signature: string) => fetch(`${shop.baseUrl}${path}`, { headers: { "PAYMENT-SIGNATURE": signature } })

describe("pps-sealed over @x402/express and @x402/fetch", { timeout: 120_000 }, () => {
  it("pays once per request; the payee's opened copy holds the price and the binding; a replayed signature, another resource or another price is refused 402", async () => {
    const before = await received()
    const { signatures, fetchImpl } = recording()
    const paid = Client.paidFetch({ payer: alice, maxPerRequest: "0.05", maxPerSession: "1" }, fetchImpl)
    const first = await paid.fetch(`${shop.baseUrl}/weather`)
    expect(first.status).toBe(200)
    expect(await first.json()).toEqual({ path: "/weather", answer: 42 })
    expect(first.headers.get("payment-response")).not.toBeNull()
    const second = await paid.fetch(`${shop.baseUrl}/weather`)
    expect(second.status).toBe(200)
    const after = await received()
    expect(after.length - before.length).toBe(2)
    expect(signatures).toHaveLength(2)
    expect(paid.scheme.committedUnits).toBe(2n * 13_217n)

    // The payee's own copy: the price, and a memo naming the nonce of the 402 it paid.
    const payload = decodePaymentSignatureHeader(signatures[0]!)
    const opened = await shopPayee.transfers.decrypt(String(payload.payload["transferId"]))
    expect(opened.amount).toBe(13_217n)
    expect(opened.memo).toContain(`nonce=${String(payload.accepted.extra["nonce"])}`)

    const replayed = await replay("/weather", signatures[0]!)
    expect(replayed.status).toBe(402)
    expect(reasonOf(replayed)).toBe("payment_already_used")
    const elsewhere = await replay("/forecast", signatures[1]!)
    expect(elsewhere.status).toBe(402)
    expect(reasonOf(elsewhere)).toBe("No matching payment requirements")
    const otherPrice = await replay("/pricier", signatures[1]!)
    expect(otherPrice.status).toBe(402)
    expect(reasonOf(otherPrice)).toBe("No matching payment requirements")
    expect(await received()).toHaveLength(after.length)
    expect(shop.handled.get("/forecast")).toBeUndefined()
  })

  it("PPS's api tier sees no amount and no memo: every byte the payer's and the payee's clients send it", async () => {
    const proxy = await startRecordingProxy(server.baseUrl)
    const proxiedShop = await startShop(new Pps({ baseUrl: proxy.baseUrl, apiKey: shopKey.apiKey, keyPair: shopKey.keyPair }))
    try {
      const payer = new Pps({ baseUrl: proxy.baseUrl, apiKey: aliceKey.apiKey, keyPair: aliceKey.keyPair })
      const { signatures, fetchImpl } = recording()
      const paid = Client.paidFetch({ payer, maxPerRequest: "20", maxPerSession: "20" }, fetchImpl)
      expect((await paid.fetch(`${proxiedShop.baseUrl}/canary`)).status).toBe(200)
      const { accepted } = decodePaymentSignatureHeader(signatures[0]!)
      const memo = Binding.memoOf(String(accepted.extra["resource"]), String(accepted.extra["nonce"]), String(accepted.extra["expiresAt"]))
      const wire = proxy.sent().toString("latin1")
      expect(wire).toContain("POST /v1/transfers")
      expect(wire).toContain("/sealed")
      for (const form of canaryForms({ decimal: "12.345679", baseUnits: 12_345_679n }, memo)) expect(wire, form).not.toContain(form)
    } finally {
      await proxiedShop.close()
      await proxy.close()
    }
  })

  it("ten concurrent requests carrying one payment: one transfer, one 200, nine 402 that say why", async () => {
    const before = await received()
    const unpaid = await fetch(`${shop.baseUrl}/weather`)
    expect(unpaid.status).toBe(402)
    const scheme = new Client.PpsSealedClient({ payer: alice, maxPerRequest: "0.05", maxPerSession: "1" })
    const httpClient = new x402HTTPClient(new x402Client().register(Scheme.networks.test, scheme).setSpendControls(false))
    const required = httpClient.getPaymentRequiredResponse((name) => unpaid.headers.get(name), await unpaid.json())
    const headers = httpClient.encodePaymentSignatureHeader(await httpClient.createPaymentPayload(required))
    const handledBefore = shop.handled.get("/weather") ?? 0
    const answers = await Promise.all(Array.from({ length: 10 }, () => fetch(`${shop.baseUrl}/weather`, { headers })))
    const statuses = answers.map((answer) => answer.status).sort()
    expect(statuses).toEqual([200, ...Array<number>(9).fill(402)])
    for (const answer of answers.filter((answer) => answer.status === 402)) {
      expect(["payment_in_use", "payment_already_used"]).toContain(reasonOf(answer))
    }
    expect((await received()).length - before.length).toBe(1)
    expect(shop.handled.get("/weather")).toBe(handledBefore + 1)
  })

  it("a handler failing after the payment checked out leaves it redeemable for that resource; a refund gives another back", async () => {
    const { signatures, fetchImpl } = recording()
    const paid = Client.paidFetch({ payer: alice, maxPerRequest: "0.05", maxPerSession: "1" }, fetchImpl)
    const failed = await paid.fetch(`${shop.baseUrl}/flaky`)
    expect(failed.status).toBe(503)
    const redeemed = await replay("/flaky", signatures[0]!)
    expect(redeemed.status).toBe(200)
    expect(await redeemed.json()).toEqual({ path: "/flaky", answer: 43 })
    expect(reasonOf(await replay("/flaky", signatures[0]!))).toBe("payment_already_used")

    const broken = await paid.fetch(`${shop.baseUrl}/broken`)
    expect(broken.status).toBe(500)
    const payload = decodePaymentSignatureHeader(signatures[1]!)
    const nonce = String(payload.accepted.extra["nonce"])
    expect((await shop.merchant.store.get(nonce))?.state).toBe("unserved")
    const refunded = await shop.merchant.refund(nonce)
    expect(refunded.refunded).toBe(true)
    const original = await alice.transfers.get(String(payload.payload["transferId"]))
    expect(original.refunds).toHaveLength(1)
    const back = await alice.transfers.decrypt(original.refunds[0]!)
    expect(back).toMatchObject({ role: "recipient", amount: 12_000n })
    expect(reasonOf(await replay("/broken", signatures[1]!))).toBe("payment_refunded")
    expect((await shop.merchant.refund(nonce)).refunded).toBe(false)
  })

  it("an agent over its per-transaction limit fails with the rule, and nothing is paid", async () => {
    const paid = Client.paidFetch({ payer: agent, maxPerRequest: "5", maxPerSession: "10" })
    await expect(paid.fetch(`${shop.baseUrl}/expensive`)).rejects.toThrow(
      /payment refused \(per_transaction_limit_exceeded, per_transaction_limit_usdg\): the agent's spend policy refused it/
    )
    expect(paid.scheme.lastFailure).toMatchObject({ rule: "per_transaction_limit_exceeded", field: "per_transaction_limit_usdg" })
    expect(paid.scheme.committedUnits).toBe(0n)
    expect(shop.handled.get("/expensive")).toBeUndefined()
    // approval_expires_at that is no timestamp is the caller's mistake, named.
    const refused = await agent.transfers.create({ to: "@shop", amount: "1", approvalExpiresAt: "tomorrow" }).catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(Errors.InvalidRequest)
    expect(refused).toMatchObject({ status: 400, param: "approval_expires_at" })
  })

  it("the client's own maxima refuse before paying: per request and per session", async () => {
    const perRequest = Client.paidFetch({ payer: alice, maxPerRequest: "0.01", maxPerSession: "1" })
    await expect(perRequest.fetch(`${shop.baseUrl}/weather`)).rejects.toThrow(/spendControls/)
    const perSession = Client.paidFetch({ payer: alice, maxPerRequest: "0.05", maxPerSession: "0.02" })
    expect((await perSession.fetch(`${shop.baseUrl}/weather`)).status).toBe(200)
    await expect(perSession.fetch(`${shop.baseUrl}/weather`)).rejects.toThrow(/payment refused \(max_per_session, maxPerSession\)/)
  })

  it("an agent above its threshold: approved within the requirement's expiry, the request is served", async () => {
    const paid = Client.paidFetch({ payer: agent, maxPerRequest: "2", maxPerSession: "10", pollIntervalMs: 250 })
    const answer = paid.fetch(`${shop.baseUrl}/held`)
    answer.catch(() => undefined)
    const transactionId = await pendingOf()
    await alice.approvals.approve(transactionId)
    const served = await answer
    expect(served.status).toBe(200)
    expect(await served.json()).toEqual({ path: "/held", answer: 42 })
  })
})

describe("where agents meet it: pps x402 fetch and the MCP tool fetch_paid", { timeout: 120_000 }, () => {
  it("an agent's key alone pays a 402 from the command line and through MCP, and a maximum below the price pays nothing", async () => {
    const before = await received()
    const env = { PPS_API_KEY: agentKey, PPS_BASE_URL: server.baseUrl }
    const run = await runNode("packages/sdk/src/cli.ts", ["x402", "fetch", `${shop.baseUrl}/weather`, "--max", "0.05"], env, 60_000)
    expect(run.stderr).toMatch(/^pps: HTTP 200, paid by transfer tr_\w+\n$/)
    expect(JSON.parse(run.stdout)).toEqual({ path: "/weather", answer: 42 })
    expect(run.exitCode).toBe(0)
    const refused = await runNode("packages/sdk/src/cli.ts", ["x402", "fetch", `${shop.baseUrl}/weather`, "--max", "0.01"], env, 60_000)
    expect(refused.exitCode).not.toBe(0)
    expect(refused.stderr).toMatch(/spendControls/)

    const mcp = await connectStdio(env)
    try {
      const result = await mcp.client.callTool({ name: "fetch_paid", arguments: { url: `${shop.baseUrl}/weather`, max_amount: "0.05" } })
      expect(result.isError).not.toBe(true)
      expect(result.structuredContent).toMatchObject({ status: 200, paid: true, content_type: expect.stringMatching(/^application\/json/), truncated: false })
      expect(JSON.parse(String((result.structuredContent as Record<string, unknown>)["body"]))).toEqual({ path: "/weather", answer: 42 })
      const over = await mcp.client.callTool({ name: "fetch_paid", arguments: { url: `${shop.baseUrl}/expensive`, max_amount: "5" } })
      expect(over.isError).toBe(true)
      expect(JSON.stringify(over.content)).toMatch(/per_transaction_limit_exceeded/)
    } finally {
      await mcp.close()
    }
    expect((await received()).length - before.length).toBe(2)
  })
})

describe("examples/x402-paywall", { timeout: 120_000 }, () => {
  it("started by its one command, it sells its answer for its price", async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), "pps-x402-paywall-"))
    const keyFile = KeyFile.defaultPath(shopKey.accountId, home)
    KeyFile.write(keyFile, { accountId: shopKey.accountId, keyPair: shopKey.keyPair }, { overwrite: false })
    const port = await freePort()
    const child = spawn(process.execPath, [...childNodeFlags(), "server.ts"], {
      cwd: path.join(repositoryRoot, "examples/x402-paywall"),
      env: { ...childEnvironment(), PPS_API_KEY: shopKey.apiKey, PPS_KEY_FILE: keyFile, PAYEE: "@shop", PORT: String(port), PPS_BASE_URL: server.baseUrl },
      stdio: ["ignore", "ignore", "pipe"]
    })
    try {
      const said = await new Promise<string>((resolve, reject) => {
        let text = ""
        child.stderr?.on("data", (chunk: Buffer) => {
          text += chunk.toString()
          if (text.includes("\n")) resolve(text)
        })
        child.once("exit", (code) => reject(new Error(`the example exited ${code}: ${text}`)))
      })
      expect(said).toBe(`x402-paywall: GET http://127.0.0.1:${port}/answer costs 0.013217 USDG, paid to @shop with pps-sealed\n`)
      const paid = Client.paidFetch({ payer: alice, maxPerRequest: "0.02", maxPerSession: "0.02" })
      const answer = await paid.fetch(`http://127.0.0.1:${port}/answer`)
      expect(answer.status).toBe(200)
      expect(await answer.json()).toMatchObject({ answer: 42 })
      expect((await shopPayee.transfers.decrypt(paid.scheme.lastTransferId!)).amount).toBe(13_217n)
    } finally {
      child.kill("SIGTERM")
      fs.rmSync(home, { recursive: true, force: true })
    }
  })
})

/** The one held transaction of the agent, once it is listed. */
const pendingOf = async (): Promise<string> => {
  for (let attempt = 0; attempt < 120; attempt++) {
    const { pending } = await alice.approvals.list()
    const held = pending.find((entry) => entry.agent === "@alice/shopper")
    if (held !== undefined) return held.transaction_id
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  throw new Error("no held transaction appeared")
}

describe("a held payment and the requirement's expiry", { timeout: 120_000 }, () => {
  it("held: the hold lasts as long as the client waits (maxTimeoutSeconds), the request then fails saying so, and a later approval pays nothing", async () => {
    const shortShop = await startShop(shopPayee, { validitySeconds: 8, maxTimeoutSeconds: 3 })
    try {
      const before = await received()
      const paid = Client.paidFetch({ payer: agent, maxPerRequest: "2", maxPerSession: "10", pollIntervalMs: 250 })
      const answer = paid.fetch(`${shortShop.baseUrl}/held`)
      answer.catch(() => undefined)
      const transactionId = await pendingOf()
      await expect(answer).rejects.toThrow(
        /payment held for the owner's approval \(transaction atx_\w+\): its window ended at \S+ without an approval; nothing was paid/
      )
      expect(paid.scheme.lastFailure).toMatchObject({ name: "PaymentHeld", transactionId, expired: true })
      // The hold's window is the client's wait (3 s, inside the requirement's 8 s), not the
      // server's day: an approval after the client gave up would buy a request nobody receives.
      const held = await agent.agents.transactions.get(transactionId)
      expect(Date.parse(held.expires_at) - Date.parse(held.requested_at)).toBeLessThanOrEqual(3_500)
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, Date.parse(held.expires_at) - Date.now() + 500)))
      await expect(alice.approvals.approve(transactionId)).rejects.toBeInstanceOf(Errors.TransactionExpired)
      expect(await received()).toEqual(before)
    } finally {
      await shortShop.close()
    }
  })
})

/** Every transaction of the chain so far, with its receipt's logs: what an observer of the chain reads. */
const chainRecord = async (rpcUrl: string) => {
  const latest = Number(await chainRpc(rpcUrl, "eth_blockNumber", []))
  const transactions: Array<{ readonly hash: string; readonly to: string | null; readonly text: string; readonly gasUsed: bigint }> = []
  for (let number = 0; number <= latest; number++) {
    const block = await chainRpc(rpcUrl, "eth_getBlockByNumber", [`0x${number.toString(16)}`, true]) as {
      readonly transactions: ReadonlyArray<{ readonly hash: string; readonly to: string | null; readonly input: string }>
    }
    for (const transaction of block.transactions) {
      const receipt = await chainRpc(rpcUrl, "eth_getTransactionReceipt", [transaction.hash]) as {
        readonly gasUsed: string
        readonly logs: ReadonlyArray<{ readonly data: string; readonly topics: ReadonlyArray<string> }>
      }
      const text = [transaction.input, ...receipt.logs.flatMap((log) => [log.data, ...log.topics])].join(" ").toLowerCase()
      transactions.push({ hash: transaction.hash, to: transaction.to?.toLowerCase() ?? null, text, gasUsed: BigInt(receipt.gasUsed) })
    }
  }
  return transactions
}

/** An amount as a chain observer could find it: an ABI word, a u64, its decimal digits in ASCII. */
const amountForms = (units: bigint, decimal: string): ReadonlyArray<string> => [
  units.toString(16).padStart(64, "0"),
  units.toString(16).padStart(16, "0"),
  Buffer.from(units.toString()).toString("hex"),
  Buffer.from(decimal).toString("hex")
]

describe("side by side with x402's exact scheme on the same anvil", { timeout: 180_000 }, () => {
  it("the same purchase at 0.013217: exact's amount is in the chain's calldata and logs; pps-sealed's is in no block or receipt of the run", async () => {
    const rpcUrl = anvilRpcUrl(server.dataDir)
    const exact = await startExactShop(rpcUrl, "13217")
    try {
      const exactFetch = wrapFetchWithPayment(fetch, new x402Client().register(Scheme.networks.test, exact.clientScheme).setSpendControls(false))
      const exactAnswer = await exactFetch(`${exact.baseUrl}/weather`)
      expect(exactAnswer.status).toBe(200)
      const sealed = Client.paidFetch({ payer: alice, maxPerRequest: "0.05", maxPerSession: "1" })
      const sealedAnswer = await sealed.fetch(`${shop.baseUrl}/weather`)
      expect(sealedAnswer.status).toBe(200)
      const sealedTransfer = await alice.transfers.get(sealed.scheme.lastTransferId!)

      const record = await chainRecord(rpcUrl)
      const forms = amountForms(13_217n, "0.013217")
      const token = exact.token.toLowerCase()
      const exactTransactions = record.filter((transaction) => transaction.to === token && transaction.text.includes(forms[0]!))
      // exact: transferWithAuthorization's calldata and the Transfer event carry the amount.
      expect(exactTransactions).toHaveLength(1)
      expect(exactTransactions[0]!.text).toContain(exact.payer.slice(2).toLowerCase())
      // pps-sealed: no other transaction of the run, in any form, though this test and the ones
      // before it paid 0.013217 several times.
      for (const transaction of record.filter((transaction) => transaction.to !== token)) {
        for (const form of forms) expect(transaction.text.includes(form), `${form} in ${transaction.hash}`).toBe(false)
      }
      const ours = record.find((transaction) => transaction.hash === sealedTransfer.tx_hash)
      expect(ours).toBeDefined()
      console.log(`gas per payment: exact transferWithAuthorization ${exactTransactions[0]!.gasUsed}, pps-sealed confidential transfer ${ours!.gasUsed}`)
    } finally {
      await exact.close()
    }
  })
})
