/**
 * The client-sealed transfer against a malicious api tier: the real server (child process,
 * embedded PGlite, anvil, guardian) behind a proxy that rewrites the prepare answer, as an
 * api tier that wants to read amounts would. A substituted contract (one whose getters
 * answer the attacker's key), chain id, recipient address or key is refused before
 * anything is sealed or sent; the honest path still pays. An agent's key alone (no key of
 * anyone's on its machine) sends from `Pps`, `ApiClient.sealedTransfer` and `pps send`, its
 * copy sealed to its owner's key: under the threshold sent, above it held, over a limit refused
 * naming the rule and the policy field; under trust "chain" the owner's key is checked against
 * the pinned owner's wallet; no amount or memo on the wire. Also: the prepare step's
 * Idempotency-Key fits D6 for any caller key, and the facade waits out 409
 * `idempotency_key_in_progress` with the same key instead of failing a payment in flight.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { EncryptionKey } from "@pps/crypto"
import { createPublicClient, getAddress, http } from "viem"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Effect } from "effect"
import { canaryForms, startRecordingProxy } from "../../server/test/support/recordingProxy.ts"
import { defaultTimeoutMs } from "../src/Pps.ts"
import * as Client from "../src/Client.ts"
import * as Confidential from "../src/Confidential.ts"
import { ApiClient, Errors, KeyFile, Pps, type PpsTypes } from "../src/index.ts"
import * as SealedTransfers from "../src/SealedTransfers.ts"
import { transferOf } from "./support/created.ts"
import { type Rewrite, type RewritingProxy, startRewritingProxy } from "./support/rewritingProxy.ts"
import { anvilRpcUrl, chainRpc, runPps, type ServerProcess, startServer, withoutKeyLine } from "./support/server.ts"

let server: ServerProcess
let proxy: RewritingProxy
let rpcUrl: string
type Account = { readonly account_id: string; readonly api_key: string; readonly address: string }
let alice: Account
let bob: Account
let mallory: Account
let deployment: { readonly chainId: number; readonly contracts: { readonly USDG: string; readonly ETH: string } }
const aliceKey = EncryptionKey.generate()
const bobKey = EncryptionKey.generate()
const malloryKey = EncryptionKey.generate()
/** The malicious api tier's own key pair: what it would like amounts sealed to. */
const attackerKey = EncryptionKey.generate()
/** A contract the attacker controls on the real chain: every call answers its key. */
const impostor = getAddress("0x00000000000000000000000000000000000bad01")

const hex = (bytes: Uint8Array) => `0x${Buffer.from(bytes).toString("hex")}`

const rpc = (method: string, params: ReadonlyArray<unknown>): Promise<unknown> => chainRpc(rpcUrl, method, params)

/** Runtime code that returns the 64-byte point (x, y) whatever is called: `guardianEncryptionKey()` and `encryptionKeyOf(a)` alike. */
const constantKeyContract = (publicKey: Uint8Array): string => {
  const word = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex")
  // PUSH32 x, PUSH1 0, MSTORE, PUSH32 y, PUSH1 32, MSTORE, PUSH1 64, PUSH1 0, RETURN
  return `0x7f${word(publicKey.slice(0, 32))}600052` + `7f${word(publicKey.slice(32, 64))}602052` + `60406000f3`
}

const account = async (handle: string, keyPair: EncryptionKey.KeyPair): Promise<Account> => {
  const created = await server.createAccount(handle)
  const client = Client.make({ baseUrl: server.baseUrl, apiKey: created.api_key })
  await Confidential.registerKey(client, keyPair)
  const status = await Confidential.encryptionKeyStatus(client)
  return { ...created, address: status.account_address }
}

