/**
 * D51 against a real anvil: a debit needs the sender's own signature beside the guardian's.
 * For `confidentialTransfer` and `publicTransfer` (the batch's items are in
 * ConfidentialTokenBatch.test.ts): the guardian's attestation alone reverts, the account's
 * signature alone reverts, both apply, an account signature over another transfer reverts, and a
 * replay reverts. Then "every guardian path": a separate attacker process is given the guardian's
 * secrets (signing and encryption) and a funded wallet of its own, tries every state-changing
 * function, and moves no unit of the victim's balance nor of the pool.
 */
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Address, encodeFunctionData, type Hex, type LocalAccount, maxUint256, numberToHex } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import * as ConfidentialToken from "../src/artifacts/ConfidentialToken.ts"
import * as TestUSDG from "../src/artifacts/TestUSDG.ts"
import type * as Faucet from "../src/faucet.ts"
import type { Chain } from "./helpers/chain.ts"
import { type Party, startTokenChain, type TokenChain } from "./helpers/parties.ts"
import {
  type ConfidentialTransferRequest,
  confidentialRequest,
  publicRequest,
  type PublicTransferRequest,
  signConfidential,
  signPublic
} from "./helpers/transfers.ts"

const abi = ConfidentialToken.abi

let chain: Chain
let token: Address
let faucet: Faucet.Faucet
let relayer: LocalAccount
let fundedParty: TokenChain["fundedParty"]
let balanceOf: TokenChain["balanceOf"]
let decryptsTo: TokenChain["expectDecryptsTo"]

beforeAll(async () => {
  ;({ chain, token, faucet, relayer, fundedParty, balanceOf, expectDecryptsTo: decryptsTo } = await startTokenChain())
})

afterAll(async () => {
  await chain?.stop()
})

const domain = () => ({ chainId: chain.chainId, contract: token })

const usdgOf = (account: Address) =>
  chain.client.readContract({ address: chain.addresses.usdg, abi: TestUSDG.abi, functionName: "balanceOf", args: [account] })
const nonceUsed = (account: Address, nonce: bigint) =>
  chain.client.readContract({ address: token, abi, functionName: "isNonceUsed", args: [account, nonce] })

const expectDecryptsTo = (party: Party, amount: bigint) => decryptsTo(party.account.address, party.key, amount)

/**
 * The five cases of the acceptance list for one debit path: `make` builds a fresh request,
 * `sign` signs one (the guardian's attestation and the account's authorisation are the same
 * typed data), `data` encodes the call.
 */
const everyCase = <R extends { readonly from: Address; readonly nonce: bigint }>(path: {
  readonly make: () => Promise<R>
  readonly sign: (signer: LocalAccount, request: R) => Promise<Hex>
  readonly data: (request: R, guardianSignature: Hex, accountSignature: Hex) => Hex
  readonly sender: () => Party
  readonly applied: () => Promise<void>
}) => {
  it("the guardian's attestation alone reverts (its signature in both places, or a stranger's as the account's)", async () => {
    const request = await path.make()
    const attestation = await path.sign(chain.guardian, request)
    const stranger = privateKeyToAccount(generatePrivateKey())
    const call = (accountSignature: Hex) => ({ account: relayer.address, to: token, data: path.data(request, attestation, accountSignature) })
    await chain.expectRevert(call(attestation), "AccountSignatureInvalid", [request.from])
    await chain.expectRevert(call(await path.sign(stranger, request)), "AccountSignatureInvalid", [request.from])
    await expect(chain.send(relayer, token, path.data(request, attestation, attestation), 400_000n)).rejects.toThrow(/reverted/)
    expect(await nonceUsed(request.from, request.nonce)).toBe(false)
  })

  it("the account's signature alone reverts", async () => {
    const request = await path.make()
    const authorisation = await path.sign(path.sender().account, request)
    await chain.expectRevert({ account: relayer.address, to: token, data: path.data(request, authorisation, authorisation) }, "GuardianSignatureInvalid")
    // Sent by the account itself: msg.sender authorises nothing either.
    await chain.expectRevert(
      { account: path.sender().account.address, to: token, data: path.data(request, authorisation, authorisation) },
      "GuardianSignatureInvalid"
    )
  })

  it("an account signature over another transfer reverts", async () => {
    const request = await path.make()
    const other = await path.make()
    const call = { account: relayer.address, to: token, data: path.data(request, await path.sign(chain.guardian, request), await path.sign(path.sender().account, other)) }
    await chain.expectRevert(call, "AccountSignatureInvalid", [request.from])
  })

  it("both apply, once: the same call again reverts with NonceUsed", async () => {
    const request = await path.make()
    const data = path.data(request, await path.sign(chain.guardian, request), await path.sign(path.sender().account, request))
    const receipt = await chain.send(relayer, token, data)
    expect(receipt.status).toBe("success")
    expect(receipt.from).toBe(relayer.address.toLowerCase())
    await path.applied()
    await chain.expectRevert({ account: relayer.address, to: token, data }, "NonceUsed", [request.from, request.nonce])
    await expect(chain.send(relayer, token, data, 400_000n)).rejects.toThrow(/reverted/)
    await path.applied()
  })
}

