/**
 * The guardian against a real chain (anvil, the real ConfidentialToken): its attestation
 * is accepted by the contract, its books reconcile with the on-chain guardian handles
 * (one scalar multiplication, no discrete log), an unsettled transfer already mined is
 * accounted for, and a mismatch freezes the account (authorize refuses), counts in the
 * metric and takes readiness down until the books agree again. The expiry sweeper asks
 * the chain before it lets a mined transfer's reservation go.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Anvil, ConfidentialTokenArtifact, Deploy, Faucet } from "@pps/contracts"
import { EncryptionKey, Note } from "@pps/crypto"
import { Context, Effect, Layer, Metric, Redacted } from "effect"
import {
  type Address,
  createPublicClient,
  createTestClient,
  createWalletClient,
  defineChain,
  encodeFunctionData,
  getAddress,
  type Hex,
  hexToBytes,
  http,
  parseEther,
  type PrivateKeyAccount
} from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { type Domain, Guardian, GuardianKeys } from "../src/index.ts"
import { makeTarget, TestGuardian, testSecret } from "./support/targets.ts"
import { confidentialRequest, nextNonce, nowSeconds, type Party } from "./support/transfers.ts"

const chainId = BigInt(Anvil.testnetChainId)

interface ChainParty extends Party {
  readonly wallet: PrivateKeyAccount
}

const setup = Effect.acquireRelease(
  Effect.promise(async () => {
    const anvil = await Anvil.start({ blockTimeSeconds: 0.1 })
    const chain = defineChain({
      id: anvil.chainId,
      name: "anvil",
      nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
      rpcUrls: { default: { http: [anvil.rpcUrl] } }
    })
    const transport = http(anvil.rpcUrl)
    const client = createPublicClient({ chain, transport, pollingInterval: 20 })
    const testClient = createTestClient({ mode: "anvil", transport })
    const fundedWallet = async () => {
      const wallet = privateKeyToAccount(generatePrivateKey())
      await testClient.setBalance({ address: wallet.address, value: parseEther("100") })
      return wallet
    }
    const owner = await fundedWallet()
    // Submits attestations; not the owner, whose nonces the faucet's sender tracks itself.
    const relayer = await fundedWallet()
    const guardianInfo = GuardianKeys.fromSecret(Redacted.value(testSecret)).info
    const addresses = await Deploy.deploy({
      client,
      deployer: owner,
      owner: owner.address,
      guardianSigner: guardianInfo.signer,
      guardianEncryptionKey: guardianInfo.encryptionKeyCoordinates,
      receiptPollingMs: 20
    })
    const faucet = Faucet.make({ client, minter: owner, usdg: addresses.usdg, confidentialUsdg: addresses.confidentialUsdg, receiptPollingMs: 20 })
    const send = async (from: PrivateKeyAccount, data: Hex) => {
      const wallet = createWalletClient({ account: from, chain, transport })
      const hash = await wallet.sendTransaction({ to: addresses.confidentialUsdg, data, gas: 1_000_000n })
      const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 20 })
      if (receipt.status !== "success") throw new Error(`transaction ${hash} reverted`)
      return receipt
    }
    const newChainParty = async (): Promise<ChainParty> => {
      const wallet = await fundedWallet()
      const keys = EncryptionKey.generate()
      const proof = EncryptionKey.proveOwnership(keys, { chainId, contract: addresses.confidentialUsdg, account: wallet.address })
      const key = { x: BigInt(`0x${Buffer.from(keys.publicKey.subarray(0, 32)).toString("hex")}`), y: BigInt(`0x${Buffer.from(keys.publicKey.subarray(32)).toString("hex")}`) }
      await send(wallet, encodeFunctionData({ abi: ConfidentialTokenArtifact.abi, functionName: "register", args: [key, `0x${Buffer.from(proof).toString("hex")}`] }))
      return { address: wallet.address, keys, wallet }
    }
    return { anvil, client, relayer, addresses, faucet, send, newChainParty }
  }),
  ({ anvil }) => Effect.promise(() => anvil.stop())
)

class ChainFixture extends Context.Service<ChainFixture, Effect.Success<typeof setup>>()("test/ChainFixture") {}

const point = (hex: string) => ({ x: BigInt(`0x${hex.slice(2, 66)}`), y: BigInt(`0x${hex.slice(66, 130)}`) })

const submit = (
  chain: Effect.Success<typeof setup>,
  request: Domain.AuthorizeRequest,
  authorized: Domain.Authorized
) =>
  chain.send(chain.relayer, encodeFunctionData({
    abi: ConfidentialTokenArtifact.abi,
    functionName: "confidentialTransfer",
    args: [{
      from: getAddress(request.from),
      to: getAddress(request.to),
      transferId: request.transferId as Hex,
      nonce: request.nonce,
      commitment: point(authorized.ciphertext.commitment),
      fromHandle: point(authorized.ciphertext.fromHandle),
      toHandle: point(authorized.ciphertext.toHandle ?? ""),
      guardianHandle: point(authorized.ciphertext.guardianHandle),
      sealedDigest: request.sealedDigest as Hex,
      deadline: request.deadline
    }, authorized.signature as Hex]
  }))

describe("reconciliation against anvil", () => {
  layer(
    Layer.unwrap(Effect.gen(function*() {
      const chain = yield* setup
      return Layer.merge(
        makeTarget("in-process/pglite", { chains: [{ chainId, rpcUrl: chain.anvil.rpcUrl }] }),
        Layer.succeed(ChainFixture, chain)
      )
    })),
    { timeout: "120 seconds", excludeTestServices: true }
  )("anvil", (it) => {
    it.effect("attests transfers the contract accepts and keeps books that decrypt from the chain", () =>
      Effect.gen(function*() {
        const guardian = yield* TestGuardian
        const chain = yield* ChainFixture
        const contract: Address = chain.addresses.confidentialUsdg
        const alice = yield* Effect.promise(() => chain.newChainParty())
        const bob = yield* Effect.promise(() => chain.newChainParty())
        yield* Effect.promise(() => chain.faucet.shieldUsdg(alice.address, 1_000n))
        yield* guardian.client.credit({ chainId, contract, account: alice.address, amount: 1_000n, creditId: "anvil-shield-alice-1" })
        assert.deepStrictEqual(yield* guardian.client.reconcile({ chainId, contract, account: alice.address }), { status: "matched", frozen: false })

        const request = confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 300n, chainId, contract })
        const result = yield* guardian.client.authorize(request)
        assert.strictEqual(result._tag, "Authorized")
        if (result._tag !== "Authorized") return
        yield* Effect.promise(() => submit(chain, request, result))
        // Mined but not settled yet: reconciliation counts the in-flight transfer the chain applied.
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: alice.address })).status, "matched")
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: bob.address })).status, "matched")
        yield* guardian.client.settle({ transferId: request.transferId, outcome: "confirmed" })
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: alice.address })).status, "matched")
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: bob.address })).status, "matched")

        // Bob reads his balance from the guardian's statement, sealed to his registered key only.
        const sealed = yield* guardian.client.sealedBalance({ chainId, contract, account: bob.address, publicKey: `0x${Buffer.from(bob.keys.publicKey).toString("hex")}` })
        const statement = Note.openBalanceStatement(bob.keys, hexToBytes(sealed.sealedStatement as Hex), { chainId, contract, account: bob.address })
        assert.isTrue(statement.ok && statement.value.amount === 300n)
        const impostor = EncryptionKey.generate()
        const refused = yield* Effect.flip(guardian.client.sealedBalance({ chainId, contract, account: bob.address, publicKey: `0x${Buffer.from(impostor.publicKey).toString("hex")}` }))
        assert.strictEqual(refused._tag, "AccountKeyMismatch")
      }))

    it.effect("an unsettled transfer that was mined is confirmed from the chain when its reservation falls due", () =>
      Effect.gen(function*() {
        const guardian = yield* TestGuardian
        const chain = yield* ChainFixture
        const contract: Address = chain.addresses.confidentialUsdg
        const alice = yield* Effect.promise(() => chain.newChainParty())
        const bob = yield* Effect.promise(() => chain.newChainParty())
        yield* Effect.promise(() => chain.faucet.shieldUsdg(alice.address, 500n))
        yield* guardian.client.credit({ chainId, contract, account: alice.address, amount: 500n, creditId: "anvil-shield-alice-2" })
        const mined = confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 200n, chainId, contract, deadline: nowSeconds() + 3n })
        const notMined = confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 100n, chainId, contract, deadline: nowSeconds() + 3n, nonce: nextNonce() })
        const minedResult = yield* guardian.client.authorize(mined)
        assert.strictEqual((yield* guardian.client.authorize(notMined))._tag, "Authorized")
        if (minedResult._tag !== "Authorized") return assert.fail("not authorized")
        yield* Effect.promise(() => submit(chain, mined, minedResult))
        // Nobody settles either; past the deadline the sweeper asks the chain.
        yield* Effect.sleep("5 seconds")
        const [first, second] = [
          yield* guardian.client.settle({ transferId: mined.transferId, outcome: "failed" }),
          yield* guardian.client.settle({ transferId: notMined.transferId, outcome: "failed" })
        ]
        assert.deepStrictEqual([first.status, second.status], ["confirmed", "expired"])
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: alice.address })).status, "matched")
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: bob.address })).status, "matched")
      }))

    it.effect("a mismatch freezes the account, counts in the metric and takes readiness down until the books agree", () =>
      Effect.gen(function*() {
        const guardian = yield* TestGuardian
        const chain = yield* ChainFixture
        const contract: Address = chain.addresses.confidentialUsdg
        const alice = yield* Effect.promise(() => chain.newChainParty())
        const bob = yield* Effect.promise(() => chain.newChainParty())
        yield* Effect.promise(() => chain.faucet.shieldUsdg(alice.address, 400n))
        yield* guardian.client.credit({ chainId, contract, account: alice.address, amount: 400n, creditId: "anvil-shield-alice-3" })
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: alice.address })).status, "matched")
        const before = (yield* Metric.value(Guardian.reconciliationMismatches)).count
        // A shield the guardian is never told about: the chain now holds 450, the books 400.
        yield* Effect.promise(() => chain.faucet.shieldUsdg(alice.address, 50n))
        assert.deepStrictEqual(yield* guardian.client.reconcile({ chainId, contract, account: alice.address }), { status: "mismatched", frozen: true })
        assert.strictEqual((yield* Metric.value(Guardian.reconciliationMismatches)).count, before + 1)
        assert.deepStrictEqual(yield* guardian.client.health, { ready: false, frozenAccounts: 1 })
        assert.isTrue(guardian.logs.some((line) => line.includes("account frozen") && line.includes(alice.address.toLowerCase())))
        const refused = yield* guardian.client.authorize(confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 1n, chainId, contract }))
        assert.deepStrictEqual(refused._tag === "Refused" ? refused.reason : refused._tag, "account_frozen")
        // The missing credit is recorded: the books match again and the freeze lifts.
        yield* guardian.client.credit({ chainId, contract, account: alice.address, amount: 50n, creditId: "anvil-shield-alice-4" })
        assert.deepStrictEqual(yield* guardian.client.reconcile({ chainId, contract, account: alice.address }), { status: "matched", frozen: false })
        assert.deepStrictEqual(yield* guardian.client.health, { ready: true, frozenAccounts: 0 })
        assert.strictEqual((yield* guardian.client.authorize(confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 450n, chainId, contract })))._tag, "Authorized")
      }))
  })
})