beforeAll(async () => {
  // One test holds blocks back itself (`evm_setIntervalMining`), so the node mines on its interval.
  server = await startServer({ env: { EMBEDDED_CHAIN_MINING: "interval" } })
  rpcUrl = anvilRpcUrl(server.dataDir)
  alice = await account("alice", aliceKey)
  bob = await account("bob", bobKey)
  mallory = await account("mallory", malloryKey)
  // The deployment the operator publishes, pinned by the client: read here from the honest server.
  const status = await Confidential.encryptionKeyStatus(Client.make({ baseUrl: server.baseUrl, apiKey: alice.api_key }))
  deployment = { chainId: status.chain_id, contracts: { USDG: status.contracts["USDG"]!, ETH: status.contracts["ETH"]! } }
  const granted = await fetch(`${server.baseUrl}/v1/test/faucet`, {
    method: "POST",
    headers: { authorization: `Bearer ${alice.api_key}`, "content-type": "application/json" },
    body: JSON.stringify({ amount: "100" })
  })
  expect(granted.status).toBe(200)
  await rpc("anvil_setCode", [impostor, constantKeyContract(attackerKey.publicKey)])
  proxy = await startRewritingProxy(server.baseUrl)
}, 180_000)

afterAll(async () => {
  await proxy?.close()
  await server?.stop()
}, 30_000)

const amount = "7.654321"
const memo = "canary-h2-memo"
const secrets = canaryForms({ decimal: amount, baseUnits: 7_654_321n }, memo)

/** Every check that can be made: the RPC, the pinned deployment, and nothing sent otherwise. */
const checked = (): SealedTransfers.SendOptions => ({ senderKey: aliceKey.publicKey, rpcUrl, deployment, trust: "chain" })

/**
 * One send through the malicious proxy with its prepare answer rewritten: the error it
 * ends with, and the requests the api tier saw.
 */
const attempt = async (rewrite: Rewrite | undefined, to: string, options: SealedTransfers.SendOptions) => {
  const before = proxy.exchanges.length
  proxy.rewritePrepare(rewrite)
  try {
    const client = Client.make({ baseUrl: proxy.baseUrl, apiKey: alice.api_key })
    const error = await SealedTransfers.send(client, { to, amount, memo }, options).then(() => undefined, (error: unknown) => error)
    return { error, seen: proxy.exchanges.slice(before).map((exchange) => `${exchange.method} ${exchange.path}`) }
  } finally {
    proxy.rewritePrepare(undefined)
  }
}

/** Refused with `reason` and a message matching `names`, no amount or memo in it, and only the prepare sent. */
const expectRefused = (
  outcome: { readonly error: unknown; readonly seen: ReadonlyArray<string> },
  reason: SealedTransfers.SealedTransferFailure,
  names: RegExp,
  seen: ReadonlyArray<string> = ["POST /v1/transfers/prepare"]
) => {
  expect(outcome.error).toBeInstanceOf(SealedTransfers.SealedTransferError)
  const error = outcome.error as SealedTransfers.SealedTransferError
  expect(error.reason).toBe(reason)
  expect(error.message).toMatch(names)
  for (const form of secrets) expect(error.message).not.toContain(form)
  // Nothing was sealed to the substituted answer, so no create went out.
  expect(outcome.seen).toEqual(seen)
}

