/**
 * The `pps` command line keeps its contract against the real server (child
 * process, embedded PGlite, anvil and guardian): keygen writes a 0600 key file
 * and never overwrites one, register-key is idempotent, balances and transfer
 * amounts are decrypted client-side and printed in the documented forms, and
 * every failure exits 1 with the API's D1 body or a `pps:` line on stderr,
 * never a secret key or an amount; help exits 0 on stdout and describes every
 * flag, every command takes --json, and a command-line mistake exits 2 with a
 * `pps:` line and the usage of that command on stderr, before any request.
 * `pps` runs in this process through its command line's entry with its own environment, home
 * and output streams (support/server.ts, `runPps`); `listen` and quickstart.test.ts run the
 * real command as a child process.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { freePort } from "../../../scripts/freePort.ts"
import { childEnvironment, childNodeFlags } from "../../../scripts/childEnvironment.ts"
import { EncryptionKey } from "@pps/crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Client from "../src/Client.ts"
import * as Confidential from "../src/Confidential.ts"
import { KeyFile, Webhook } from "../src/index.ts"
import { canaryForms, startRecordingProxy } from "../../server/test/support/recordingProxy.ts"
import { repositoryRoot, type Run, runPps, type ServerProcess, startServer } from "./support/server.ts"

let server: ServerProcess
let alice: { readonly account_id: string; readonly api_key: string }
let bob: { readonly account_id: string; readonly api_key: string }
// Alice's key file is in the default place under her home; Bob's is named with a relative --key-file.
const aliceHome = fs.mkdtempSync(path.join(os.tmpdir(), "pps-home-alice-"))
const bobDirectory = fs.mkdtempSync(path.join(os.tmpdir(), "pps-bob-"))
const bobKeyFile = path.join(bobDirectory, "bob.key")
let transferId = ""

const pps = (apiKey: string, args: ReadonlyArray<string>, extraEnv: Readonly<Record<string, string>> = {}): Promise<Run> =>
  runPps(args, { HOME: aliceHome, PPS_API_KEY: apiKey, PPS_BASE_URL: server.baseUrl, ...extraEnv })
const asAlice = (...args: ReadonlyArray<string>) => pps(alice.api_key, args)
const asBob = (...args: ReadonlyArray<string>) =>
  pps(bob.api_key, [...args, "--key-file", "bob.key"], { INIT_CWD: bobDirectory })

const post = async (apiKey: string, route: string, body: unknown) => {
  const response = await fetch(`${server.baseUrl}${route}`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify(body)
  })
  return { status: response.status, json: (await response.json()) as Record<string, unknown> }
}

/** A POST command's own Idempotency-Key, told on stderr when it drew one (nothing else is there on success). */
const keyLines = /^pps: Idempotency-Key (pps-[0-9a-f-]{36}) \(to repeat this request safely: --idempotency-key \1\)\n/gm

const expectSuccess = (run: Run): Run => {
  expect(run, run.stderr).toMatchObject({ exitCode: 0 })
  expect(run.stderr.replace(keyLines, "")).toBe("")
  return run
}

const expectD1 = (run: Run, code: string) => {
  expect(run.exitCode).toBe(1)
  expect(run.stdout).toBe("")
  const body = JSON.parse(run.stderr.replace(keyLines, "")) as { error: { code: string; message: string; request_id: string } }
  expect(body.error.code).toBe(code)
  expect(body.error.request_id).toMatch(/^req_/)
}

beforeAll(async () => {
  // Event streams live 3 s (the server's default is an hour), so `listen` meets the server
  // ending its stream several times and must resume each time without a loss.
  server = await startServer({ env: { EVENT_STREAM_MAX_LIFETIME_MS: "3000" } })
  ;[alice, bob] = [await server.createAccount("alice"), await server.createAccount("bob")]
}, 120_000)

afterAll(async () => {
  await server?.stop()
  fs.rmSync(aliceHome, { recursive: true, force: true })
  fs.rmSync(bobDirectory, { recursive: true, force: true })
}, 30_000)