describe("confidentialTransfer needs the sender's signature (D51)", () => {
  let alice: Party
  let bob: Party
  beforeAll(async () => {
    alice = await fundedParty(1_000n)
    bob = await fundedParty(0n)
  })
  everyCase<ConfidentialTransferRequest>({
    make: async () =>
      confidentialRequest({
        from: alice.account.address,
        to: bob.account.address,
        amount: 100n,
        fromKey: alice.key,
        toKey: bob.key,
        guardianKey: chain.guardianKey,
        nonce: alice.nextNonce++,
        deadline: (await chain.latestTimestamp()) + 3_600n
      }),
    sign: (signer, request) => signConfidential(signer, domain(), request),
    data: (request, guardianSignature, accountSignature) =>
      encodeFunctionData({ abi, functionName: "confidentialTransfer", args: [request, guardianSignature, accountSignature] }),
    sender: () => alice,
    applied: async () => {
      await expectDecryptsTo(alice, 900n)
      await expectDecryptsTo(bob, 100n)
    }
  })
})

describe("publicTransfer (and unshield) needs the sender's signature over amount and recipient (D51)", () => {
  let carol: Party
  let payee: Address
  beforeAll(async () => {
    carol = await fundedParty(1_000n)
    payee = privateKeyToAccount(generatePrivateKey()).address
  })
  everyCase<PublicTransferRequest>({
    make: async () =>
      publicRequest({
        from: carol.account.address,
        to: payee,
        amount: 250n,
        fromKey: carol.key,
        guardianKey: chain.guardianKey,
        nonce: carol.nextNonce++,
        deadline: (await chain.latestTimestamp()) + 3_600n
      }),
    sign: (signer, request) => signPublic(signer, domain(), request),
    data: (request, guardianSignature, accountSignature) =>
      encodeFunctionData({ abi, functionName: "publicTransfer", args: [request, guardianSignature, accountSignature] }),
    sender: () => carol,
    applied: async () => {
      expect(await usdgOf(payee)).toBe(250n)
      await expectDecryptsTo(carol, 750n)
    }
  })

  it("an account signature does not carry over to another amount or recipient", async () => {
    const request = publicRequest({
      from: carol.account.address,
      to: payee,
      amount: 10n,
      fromKey: carol.key,
      guardianKey: chain.guardianKey,
      nonce: carol.nextNonce++,
      deadline: (await chain.latestTimestamp()) + 3_600n
    })
    const authorisation = await signPublic(carol.account, domain(), request)
    for (const changed of [{ ...request, amount: 11n }, { ...request, to: relayer.address }]) {
      const attestation = await signPublic(chain.guardian, domain(), changed)
      await chain.expectRevert(
        { account: relayer.address, to: token, data: encodeFunctionData({ abi, functionName: "publicTransfer", args: [changed, attestation, authorisation] }) },
        "AccountSignatureInvalid",
        [carol.account.address]
      )
    }
  })
})

interface Attempt {
  readonly path: string
  readonly tried: string
  readonly simulated: string
  readonly mined: string
  readonly applied?: number
}