describe("SealedTransfers against a malicious api tier", { timeout: 60_000 }, () => {
  it("the honest path pays, checked against the pinned deployment and the chain, to a handle and to a 0x address", async () => {
    const before = proxy.exchanges.length
    const client = Client.make({ baseUrl: proxy.baseUrl, apiKey: alice.api_key })
    const toHandle = await SealedTransfers.send(client, { to: "@bob", amount, memo }, checked())
    expect(toHandle.status).toBe(201)
    expect(toHandle.body).toMatchObject({ status: "confirmed", to: "@bob", confidential: true })
    const toAddress = await SealedTransfers.send(client, { to: bob.address.toLowerCase(), amount: "0.25" }, checked())
    expect(toAddress.body).toMatchObject({ status: "confirmed", confidential: true })
    const wire = proxy.exchanges.slice(before).map((exchange) => exchange.body).join("\n")
    expect(wire).toContain("sealed")
    for (const form of secrets) expect(wire).not.toContain(form)
    const opened = await Confidential.decryptTransfer(
      Client.make({ baseUrl: server.baseUrl, apiKey: bob.api_key }),
      bobKey,
      (toHandle.body as PpsTypes.Transfer).transfer_id
    )
    expect(opened).toMatchObject({ amount: 7_654_321n, memo })
  })

  it("refuses a substituted contract whose getters answer the attacker's key", async () => {
    // The attack the old check let through: the impostor holds the attacker's key for the guardian and for everyone.
    const chain = createPublicClient({ transport: http(rpcUrl) })
    const abi = [{ type: "function", name: "guardianEncryptionKey", stateMutability: "view", inputs: [], outputs: [{ type: "tuple", components: [{ name: "x", type: "uint256" }, { name: "y", type: "uint256" }] }] }] as const
    const held = await chain.readContract({ address: impostor, abi, functionName: "guardianEncryptionKey" })
    expect(`0x${held.x.toString(16).padStart(64, "0")}${held.y.toString(16).padStart(64, "0")}`).toBe(hex(attackerKey.publicKey))

    const substitute: Rewrite = (answer) => ({ ...answer, contract: impostor, guardian_key: hex(attackerKey.publicKey), recipient_key: hex(attackerKey.publicKey) })
    expectRefused(await attempt(substitute, "@bob", checked()), "contract_mismatch", new RegExp(`${impostor}.*${deployment.contracts.USDG}`, "i"))
    // Without a pin an RPC URL could only ask the contract the API names: refused before any request.
    expectRefused(
      await attempt(substitute, "@bob", { senderKey: aliceKey.publicKey, rpcUrl }),
      "deployment_unpinned",
      /deployment\.contracts\.USDG/,
      []
    )
    expectRefused(await attempt(substitute, "@bob", { senderKey: aliceKey.publicKey, deployment, trust: "chain" }), "deployment_unpinned", /rpcUrl/, [])
    // The pin alone (no RPC) still catches the contract.
    expectRefused(await attempt(substitute, "@bob", { senderKey: aliceKey.publicKey, deployment }), "contract_mismatch", /pinned/)
  })

  it("refuses a substituted chain id: against the pin, and against the RPC's chain", async () => {
    const otherChain: Rewrite = (answer) => ({ ...answer, chain_id: 1 })
    expectRefused(await attempt(otherChain, "@bob", checked()), "chain_mismatch", new RegExp(`chain id 1;.*chain ${deployment.chainId}`))
    // A pin that agrees with the answer but not with the chain the RPC serves.
    expectRefused(
      await attempt(otherChain, "@bob", { ...checked(), deployment: { ...deployment, chainId: 1 } }),
      "chain_mismatch",
      new RegExp(`RPC's chain is ${deployment.chainId}`)
    )
  })

  it("refuses a substituted recipient address for a 0x `to`, even one whose key is registered on the real contract", async () => {
    // Mallory's key is what the real contract holds for Mallory's address: the key check alone would pass.
    const toMallory: Rewrite = (answer) => ({ ...answer, recipient_address: mallory.address, recipient_key: hex(malloryKey.publicKey) })
    const names = new RegExp(`${mallory.address}.*${bob.address}`)
    expectRefused(await attempt(toMallory, bob.address, checked()), "recipient_address_mismatch", names)
    // A 0x `to` pins itself: refused with no RPC and no deployment too.
    expectRefused(await attempt(toMallory, bob.address, { senderKey: aliceKey.publicKey }), "recipient_address_mismatch", names)
    // A handle is resolved by the api tier unless the caller pins its address.
    expectRefused(await attempt(toMallory, "@bob", { ...checked(), recipientAddress: bob.address }), "recipient_address_mismatch", names)
  })

  it("refuses a substituted guardian or recipient key that the pinned contract does not hold", async () => {
    expectRefused(
      await attempt((answer) => ({ ...answer, guardian_key: hex(attackerKey.publicKey) }), "@bob", checked()),
      "guardian_key_mismatch",
      new RegExp(deployment.contracts.USDG)
    )
    expectRefused(
      await attempt((answer) => ({ ...answer, recipient_key: hex(attackerKey.publicKey) }), "@bob", checked()),
      "recipient_key_mismatch",
      new RegExp(`${deployment.contracts.USDG}.*${bob.address}`)
    )
  })

  it("the command line pins the deployment from PPS_CHAIN_ID and PPS_CONTRACT_USDG", async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), "pps-sealed-"))
    const keyFile = path.join(home, "alice.key")
    KeyFile.write(keyFile, { accountId: alice.account_id, keyPair: aliceKey }, { overwrite: false })
    const pps = (env: Readonly<Record<string, string>>) =>
      runPps(["send", "--to", "@bob", "--amount", amount, "--memo", memo, "--key-file", keyFile], {
        HOME: home,
        PPS_API_KEY: alice.api_key,
        PPS_BASE_URL: proxy.baseUrl,
        ...env
      }).then(withoutKeyLine)
    const pinned = { PPS_RPC_URL: rpcUrl, PPS_CHAIN_ID: String(deployment.chainId), PPS_CONTRACT_USDG: deployment.contracts.USDG, PPS_TRUST: "chain" }
    try {
      const honest = await pps(pinned)
      expect(honest.stderr).toBe("")
      expect(honest.stdout).toMatch(/^status\s+confirmed$/m)

      proxy.rewritePrepare((answer) => ({ ...answer, contract: impostor, guardian_key: hex(attackerKey.publicKey) }))
      const before = proxy.exchanges.length
      const refused = await pps(pinned)
      proxy.rewritePrepare(undefined)
      expect(refused.exitCode).toBe(1)
      expect(refused.stderr).toMatch(new RegExp(`^pps: the API answered USDG contract ${impostor}`, "i"))
      expect(proxy.exchanges.slice(before).map((exchange) => exchange.path)).not.toContain("/v1/transfers")

      const unpinned = await pps({ PPS_RPC_URL: rpcUrl })
      expect(unpinned.exitCode).toBe(1)
      expect(unpinned.stderr).toMatch(/^pps: rpcUrl checks the keys against the pinned USDG contract/)
      const badChain = await pps({ PPS_CHAIN_ID: "main", PPS_CONTRACT_USDG: deployment.contracts.USDG })
      expect(badChain.exitCode).toBe(1)
      expect(badChain.stderr).toMatch(/^pps: PPS_CHAIN_ID is not a chain id/)
      const noChain = await pps({ PPS_CONTRACT_USDG: deployment.contracts.USDG })
      expect(noChain.stderr).toMatch(/^pps: PPS_CONTRACT_USDG and PPS_CONTRACT_ETH need PPS_CHAIN_ID/)
      const badTrust = await pps({ PPS_TRUST: "everyone" })
      expect(badTrust.stderr).toMatch(/^pps: PPS_TRUST must be api or chain/)
    } finally {
      proxy.rewritePrepare(undefined)
      fs.rmSync(home, { recursive: true, force: true })
    }
  })
})