// Each test runs up to a dozen `pps` commands one after another, in this process (runPps: the
// entry's command tree and conventions with this test's environment and captured output);
// `listen` runs as the real command in a child process, stopped by a signal as a user stops it.
describe("pps", { timeout: 90_000 }, () => {
  it("keygen writes a 0600 key file in a 0700 directory, prints no secret, and refuses to overwrite it", async () => {
    const first = JSON.parse(expectSuccess(await asAlice("keygen")).stdout) as Record<string, string>
    const defaultFile = path.join(aliceHome, ".pps", `${alice.account_id}.key`)
    expect(Object.keys(first)).toEqual(["account_id", "public_key", "key_file"])
    expect(first).toMatchObject({ account_id: alice.account_id, key_file: defaultFile })
    expect(fs.statSync(defaultFile).mode & 0o777).toBe(0o600)
    expect(fs.statSync(path.dirname(defaultFile)).mode & 0o777).toBe(0o700)
    const stored = JSON.parse(fs.readFileSync(defaultFile, "utf8")) as Record<string, string>
    expect(Object.keys(stored)).toEqual(["account_id", "secret_key", "public_key"])
    expect(stored["public_key"]).toBe(first["public_key"])
    expect(stored["secret_key"]).toMatch(/^0x[0-9a-f]{64}$/)

    const again = await asAlice("keygen")
    expect(again.exitCode).toBe(1)
    expect(again.stderr).toMatch(/^pps: .*exists already.*--force/)
    expect(fs.readFileSync(defaultFile, "utf8")).toBe(`${JSON.stringify(stored)}\n`)

    // Before registration, --force replaces the key (atomically, still 0600).
    const replaced = JSON.parse(expectSuccess(await asAlice("keygen", "--force")).stdout) as Record<string, string>
    expect(replaced["public_key"]).not.toBe(first["public_key"])
    expect(fs.statSync(defaultFile).mode & 0o777).toBe(0o600)
    expect(fs.readdirSync(path.dirname(defaultFile))).toEqual([`${alice.account_id}.key`])

    const bobKey = JSON.parse(expectSuccess(await asBob("keygen")).stdout) as Record<string, string>
    expect(bobKey["key_file"]).toBe(bobKeyFile)
    expect(fs.statSync(bobKeyFile).mode & 0o777).toBe(0o600)
    // No output carries the secret key it made.
    const secretOf = (file: string) => String((JSON.parse(fs.readFileSync(file, "utf8")) as Record<string, string>)["secret_key"]).slice(2)
    expect(JSON.stringify(first)).not.toContain(String(stored["secret_key"]).slice(2))
    expect(JSON.stringify(replaced)).not.toContain(secretOf(defaultFile))
    expect(JSON.stringify(bobKey)).not.toContain(secretOf(bobKeyFile))
  })

  it("register-key registers the key with its proofs, and again changes nothing", async () => {
    const { keyPair } = KeyFile.read(path.join(aliceHome, ".pps", `${alice.account_id}.key`))
    const publicKey = `0x${Buffer.from(keyPair.publicKey).toString("hex")}`
    const expected = `${JSON.stringify({ account_id: alice.account_id, public_key: publicKey, confidential_ready: true })}\n`
    expect(expectSuccess(await asAlice("register-key")).stdout).toBe(expected)
    // --json is accepted by every command; register-key prints JSON either way.
    expect(expectSuccess(await asAlice("register-key", "--json")).stdout).toBe(expected)
    expectSuccess(await asBob("register-key"))

    const status = await Confidential.encryptionKeyStatus(Client.make({ baseUrl: server.baseUrl, apiKey: alice.api_key }))
    expect(status).toMatchObject({ public_key: publicKey, confidential_ready: true })
    // A registered key is final: keygen will not make a second one, even with --force.
    const replace = await asAlice("keygen", "--force")
    expect(replace.exitCode).toBe(1)
    expect(replace.stderr).toMatch(/^pps: .*has a registered encryption key already/)
    expect(KeyFile.read(path.join(aliceHome, ".pps", `${alice.account_id}.key`)).keyPair.publicKey).toEqual(keyPair.publicKey)
  })

  it("faucet grants test USDG, printed as the API answers it; balance prints the decrypted, proven balances, with --json the endpoint's body", async () => {
    // 60 + 40: the quickstart's 100, once as JSON and once as a table.
    const granted = JSON.parse(expectSuccess(await asAlice("faucet", "--amount", "60", "--json")).stdout) as Record<string, string>
    expect(Object.keys(granted)).toEqual(["asset", "amount", "tx_hash"])
    expect(granted).toMatchObject({ asset: "USDG", amount: "60", tx_hash: expect.stringMatching(/^0x[0-9a-f]{64}$/) })
    expect(expectSuccess(await asAlice("faucet", "--amount", "40")).stdout).toMatch(/^asset\s+USDG\namount\s+40\ntx_hash\s+0x[0-9a-f]{64}\n$/)
    // The API's refusal of an amount over the faucet's cap, as its D1 body; another asset is refused by name before any request.
    expectD1(await asAlice("faucet", "--amount", "1000001"), "invalid_request")
    const otherAsset = await asAlice("faucet", "--asset", "ETH")
    expect(otherAsset).toMatchObject({ exitCode: 2, stdout: "" })
    expect(otherAsset.stderr).toMatch(/^pps: --asset must be USDG for the faucet, not "ETH"\nusage: pps <command>[^\n]*\n  faucet /)
    const created = await post(alice.api_key, "/v1/transfers", { to: "@bob", amount: "12.5", memo: "lunch money" })
    expect(created.status).toBe(201)
    expect(created.json).toMatchObject({ status: "confirmed", confidential: true })
    transferId = String(created.json["transfer_id"])

    const [aliceTable, bobTable, bobJson] = await Promise.all([asAlice("balance"), asBob("balance"), asBob("balance", "--json")])
    expect(expectSuccess(aliceTable).stdout).toBe("asset  amount\nUSDG   87.5\nETH    0\n")
    expect(expectSuccess(bobTable).stdout).toBe("asset  amount\nUSDG   12.5\nETH    0\n")
    // The endpoint's body unchanged, each amount with the block it is as of (D63).
    expect(expectSuccess(bobJson).stdout).toMatch(
      /^\{"balances":\[\{"asset":"USDG","amount":"12\.5","as_of_block":\d+\},\{"asset":"ETH","amount":"0","as_of_block":\d+\}\]\}\n$/
    )
  })

  it("decrypt-transfer opens each side's sealed copy and prints amount and memo", async () => {
    const expected = `${JSON.stringify({ transfer_id: transferId, amount: "12.5", memo: "lunch money" })}\n`
    const [asRecipient, asSender, asSenderTable] = await Promise.all([
      asBob("decrypt-transfer", transferId, "--json"),
      asAlice("decrypt-transfer", transferId, "--json"),
      asAlice("decrypt-transfer", transferId)
    ])
    expect(expectSuccess(asRecipient).stdout).toBe(expected)
    expect(expectSuccess(asSender).stdout).toBe(expected)
    expect(expectSuccess(asSenderTable).stdout).toBe(
      `transfer_id  ${transferId}\nrole         sender\nasset        USDG\namount       12.5\nmemo         lunch money\n`
    )
  })

  it("fails with exit 1 and the API's D1 body, or a pps: line, and never shows an amount", async () => {
    // A key that is not the registered one, and a copy of Bob's key file that others may read.
    const strangerFile = path.join(bobDirectory, "stranger.key")
    KeyFile.write(strangerFile, { accountId: bob.account_id, keyPair: EncryptionKey.generate() }, { overwrite: false })
    const groupReadable = path.join(bobDirectory, "group-readable.key")
    fs.copyFileSync(bobKeyFile, groupReadable)
    fs.chmodSync(groupReadable, 0o640)
    const [badApiKey, unknownTransfer, missingApiKey, wrongAccount, stranger, tooOpen, usage] = await Promise.all([
      pps("hc_test_not-a-real-key", ["balance"]),
      asBob("decrypt-transfer", "tr_01JD0000000000000000000000"),
      pps("", ["balance"]),
      // Bob's API key with Alice's key file.
      pps(bob.api_key, ["balance", "--key-file", path.join(aliceHome, ".pps", `${alice.account_id}.key`)]),
      pps(bob.api_key, ["decrypt-transfer", transferId, "--key-file", strangerFile]),
      pps(bob.api_key, ["balance", "--key-file", groupReadable]),
      asAlice("balance", "--force")
    ])
    expectD1(badApiKey, "unauthorized")
    expectD1(unknownTransfer, "transfer_not_found")
    const expectRefusal = (run: Run, message: RegExp) => {
      expect(run).toMatchObject({ exitCode: 1, stdout: "" })
      expect(run.stderr).toMatch(message)
      expect(run.stderr).not.toMatch(/12\.5|12500000|lunch/)
    }
    expectRefusal(missingApiKey, /^pps: PPS_API_KEY is not set/)
    expectRefusal(wrongAccount, /^pps: .*holds the key of account acct_.*belongs to account acct_/)
    // The wrong key cannot open Bob's copy: a loud failure, not a wrong amount.
    expectRefusal(stranger, /^pps: the sealed copy of transfer tr_\w+ does not open with this key/)
    expectRefusal(tooOpen, /^pps: .*readable by others; run: chmod 600/)
    // A command-line mistake is exit 2 (conventions tested below).
    expect(usage).toMatchObject({ exitCode: 2, stdout: "" })
    expect(usage.stderr).toMatch(/^pps: balance does not take --force\nusage: pps /)
  })

  it("refuses a sealed copy that does not match the transfer's ciphertext (a server that lies about the amount)", async () => {
    // A second transfer gives a real ciphertext of another amount; a proxy swaps it into the first transfer's copy.
    const second = await post(alice.api_key, "/v1/transfers", { to: "@bob", amount: "1" })
    expect(second.status).toBe(201)
    const secondCopy = (await (await fetch(`${server.baseUrl}/v1/transfers/${String(second.json["transfer_id"])}/sealed`, {
      headers: { authorization: `Bearer ${bob.api_key}` }
    })).json()) as Record<string, string>
    const lying: Client.Fetch = async (url, init) => {
      const response = await fetch(url, init)
      if (!url.endsWith(`/v1/transfers/${transferId}/sealed`)) return response
      const copy = (await response.json()) as Record<string, string>
      return Response.json({ ...copy, commitment: secondCopy["commitment"], handle: secondCopy["handle"] })
    }
    const { keyPair } = KeyFile.read(bobKeyFile)
    const honest = Client.make({ baseUrl: server.baseUrl, apiKey: bob.api_key })
    expect(await Confidential.decryptTransfer(honest, keyPair, transferId)).toMatchObject({ amount: 12_500_000n })
    const client = Client.make({ baseUrl: server.baseUrl, apiKey: bob.api_key, fetch: lying })
    const refused = await Confidential.decryptTransfer(client, keyPair, transferId).then(
      () => undefined,
      (error: unknown) => error
    )
    expect(refused).toBeInstanceOf(Confidential.ConfidentialError)
    expect((refused as Confidential.ConfidentialError).reason).toBe("sealed_copy_mismatch")
    expect((refused as Error).message).not.toMatch(/12\.5|12500000|lunch/)
  })

  it("a standard transfer: both parties' copies check out against the amount its transaction paid in public (D62)", async () => {
    // `send --public`: the plain form, the API's answer printed as received.
    const standard = JSON.parse(expectSuccess(await asAlice("send", "--to", "@bob", "--amount", "2", "--memo", "public", "--public", "--json")).stdout) as Record<string, unknown>
    expect(standard).toMatchObject({ confidential: false, status: "confirmed", to: "@bob", direction: "sent" })
    const id = String(standard["transfer_id"])
    const [sender, recipient] = await Promise.all([asAlice("decrypt-transfer", id, "--json"), asBob("decrypt-transfer", id, "--json")])
    expect(expectSuccess(sender).stdout).toBe(`${JSON.stringify({ transfer_id: id, amount: "2", memo: "public" })}\n`)
    expect(expectSuccess(recipient).stdout).toBe(`${JSON.stringify({ transfer_id: id, amount: "2", memo: "public" })}\n`)
    // The recipient's list shows the amount, no longer `(sealed_copy_unverifiable)`.
    const listed = JSON.parse(expectSuccess(await asBob("transfers", "list", "--limit", "5", "--json")).stdout) as {
      data: Array<Record<string, string>>
    }
    expect(listed.data.find((row) => row["transfer_id"] === id)).toMatchObject({ direction: "received", amount: "2", memo: "public" })
  })

  it("send seals amount and memo here (the wire carries neither); transfers list and keys open them here", async () => {
    const proxy = await startRecordingProxy(server.baseUrl)
    try {
      const sent = await pps(alice.api_key, ["send", "--to", "@bob", "--amount", "3.2179", "--memo", "wire canary 5150", "--json"], {
        PPS_BASE_URL: proxy.baseUrl
      })
      const transfer = JSON.parse(expectSuccess(sent).stdout) as Record<string, unknown>
      expect(transfer).toMatchObject({ status: "confirmed", to: "@bob", confidential: true })
      const wire = proxy.sent().toString("latin1")
      expect(wire).toContain("POST /v1/transfers/prepare")
      // Four decimals, so that no timestamp on the wire ("…:23.217Z") can hold the amount.
      for (const form of canaryForms({ decimal: "3.2179", baseUnits: 3_217_900n }, "wire canary 5150")) expect(wire).not.toContain(form)

      const listed = JSON.parse(expectSuccess(await asAlice("transfers", "list", "--limit", "3", "--json")).stdout) as {
        data: Array<Record<string, string>>
      }
      expect(listed.data[0]).toMatchObject({ transfer_id: transfer["transfer_id"], amount: "3.2179", memo: "wire canary 5150", direction: "sent" })
      const bobSide = JSON.parse(expectSuccess(await asBob("transfers", "get", String(transfer["transfer_id"]), "--json")).stdout)
      expect(bobSide).toEqual({ transfer_id: transfer["transfer_id"], amount: "3.2179", memo: "wire canary 5150" })
      expect(expectSuccess(await asAlice("transfers", "list", "--limit", "3")).stdout).toMatch(/^transfer_id\s+status\s+direction/)

      // Per-key totals, opened here: Alice's only key carries every confirmed transfer she sent.
      const keys = JSON.parse(expectSuccess(await asAlice("keys", "--json")).stdout) as {
        data: Array<{ totals: Array<{ asset: string; amount: string; transfers: string }> }>
      }
      expect(keys.data).toHaveLength(1)
      expect(Number(keys.data[0]?.totals.find((total) => total.asset === "USDG")?.transfers)).toBeGreaterThanOrEqual(2)
      // A flag's value is checked before anything is sent.
      const badLimit = await asAlice("transfers", "list", "--limit", "500")
      expect(badLimit.exitCode).toBe(2)
      expect(badLimit.stderr).toMatch(/^pps: --limit must be an integer from 1 to 100/)
      const noAmount = await asAlice("send", "--to", "@bob")
      expect(noAmount.exitCode).toBe(2)
      expect(noAmount.stderr).toMatch(/^pps: send needs --amount/)
    } finally {
      await proxy.close()
    }
  })

  it("transfers refund sends part of a received transfer back sealed, then the rest; more, or the sender's refund, is refused (D43)", async () => {
    const sent = JSON.parse(expectSuccess(await asAlice("send", "--to", "@bob", "--amount", "2.5", "--json")).stdout) as Record<string, string>
    const original = String(sent["transfer_id"])
    const proxy = await startRecordingProxy(server.baseUrl)
    try {
      const part = await pps(bob.api_key, ["transfers", "refund", original, "--amount", "1.0813", "--memo", "refund canary 7781", "--json", "--key-file", "bob.key"], {
        INIT_CWD: bobDirectory,
        PPS_BASE_URL: proxy.baseUrl
      })
      expect(JSON.parse(expectSuccess(part).stdout)).toMatchObject({ status: "confirmed", to: "@alice", refund_of: original })
      const wire = proxy.sent().toString("latin1")
      expect(wire).toContain(`POST /v1/transfers/${original}/refund`)
      for (const form of canaryForms({ decimal: "1.0813", baseUnits: 1_081_300n }, "refund canary 7781")) expect(wire).not.toContain(form)
    } finally {
      await proxy.close()
    }
    // The whole amount (the default) is more than is left; the rest is not.
    expectD1(await asBob("transfers", "refund", original), "refund_exceeds_original")
    const rest = expectSuccess(await asBob("transfers", "refund", original, "--amount", "1.4187")).stdout
    expect(rest).toMatch(new RegExp(`\\nrefund_of\\s+${original}\\n`))
    // The sender is told before anything is prepared or sent.
    const bySender = await asAlice("transfers", "refund", original, "--amount", "0.1")
    expect(bySender).toMatchObject({ exitCode: 1, stdout: "" })
    expect(bySender.stderr).toMatch(/^pps: transfer tr_\w+ was sent by this account, not received: only its recipient may refund it\n$/)
  })

  it("approvals list opens what the owner is asked to approve; approve and reject decide", async () => {
    const agent = await post(alice.api_key, "/v1/accounts/me/agents", {
      name: "cli-bot",
      spend_policy: { daily_limit_usdg: 100, per_transaction_limit_usdg: 50, hitl_threshold_usdg: 1 }
    })
    expect(agent.status).toBe(201)
    const agentId = String(agent.json["account_id"])
    // The owner issues the agent's key itself (D44): its value once, with the owner's wallet address.
    const issued = JSON.parse(expectSuccess(await asAlice("agents", "keys", "create", agentId, "--name", "bot", "--json")).stdout) as Record<string, string>
    expect(issued).toMatchObject({ name: "bot", mode: "test", account_id: agentId, agent: "@alice/cli-bot" })
    expect(issued["api_key"]).toMatch(/^hc_test_/)
    const me = await fetch(`${server.baseUrl}/v1/accounts/me`, { headers: { authorization: `Bearer ${alice.api_key}` } })
    expect(issued["owner_address"]).toBe(((await me.json()) as Record<string, string>)["public_key"])
    const agentKey = { api_key: issued["api_key"]! }
    const asAgent = (...args: ReadonlyArray<string>) => pps(agentKey.api_key, args)
    expect(expectSuccess(await asAlice("agents", "keys", "list", agentId)).stdout).toMatch(new RegExp(`^${issued["key_id"]}\\s+bot\\s+test\\s+…`, "m"))
    // The agent reads its own policy (D42), and manages no key.
    expect(JSON.parse(expectSuccess(await asAgent("agents", "policy", "--json")).stdout)).toMatchObject({ hitl_threshold_usdg: 1, daily_limit_usdg: 100 })
    expectD1(await asAgent("agents", "keys", "list", agentId), "not_agent_owner")
    expect(expectSuccess(await asAlice("send", "--to", "@alice/cli-bot", "--amount", "10")).stdout).toMatch(/confirmed/)
    // The agent's transfers above 1 USDG wait for Alice, who opens them with her own key (an agent's amounts are sealed to it).
    const firstHeld = await post(agentKey.api_key, "/v1/transfers", { to: "@bob", amount: "2.5", memo: "hold me" })
    const secondHeld = await post(agentKey.api_key, "/v1/transfers", { to: "@bob", amount: "1.75" })
    expect([firstHeld.status, secondHeld.status]).toEqual([202, 202])
    const pending = JSON.parse(expectSuccess(await asAlice("approvals", "list", "--json")).stdout) as {
      pending: Array<Record<string, unknown>>
    }
    expect(pending.pending.map((held) => ({ amount: held["amount"], memo: held["memo"], note_matches: held["note_matches"] }))).toEqual([
      { amount: "2.5", memo: "hold me", note_matches: true },
      { amount: "1.75", memo: "", note_matches: true }
    ])
    const approved = JSON.parse(expectSuccess(await asAlice("approvals", "approve", String(firstHeld.json["transaction_id"]), "--json")).stdout)
    expect(approved).toMatchObject({ status: "approved", transfer_status: "confirmed" })
    const rejected = JSON.parse(expectSuccess(await asAlice("approvals", "reject", String(secondHeld.json["transaction_id"]), "--json")).stdout)
    expect(rejected).toMatchObject({ status: "rejected" })
    expect(JSON.parse(expectSuccess(await asAlice("approvals", "list", "--json")).stdout)).toEqual({ pending: [] })
    // Both the agent and its owner read how each ended (D42), never with an amount.
    const state = JSON.parse(expectSuccess(await asAgent("agents", "transactions", "get", String(firstHeld.json["transaction_id"]), "--json")).stdout) as Record<string, unknown>
    expect(state).toMatchObject({ status: "approved", transfer_status: "confirmed" })
    expect(JSON.stringify(state)).not.toMatch(/2500000|hold me|"amount"/)
    expect(expectSuccess(await asAlice("agents", "transactions", "get", String(secondHeld.json["transaction_id"]))).stdout).toMatch(/^status\s+rejected$/m)
    // Replaced in one step (D56): a new key (named as the old one), and the old key refused at once.
    const rotated = JSON.parse(expectSuccess(await asAlice("agents", "keys", "rotate", agentId, issued["key_id"]!, "--json")).stdout) as Record<string, string>
    expect(rotated).toMatchObject({ name: "bot", mode: "test", account_id: agentId, replaced_key_id: issued["key_id"] })
    expect(rotated["api_key"]).toMatch(/^hc_test_/)
    expectD1(await asAgent("agents", "policy"), "unauthorized")
    const asRotated = (...args: ReadonlyArray<string>) => pps(rotated["api_key"]!, args)
    expect(JSON.parse(expectSuccess(await asRotated("agents", "policy", "--json")).stdout)).toMatchObject({ daily_limit_usdg: 100 })
    // A revoked key is not replaced again.
    expectD1(await asAlice("agents", "keys", "rotate", agentId, issued["key_id"]!), "key_not_found")
    // Revoked by its owner, the agent's key is refused on its next request.
    expect(expectSuccess(await asAlice("agents", "keys", "revoke", agentId, rotated["key_id"]!)).stdout).toBe(`revoked ${rotated["key_id"]}\n`)
    expectD1(await asRotated("agents", "policy"), "unauthorized")
    const unknown = await asAlice("approvals", "frobnicate")
    expect(unknown.exitCode).toBe(2)
    expect(unknown.stderr).toMatch(/^pps: unknown approvals command "frobnicate"/)
  })

  it("agents, policy and webhooks from the terminal", async () => {
    const created = JSON.parse(expectSuccess(await asAlice("agents", "create", "--name", "cli-two", "--policy", '{"daily_limit_usdg":10,"per_transaction_limit_usdg":5}', "--json")).stdout) as Record<string, string>
    expect(created["handle"]).toBe("@alice/cli-two")
    // D61: one page of GET /v1/agents, oldest first; the table names the next page's offset.
    const listed = JSON.parse(expectSuccess(await asAlice("agents", "list", "--limit", "100", "--json")).stdout) as {
      data: Array<{ account_id: string }>
      limit: number
      offset: number
      has_more: boolean
    }
    expect(listed).toMatchObject({ limit: 100, offset: 0, has_more: false })
    expect(listed.data.map((agent) => agent.account_id)).toContain(created["account_id"])
    const firstPage = expectSuccess(await asAlice("agents", "list", "--limit", "1")).stdout
    expect(firstPage).toMatch(/^account_id\s+handle\s+status\nacct_\S+\s+@alice\/\S+\s+active\nmore: --offset 1\n$/)
    expect(expectSuccess(await asAlice("agents", "list", "--offset", String(listed.data.length))).stdout).toMatch(/^account_id\s+handle\s+status\n$/)
    const changed = JSON.parse(expectSuccess(await asAlice("policy", "set", created["account_id"]!, "--policy", '{"daily_limit_usdg":8}', "--json")).stdout)
    expect(changed).toMatchObject({ daily_limit_usdg: 8, per_transaction_limit_usdg: 5 })
    expect(expectSuccess(await asAlice("policy", "get", created["account_id"]!)).stdout).toMatch(/^daily_limit_usdg\s+8$/m)
    const badPolicy = await asAlice("agents", "create", "--name", "x-bot", "--policy", "nope")
    expect(badPolicy).toMatchObject({ exitCode: 1 })
    expect(badPolicy.stderr).toMatch(/^pps: --policy must be a JSON object/)
    // The API's own refusal, as its D1 body.
    expectD1(await asAlice("policy", "set", created["account_id"]!, "--policy", '{"daily_limit_usdg":-1}'), "invalid_policy")

    const subscribed = expectSuccess(await asAlice("webhooks", "create", "--url", "https://example.com/hook", "--events", "transfer.confirmed", "--json"))
    const hook = JSON.parse(subscribed.stdout) as Record<string, string>
    expect(hook["secret"]).toMatch(/^whsec_/)
    // The key it drew is told on stderr; run again with it, the same subscription (and secret), not a second one.
    const drawn = [...subscribed.stderr.matchAll(keyLines)][0]?.[1] ?? "none"
    const again = expectSuccess(await asAlice("webhooks", "create", "--url", "https://example.com/hook", "--events", "transfer.confirmed", "--idempotency-key", drawn, "--json"))
    expect({ again: JSON.parse(again.stdout), stderr: again.stderr }).toEqual({ again: hook, stderr: "" })
    const hooks = JSON.parse(expectSuccess(await asAlice("webhooks", "list", "--json")).stdout) as { data: Array<Record<string, unknown>> }
    expect(hooks.data.map((entry) => entry["webhook_id"])).toContain(hook["webhook_id"])
    expect(JSON.stringify(hooks)).not.toContain(hook["secret"])
    const rotated = JSON.parse(expectSuccess(await asAlice("webhooks", "rotate-secret", hook["webhook_id"]!, "--json")).stdout) as Record<string, string>
    expect(rotated["secret"]).not.toBe(hook["secret"])
    expect(JSON.parse(expectSuccess(await asAlice("webhooks", "deliveries", hook["webhook_id"]!, "--json")).stdout)).toMatchObject({ data: [] })
    expect(expectSuccess(await asAlice("webhooks", "delete", hook["webhook_id"]!)).stdout).toBe(`deleted ${hook["webhook_id"]}\n`)
    expectD1(await asAlice("webhooks", "delete", hook["webhook_id"]!), "webhook_not_found")
  })

  it("listen forwards the account's events, signed with the secret it prints, and resumes after the server ends its stream or restarts", async () => {
    // A local receiver, as a developer's app would run one.
    const received: Array<{ readonly headers: http.IncomingHttpHeaders; readonly body: string }> = []
    const receiver = http.createServer((request, response) => {
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => {
        received.push({ headers: request.headers, body: Buffer.concat(chunks).toString("utf8") })
        response.writeHead(204).end()
      })
    })
    const port = await new Promise<number>((resolve) => receiver.listen(0, "127.0.0.1", () => resolve((receiver.address() as net.AddressInfo).port)))
    // D58: the signing secret is this account's on this machine (kept under HOME), the same every run.
    const printed = await pps(bob.api_key, ["listen", "--forward-to", "http://127.0.0.1:9/x", "--print-secret"])
    expect(printed.exitCode, printed.stderr).toBe(0)
    expect(printed.stdout).toMatch(/^whsec_[A-Za-z0-9+/=]+\n$/)
    expect((await pps(bob.api_key, ["listen", "--forward-to", "http://127.0.0.1:9/x", "--print-secret"])).stdout).toBe(printed.stdout)
    const listener = spawn(process.execPath, [...childNodeFlags(), path.join(repositoryRoot, "packages/sdk/src/cli.ts"), "listen", "--forward-to", `http://127.0.0.1:${port}/hook`, "--events", "transfer.initiated,transfer.confirmed", "--json"], {
      cwd: repositoryRoot,
      env: { ...childEnvironment(), HOME: aliceHome, PPS_API_KEY: bob.api_key, PPS_BASE_URL: server.baseUrl },
      stdio: ["ignore", "pipe", "pipe"]
    })
    const lines: Array<Record<string, unknown>> = []
    let pending = ""
    listener.stdout.on("data", (chunk: Buffer) => {
      pending += chunk.toString()
      const complete = pending.split("\n")
      pending = complete.pop() ?? ""
      for (const line of complete) if (line !== "") lines.push(JSON.parse(line) as Record<string, unknown>)
    })
    const waitFor = async (what: string, done: () => boolean, timeoutMs = 60_000) => {
      const deadline = Date.now() + timeoutMs
      while (!done()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; listen printed ${JSON.stringify(lines)}`)
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    }
    try {
      await waitFor("the ready line", () => lines.length > 0)
      const secret = String(lines[0]?.["secret"])
      expect(`${secret}\n`).toBe(printed.stdout)
      // The server ends the first stream (its lifetime) before any event arrived; paid while
      // listen waits to reconnect, the events must still come: it resumes from the cursor the
      // stream opened with, not from when it reconnects.
      await waitFor("the first stream's end", () => lines.some((line) => line["reconnecting"] === true))
      expect(lines.find((line) => line["reconnecting"] === true)?.["after"]).toMatch(/^pos_[0-9]+_[0-9]+$/)
      const first = await post(alice.api_key, "/v1/transfers", { to: "@bob", amount: "0.5" })
      expect(first.status).toBe(201)
      const statuses = () => lines.filter((line) => "status" in line).map((line) => line["status"])
      // What listen forwarded of the transfers this test made: an earlier test's transfer to Bob
      // that confirms meanwhile is a real event of his too, forwarded as it should be.
      const forwardedOf = (transferIds: ReadonlyArray<unknown>) =>
        received
          .map((delivery) => ({
            id: delivery.headers["webhook-id"],
            event: Webhook.verify({ payload: delivery.body, headers: delivery.headers as Record<string, string>, secret })
          }))
          .filter(({ event }) => "transfer_id" in event && transferIds.includes(event.transfer_id))
      await waitFor("two deliveries", () => forwardedOf([first.json["transfer_id"]]).length >= 2 && statuses().length >= 2)
      expect(forwardedOf([first.json["transfer_id"]]).map(({ event }) => event.event)).toEqual(["transfer.initiated", "transfer.confirmed"])
      expect(statuses().slice(0, 2)).toEqual(["204", "204"])

      // The server restarts: listen reconnects after the last event it forwarded, and misses nothing.
      await server.restart()
      const second = await post(alice.api_key, "/v1/transfers", { to: "@bob", amount: "0.25" })
      expect(second.status).toBe(201)
      const ours = [first.json["transfer_id"], second.json["transfer_id"]]
      await waitFor("two more deliveries", () => forwardedOf(ours).length >= 4)
      await new Promise((resolve) => setTimeout(resolve, 3_000))
      const ids = received.map((delivery) => delivery.headers["webhook-id"])
      expect(new Set(ids).size, `an event was forwarded twice: ${JSON.stringify(ids)} listen printed ${JSON.stringify(lines)}`).toBe(ids.length)
      expect(forwardedOf(ours).map(({ event }) => event.event), `forwarded: ${received.map((delivery) => delivery.body).join("\n")}`)
        .toEqual(["transfer.initiated", "transfer.confirmed", "transfer.initiated", "transfer.confirmed"])
      expect(statuses().every((status) => status === "204")).toBe(true)
      expect(lines.some((line) => line["reconnecting"] === true)).toBe(true)
    } finally {
      listener.kill("SIGINT")
      await new Promise((resolve) => listener.once("exit", resolve))
      await new Promise((resolve) => receiver.close(resolve))
    }
  }, 180_000)

  // Last: it replaces Bob's key, with which the tests above open his transfers.
  it("rotate-key replaces the registered key keeping the balance; the old key file is kept beside the new one (D55)", async () => {
    const before = expectSuccess(await asBob("balance")).stdout
    const oldFile = fs.readFileSync(bobKeyFile, "utf8")
    const rotated = JSON.parse(expectSuccess(await asBob("rotate-key")).stdout) as Record<string, string | null>
    expect(rotated).toMatchObject({ account_id: bob.account_id, key_file: bobKeyFile })
    expect(rotated["public_key"]).not.toBe((JSON.parse(oldFile) as Record<string, string>)["public_key"])
    expect(fs.readFileSync(String(rotated["replaced_key_file"]), "utf8")).toBe(oldFile)
    expect((JSON.parse(fs.readFileSync(bobKeyFile, "utf8")) as Record<string, string>)["public_key"]).toBe(rotated["public_key"])
    expect(fs.statSync(bobKeyFile).mode & 0o777).toBe(0o600)
    expect(fs.existsSync(`${bobKeyFile}.next`)).toBe(false)
    // The balance reads the same with the new key.
    expect(expectSuccess(await asBob("balance")).stdout).toBe(before)
  }, 120_000)
})

/** A loopback port nobody listens on (checked free, outside the ephemeral range: see scripts/freePort.ts). */
const closedPort = freePort

describe("pps command-line conventions", { timeout: 30_000 }, () => {
  // No server is needed: a wrong command line fails before any request.
  const offline = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) =>
    runPps(args, { PPS_API_KEY: "hc_test_unused", PPS_BASE_URL: "http://127.0.0.1:1", ...env })

  it("--help, -h and help print the usage on stdout and exit 0; a command's help is its own usage", async () => {
    const [long, short, word, command, commandWord] = await Promise.all([
      offline(["--help"]),
      offline(["-h"]),
      offline(["help"]),
      offline(["balance", "--help"]),
      offline(["help", "decrypt-transfer"])
    ])
    for (const run of [long, short, word]) {
      expect(run).toMatchObject({ exitCode: 0, stderr: "" })
      expect(run.stdout).toMatch(/^usage: pps <command>/)
      expect(run.stdout).toContain("  decrypt-transfer ID")
    }
    expect(command).toMatchObject({ exitCode: 0, stderr: "" })
    expect(command.stdout).toContain("  balance [--key-file FILE] [--json]")
    expect(long.stdout).toContain("  faucet [--amount DECIMAL] [--asset USDG]")
    expect(command.stdout).not.toContain("keygen")
    expect(commandWord.stdout).toContain("  decrypt-transfer ID")
    expect(commandWord.stdout).not.toContain("balance [")
  })

  it("no command, an unknown command or an unknown flag: a pps: line naming it, the usage on stderr, exit 2", async () => {
    const [none, unknown, unknownHelp, flag, missingValue] = await Promise.all([
      offline([]),
      offline(["frobnicate"]),
      offline(["help", "frobnicate"]),
      offline(["balance", "--frob"]),
      offline(["balance", "--key-file"])
    ])
    for (const run of [none, unknown, unknownHelp, flag, missingValue]) {
      expect(run).toMatchObject({ exitCode: 2, stdout: "" })
      expect(run.stderr).toMatch(/usage: pps <command>/)
    }
    expect(none.stderr).toMatch(/^usage: pps /)
    expect(unknown.stderr).toMatch(/^pps: unknown command "frobnicate"\nusage: pps /)
    expect(unknownHelp.stderr).toMatch(/^pps: unknown command "frobnicate"\n/)
    expect(flag.stderr).toMatch(/^pps: unknown option "--frob"\n/)
    expect(missingValue.stderr).toMatch(/^pps: --key-file needs a value\n/)
  })

  it("a command's help describes each of its flags and arguments; every command takes --json", async () => {
    const [send, transfers, all] = await Promise.all([offline(["help", "send"]), offline(["transfers", "--help"]), offline(["--help"])])
    for (const run of [send, transfers, all]) expect(run).toMatchObject({ exitCode: 0, stderr: "" })
    const flags = ["--to @HANDLE|0xADDRESS", "--amount DECIMAL", "--memo TEXT", "--asset USDG|ETH", "--public", "--idempotency-key KEY", "--key-file FILE", "--json"]
    for (const flag of flags) expect(send.stdout).toMatch(new RegExp(`\\n {6}${flag.replace(/[|]/g, "\\|")}\\s+\\S`))
    expect(send.stdout).not.toContain("  balance ")
    // A group's help is each of its commands in full.
    expect(transfers.stdout).toMatch(/\n {2}transfers list [^]*\n {6}--limit N\s+\S[^]*\n {2}transfers get ID [^]*\n {6}ID\s+\S/)
    // The commands' lines: between the usage line and `help [COMMAND]`, those not indented further.
    const lines = all.stdout.split("\n")
    const synopses = lines.slice(1, lines.findIndex((line) => line.startsWith("  help [COMMAND]"))).filter((line) => /^ {2}\S/.test(line))
    expect(synopses.length).toBeGreaterThanOrEqual(23)
    for (const line of synopses) expect(line).toContain("[--json]")
  })

  it("a mistake is one pps: line, then the usage of that command only, exit 2; an amount is not repeated", async () => {
    const [negative, group, surplus] = await Promise.all([
      offline(["send", "--to", "@bob", "--amount", "-1"]),
      offline(["transfers"]),
      offline(["decrypt-transfer", "tr_1", "tr_2"])
    ])
    for (const run of [negative, group, surplus]) expect(run).toMatchObject({ exitCode: 2, stdout: "" })
    expect(negative.stderr).toMatch(/^pps: --amount must be a decimal number[^\n]*\nusage: pps <command> \[options\]\n {2}send --to /)
    expect(negative.stderr).not.toMatch(/-1|keygen| {2}balance /)
    expect(group.stderr).toMatch(/^pps: transfers needs one of: list, get, refund\nusage: [^\n]*\n {2}transfers list [^]* {2}transfers get /)
    expect(group.stderr).not.toContain("  send ")
    expect(surplus.stderr).toMatch(/^pps: too many arguments for decrypt-transfer: "tr_2"\nusage: [^\n]*\n {2}decrypt-transfer ID /)
  })

  it("an unreachable server is named with its URL and the cause; a malformed PPS_BASE_URL is named", async () => {
    const url = `http://127.0.0.1:${await closedPort()}`
    const [refused, malformed, notHttp] = await Promise.all([
      // No retries (PPS_RETRY_BUDGET_MS=0): by default a refused connection is retried for 15 s, each retry told.
      offline(["balance"], { PPS_BASE_URL: url, PPS_RETRY_BUDGET_MS: "0" }),
      offline(["balance"], { PPS_BASE_URL: "not a url" }),
      offline(["balance"], { PPS_BASE_URL: "localhost:8080" })
    ])
    expect(refused).toMatchObject({ exitCode: 1, stdout: "" })
    expect(refused.stderr).toBe(
      `pps: cannot reach the server at ${url}: connection refused (is it running? set PPS_BASE_URL to the API's address)\n`
    )
    expect(malformed).toMatchObject({ exitCode: 1, stdout: "", stderr: 'pps: PPS_BASE_URL is not a URL: "not a url" (expected http://HOST:PORT)\n' })
    expect(notHttp.stderr).toMatch(/^pps: PPS_BASE_URL is not a URL: "localhost:8080"/)
  })
})