describe("every guardian path", () => {
  it("an attacker process holding the guardian's secrets moves no unit and cannot pay out the pool", async () => {
    const victim = await fundedParty(5_000_000n)
    // The victim also holds public USDG approved to the pool, so a pull would show.
    await faucet.mintUsdg(victim.account.address, 3_000_000n)
    await chain.send(victim.account, chain.addresses.usdg, encodeFunctionData({ abi: TestUSDG.abi, functionName: "approve", args: [token, maxUint256] }))
    const attackerWallet = await chain.newAccount()
    const attackerSecret = generatePrivateKey()
    const attacker = privateKeyToAccount(attackerSecret)
    await chain.send(attackerWallet, attacker.address, "0x", 21_000n, 10n ** 18n)
    const unregistered = privateKeyToAccount(generatePrivateKey()).address
    const snapshot = async () => ({
      pool: await usdgOf(token),
      victimBalance: await balanceOf(victim.account.address),
      victimKey: await chain.client.readContract({ address: token, abi, functionName: "encryptionKeyOf", args: [victim.account.address] }),
      victimUsdg: await usdgOf(victim.account.address),
      attackerUsdg: await usdgOf(attacker.address),
      attackerBalance: await balanceOf(attacker.address),
      strangerKey: await chain.client.readContract({ address: token, abi, functionName: "encryptionKeyOf", args: [unregistered] }),
      guardianSigner: await chain.client.readContract({ address: token, abi, functionName: "guardianSigner" }),
      owner: await chain.client.readContract({ address: token, abi, functionName: "owner" })
    })
    const before = await snapshot()

    const script = fileURLToPath(new URL("./fixtures/guardianAttacker.ts", import.meta.url))
    const { stdout } = await promisify(execFile)(process.execPath, ["--disable-warning=ExperimentalWarning", script], {
      env: {
        ...process.env,
        ATTACK_RPC_URL: chain.anvil.rpcUrl,
        ATTACK_CHAIN_ID: String(chain.chainId),
        ATTACK_TOKEN: token,
        ATTACK_VICTIM: victim.account.address,
        ATTACK_UNREGISTERED: unregistered,
        ATTACK_GUARDIAN_SECRET: guardianSecret(),
        ATTACK_GUARDIAN_ENCRYPTION_SECRET: chain.guardianKey.secret.toString(),
        ATTACK_WALLET_SECRET: attackerSecret,
        ATTACK_POOL: before.pool.toString()
      },
      timeout: 120_000
    })
    const attempts = stdout.trim().split("\n").map((line) => JSON.parse(line) as Attempt)
    const outcome = (path: string, tried: string) => {
      const found = attempts.find((entry) => entry.path === path && entry.tried.startsWith(tried))
      expect(found, `${path}: ${tried}`).toBeDefined()
      return found!
    }

    // Every state-changing function was tried.
    const stateChanging = abi
      .filter((item) => item.type === "function" && item.stateMutability !== "view" && item.stateMutability !== "pure")
      .map((item) => (item as { name: string }).name)
    expect([...new Set(attempts.map((entry) => entry.path))].sort()).toEqual([...stateChanging].sort())

    // Every debit path stops at the account's signature, mined or simulated.
    for (const [path, tried] of [
      ["confidentialTransfer", "guardian signs both"],
      ["confidentialTransfer", "guardian + attacker wallet"],
      ["publicTransfer", "pool to attacker"],
      ["publicTransfer", "victim's unshield"],
      ["rotateEncryptionKey", "victim's key"]
    ] as const) {
      expect(outcome(path, tried), `${path}: ${tried}`).toMatchObject({ simulated: "AccountSignatureInvalid", mined: "reverted" })
    }
    expect(outcome("confidentialTransferBatch", "guardian signs both")).toMatchObject({ simulated: "ok", mined: "success", applied: 0 })
    expect(outcome("registerFor", "a stranger")).toMatchObject({ simulated: "AccountSignatureInvalid", mined: "reverted" })
    for (const path of ["proposeGuardianRotation", "cancelGuardianRotation", "transferOwnership"]) {
      expect(outcome(path, ""), path).toMatchObject({ simulated: "NotOwner", mined: "reverted" })
    }
    for (const path of ["executeGuardianRotation", "cancelGuardianRotationBySignature"]) {
      expect(outcome(path, ""), path).toMatchObject({ simulated: "NoGuardianRotationPending", mined: "reverted" })
    }
    expect(outcome("shield", "")).toMatchObject({ simulated: "InsufficientAllowance", mined: "reverted" })
    // Its own key for its own wallet is the one thing that applies; it reaches no one's funds.
    expect(outcome("register", "")).toMatchObject({ simulated: "ok", mined: "success" })

    const after = await snapshot()
    expect({ ...after, attackerBalance: before.attackerBalance }).toEqual(before)
    expect(after.attackerBalance).toEqual(before.attackerBalance)
    await expectDecryptsTo(victim, 5_000_000n)
  }, 180_000)
})

/** The guardian's secp256k1 secret: the test chain keeps it (helpers/chain.ts) for exactly this test. */
const guardianSecret = (): Hex => {
  const secret = chain.guardianSecret
  expect(numberToHex(BigInt(secret), { size: 32 })).toBe(secret)
  return secret
}