describe("an agent's sealed transfers, with its API key alone", { timeout: 90_000 }, () => {
  // Threshold 5, per transaction 10: 4 is sent, 6 is held, 11 is refused.
  let agent: { readonly account_id: string; readonly handle: string }
  let agentKey: string
  /** The owner's wallet, as issuing the agent's key prints it (D44): what a client pins. */
  let ownerWallet: string
  beforeAll(async () => {
    const owner = new Pps({ apiKey: alice.api_key, baseUrl: server.baseUrl, keyPair: aliceKey })
    agent = await owner.agents.create({ name: "sealer", spend_policy: { daily_limit_usdg: 60, per_transaction_limit_usdg: 10, hitl_threshold_usdg: 5 } })
    transferOf(await owner.transfers.create({ to: agent.handle, amount: "40" }))
    const issued = await owner.agents.keys.create(agent.account_id, { name: "sealer" })
    expect(issued.owner_address).toBe(alice.address)
    ;[agentKey, ownerWallet] = [issued.api_key, issued.owner_address]
  }, 60_000)

  /** The requests the api tier saw since `mark`, as `METHOD path`. */
  const seenSince = (mark: number) => proxy.exchanges.slice(mark).map((exchange) => `${exchange.method} ${exchange.path}`)

  it("Pps seals to the owner's key as answered: sent under the threshold, held above it, refused over a limit with the rule and the field", async () => {
    const bot = new Pps({ apiKey: agentKey, baseUrl: proxy.baseUrl })
    const mark = proxy.exchanges.length
    const memo = "agent canary memo 77"
    const sent = transferOf(await bot.transfers.create({ to: "@bob", amount: "1.234567", memo }, { idempotencyKey: "agent-pays-1" }))
    expect(sent).toMatchObject({ status: "confirmed", confidential: true, to: "@bob" })
    // The same idempotency key again: the first transfer (this instance seals it identically), not a second payment.
    const replayed = transferOf(await bot.transfers.create({ to: "@bob", amount: "1.234567", memo }, { idempotencyKey: "agent-pays-1" }))
    expect(replayed.transfer_id).toBe(sent.transfer_id)
    // The same arguments without a key: a new payment.
    const another = transferOf(await bot.transfers.create({ to: "@bob", amount: "1.234567", memo }))
    expect(another.transfer_id).not.toBe(sent.transfer_id)
    const wire = proxy.exchanges.slice(mark).map((exchange) => exchange.body).join("\n")
    expect(wire).toContain("sealed")
    for (const form of canaryForms({ decimal: "1.234567", baseUnits: 1_234_567n }, memo)) expect(wire).not.toContain(form)
    // The agent's copy opens with its owner's key, Bob's with his.
    const owner = new Pps({ apiKey: alice.api_key, baseUrl: server.baseUrl, keyPair: aliceKey })
    expect(await owner.transfers.decrypt(sent.transfer_id)).toMatchObject({ role: "sender", amount: 1_234_567n, memo })
    expect(await new Pps({ apiKey: bob.api_key, baseUrl: server.baseUrl, keyPair: bobKey }).transfers.decrypt(sent.transfer_id))
      .toMatchObject({ amount: 1_234_567n, memo })

    const held = await bot.transfers.create({ to: "@bob", amount: "6" })
    expect(held).toMatchObject({ kind: "held", held: { status: "pending_approval", agent: agent.handle, confidential: true } })
    const refused = await bot.transfers.create({ to: "@bob", amount: "11" }).catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(Errors.PolicyViolation)
    const violation = refused as Errors.ApiError
    expect({ status: violation.status, reason: violation.reason, param: violation.param })
      .toEqual({ status: 403, reason: "per_transaction_limit_exceeded", param: "per_transaction_limit_usdg" })

    // An account's key without its key pair is refused before the prepare step: its copy is sealed to its own key.
    const before = proxy.exchanges.length
    const keyless = await new Pps({ apiKey: alice.api_key, baseUrl: proxy.baseUrl }).transfers.create({ to: "@bob", amount: "1" })
      .catch((error: unknown) => error)
    expect(keyless).toBeInstanceOf(Errors.SealedTransferError)
    expect((keyless as Errors.SealedTransferError).reason).toBe("sender_key_missing")
    expect(seenSince(before)).toEqual(["GET /v1/accounts/me"])
  })

  it("under trust chain the owner's key is checked against the pinned owner's wallet; a wrong wallet is refused before the create", async () => {
    const chained = (ownerWallet: string | undefined) =>
      new Pps({ apiKey: agentKey, baseUrl: proxy.baseUrl, rpcUrl, deployment, trust: "chain", ...(ownerWallet === undefined ? {} : { ownerWallet }) })
    expect(transferOf(await chained(ownerWallet).transfers.create({ to: "@bob", amount: "0.5" })).status).toBe("confirmed")

    const refusedWith = async (pps: Pps) => {
      const mark = proxy.exchanges.length
      const error = await pps.transfers.create({ to: "@bob", amount, memo }).catch((error: unknown) => error)
      expect(error).toBeInstanceOf(Errors.SealedTransferError)
      for (const form of secrets) expect((error as Error).message).not.toContain(form)
      return { error: error as Errors.SealedTransferError, seen: seenSince(mark) }
    }
    // Bob's wallet holds Bob's key, not the one the agent's copy would be sealed to.
    const wrongWallet = await refusedWith(chained(bob.address))
    expect(wrongWallet.error.reason).toBe("sender_key_mismatch")
    expect(wrongWallet.error.message).toContain(`the owner's wallet ${bob.address}`)
    expect(wrongWallet.seen).toEqual(["GET /v1/accounts/me", "POST /v1/transfers/prepare"])
    // A malicious api tier answering its own key as the owner's: refused against the right wallet.
    proxy.rewritePrepare((answer) => ({ ...answer, sender_key: hex(attackerKey.publicKey) }))
    try {
      const substituted = await refusedWith(chained(ownerWallet))
      expect(substituted.error.reason).toBe("sender_key_mismatch")
      expect(substituted.seen).not.toContain("POST /v1/transfers")
    } finally {
      proxy.rewritePrepare(undefined)
    }
    // No wallet pinned: nothing can vouch for the owner's key, so nothing is asked.
    const unpinned = await refusedWith(chained(undefined))
    expect(unpinned.error.reason).toBe("deployment_unpinned")
    expect(unpinned.error.message).toMatch(/ownerWallet/)
    expect(unpinned.seen).toEqual([])
  })

  it("the Effect surface: ApiClient.sealedTransfer with the agent's key, a refusal as the contract's PolicyViolation", async () => {
    const layer = ApiClient.layer({ apiKey: agentKey, baseUrl: proxy.baseUrl })
    const created = await Effect.runPromise(
      ApiClient.sealedTransfer({ to: "@bob", amount: "0.75", memo: "effect" }).pipe(ApiClient.withIdempotencyKey("agent-effect-1"), Effect.provide(layer))
    )
    expect(created).toMatchObject({ kind: "transfer", transfer: { status: "confirmed", confidential: true } })
    const refusal = await Effect.runPromise(
      ApiClient.sealedTransfer({ to: "@bob", amount: "10.5" }).pipe(
        Effect.map(() => "sent"),
        Effect.catchTag("PolicyViolation", (refused) => Effect.succeed(`${refused.error.reason} ${refused.error.param}`)),
        Effect.provide(layer)
      )
    )
    expect(refusal).toBe("per_transaction_limit_exceeded per_transaction_limit_usdg")
  })

  it("pps send with the agent's key alone: sent (no amount or memo on the wire), held, refused in words; keygen and register-key exit 2", async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), "pps-agent-"))
    const recording = await startRecordingProxy(server.baseUrl)
    const asAgent = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}) =>
      runPps(args, { HOME: home, PPS_API_KEY: agentKey, PPS_BASE_URL: recording.baseUrl, ...env }).then(withoutKeyLine)
    try {
      const memo = "agent cli canary 4242"
      const sent = await asAgent(["send", "--to", "@bob", "--amount", "4.321", "--memo", memo])
      expect(sent.stderr).toBe("")
      expect(sent.stdout).toMatch(/^status\s+confirmed$/m)
      expect(sent.stdout).toMatch(/^confidential\s+true$/m)
      const wire = recording.sent().toString("latin1")
      expect(wire).toContain("POST /v1/transfers ")
      for (const form of canaryForms({ decimal: "4.321", baseUnits: 4_321_000n }, memo)) expect(wire).not.toContain(form)
      // Nothing of anyone's key on the agent's machine: no key file read or written.
      expect(fs.existsSync(path.join(home, ".pps"))).toBe(false)

      const held = await asAgent(["send", "--to", "@bob", "--amount", "6"])
      expect(held.exitCode).toBe(0)
      expect(held.stdout).toMatch(/^transaction_id\s+atx_[0-9A-Z]{26}$/m)
      expect(held.stdout).toMatch(/^status\s+pending_approval$/m)
      expect(held.stdout).toMatch(/^expires_at\s+\d{4}-/m)
      expect(held.stdout).toMatch(/waiting for the owner's approval until \d{4}-/)

      const refused = await asAgent(["send", "--to", "@bob", "--amount", "11"])
      expect(refused).toMatchObject({ exitCode: 1, stdout: "" })
      expect(refused.stderr).toMatch(
        /^pps: refused by the agent's spend policy: the amount is above the agent's per-transaction limit \(rule per_transaction_limit_exceeded, policy field per_transaction_limit_usdg\); nothing was paid \(request req_[0-9A-Z]{26}\)\n$/
      )

      for (const command of ["keygen", "register-key"]) {
        const refusedKey = await asAgent([command])
        expect(refusedKey.exitCode, refusedKey.stderr).toBe(2)
        expect(refusedKey.stdout).toBe("")
        expect(refusedKey.stderr).toMatch(new RegExp(`^pps: PPS_API_KEY is the key of agent ${agent.handle}: agents use their owner's key`))
        expect(refusedKey.stderr).toContain(`usage: pps <command> [options]\n  ${command}`)
      }
      expect(fs.existsSync(path.join(home, ".pps"))).toBe(false)

      // Under trust chain, a wrong owner's wallet: refused, and the create never sent.
      const mark = proxy.exchanges.length
      const pinned = { PPS_RPC_URL: rpcUrl, PPS_CHAIN_ID: String(deployment.chainId), PPS_CONTRACT_USDG: deployment.contracts.USDG, PPS_TRUST: "chain" }
      const wrongWallet = await asAgent(["send", "--to", "@bob", "--amount", "1", "--owner-wallet", bob.address], { ...pinned, PPS_BASE_URL: proxy.baseUrl })
      expect(wrongWallet.exitCode).toBe(1)
      expect(wrongWallet.stderr).toMatch(new RegExp(`^pps: the sender key the API answered is not the one contract .* holds for the owner's wallet ${bob.address}`))
      expect(seenSince(mark)).not.toContain("POST /v1/transfers")
    } finally {
      await recording.close()
      fs.rmSync(home, { recursive: true, force: true })
    }
  })
})

describe("Idempotency-Keys of a sealed create", { timeout: 60_000 }, () => {
  it("derives a prepare key within D6's 255 characters from any caller key, the same on a replay", async () => {
    const pps = new Pps({ apiKey: alice.api_key, baseUrl: proxy.baseUrl, keyPair: aliceKey })
    const prepareKeys = async (key: string) => {
      const before = proxy.exchanges.length
      const transfer = transferOf(await pps.transfers.create({ to: "@bob", amount: "0.01" }, { idempotencyKey: key }))
      const keys = proxy.exchanges.slice(before).filter((exchange) => exchange.path === "/v1/transfers/prepare").map((exchange) => exchange.key)
      return { transfer, keys }
    }
    // 255 characters: the longest key D6 allows; with "/prepare" appended it would be refused.
    const longest = `long-${"k".repeat(250)}`
    const first = await prepareKeys(longest)
    expect(first.transfer.status).toBe("confirmed")
    expect(first.keys).toHaveLength(1)
    expect(first.keys[0]!.length).toBeLessThanOrEqual(255)
    const replay = await prepareKeys(longest)
    expect(replay.transfer.transfer_id).toBe(first.transfer.transfer_id)
    expect(replay.keys).toEqual(first.keys)
    // A key that leaves room keeps the suffixed form.
    const roomy = `roomy-${"k".repeat(241)}`
    expect((await prepareKeys(roomy)).keys).toEqual([`${roomy}/prepare`])
  })
})

describe("the facade and a payment still in flight", { timeout: 120_000 }, () => {
  it("its per-attempt timeout outlives the server's longest create", () => {
    // Guardian authorize (30 s, GuardianClient.requestTimeoutMs) + D14's wait (5 s) + guardian settle (30 s).
    expect(defaultTimeoutMs).toBeGreaterThan(30_000 + 5_000 + 30_000)
  })

  it("waits out 409 idempotency_key_in_progress with the same key and answers the one transfer", async () => {
    const counted = new Pps({ apiKey: alice.api_key, baseUrl: server.baseUrl, keyPair: aliceKey })
    const count = async () => {
      let n = 0
      for await (const _ of counted.transfers.list()) n++
      return n
    }
    const transfersBefore = await count()
    // No blocks: the create waits D14's full 5 s on the server, long after this client's attempt gave up.
    await rpc("evm_setIntervalMining", [0])
    const before = proxy.exchanges.length
    let transfer: PpsTypes.Transfer
    try {
      const pps = new Pps({ apiKey: alice.api_key, baseUrl: proxy.baseUrl, keyPair: aliceKey, timeoutMs: 1_500 })
      transfer = transferOf(await pps.transfers.create({ to: "@bob", amount: "0.5" }))
    } finally {
      await rpc("evm_setIntervalMining", [1])
    }
    const creates = proxy.exchanges.slice(before).filter((exchange) => exchange.method === "POST" && exchange.path === "/v1/transfers")
    expect(creates.length).toBeGreaterThanOrEqual(3)
    expect(new Set(creates.map((exchange) => exchange.key)).size).toBe(1)
    expect(creates.some((exchange) => exchange.code === "idempotency_key_in_progress")).toBe(true)
    // The first attempt ran to its end on the server; the last retry was answered with its outcome.
    expect(creates[0]!.status).toBe(201)
    expect(creates.at(-1)!.status).toBe(201)
    expect(["pending", "confirmed"]).toContain(transfer.status)
    expect(await count()).toBe(transfersBefore + 1)
    // Settles once blocks come again.
    for (let i = 0; i < 40 && (await counted.transfers.get(transfer.transfer_id)).status === "pending"; i++) {
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
    expect((await counted.transfers.get(transfer.transfer_id)).status).toBe("confirmed")
  })
})
