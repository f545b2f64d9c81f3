/**
 * The guardian against a real chain (anvil, the real ConfidentialToken): its attestation
 * is accepted by the contract, its books reconcile with the on-chain guardian handles
 * (one scalar multiplication, no discrete log), an unsettled transfer already mined is
 * accounted for, and the expiry sweeper asks the chain before it lets a mined transfer's
 * reservation go.
 *
 * Credits come from the chain (D39): a shield by anyone, a faucet grant and the recipient
 * side of a confidential transfer are booked from the contract's events, exactly once
 * (also when settle came first, and across a restart with a rewound cursor); an outsider's
 * deposit never freezes anything; a mismatch raises an alert and the account's transfers
 * go on; the keys the guardian encrypts to are the registered (or pinned) ones. A key rotation
 * (D55) and a transfer to the rotating account are never both attested.
 *
 * The shared guardian's follower loop is off (`chainPollIntervalMs: 0`): tests drive it
 * with `sync`, so the order of events and settlements is theirs to choose. The restart
 * test runs guardians with the loop on.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, layer } from "@effect/vitest"
import { Anvil, ConfidentialTokenArtifact, Deploy, Faucet, TestUsdgArtifact, TypedData } from "@pps/contracts"
import { Attestation, ElGamal, EncryptionKey, Note, type Point } from "@pps/crypto"
import { Context, Effect, Fiber, Layer, Metric, Redacted, Result, Schedule } from "effect"
import {
  type Address,
  bytesToHex,
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
import { makeTarget, TestGuardian, type TestGuardianShape, testSecret } from "./support/targets.ts"
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
    /** A call of the token under an explicit gas limit: its receipt, reverted or not. */
    const sendWithGas = async (from: PrivateKeyAccount, data: Hex, gas: bigint) => {
      const wallet = createWalletClient({ account: from, chain, transport })
      const hash = await wallet.sendTransaction({ to: addresses.confidentialUsdg, data, gas })
      return client.waitForTransactionReceipt({ hash, pollingInterval: 20 })
    }
    const send = async (from: PrivateKeyAccount, data: Hex) => {
      const receipt = await sendWithGas(from, data, 1_000_000n)
      if (receipt.status !== "success") throw new Error(`transaction ${receipt.transactionHash} reverted`)
      return receipt
    }
    const wallets = new Map<string, PrivateKeyAccount>()
    const newChainParty = async (): Promise<ChainParty> => {
      const wallet = await fundedWallet()
      wallets.set(wallet.address.toLowerCase(), wallet)
      const keys = EncryptionKey.generate()
      const proof = EncryptionKey.proveOwnership(keys, { chainId, contract: addresses.confidentialUsdg, account: wallet.address })
      const key = { x: BigInt(`0x${Buffer.from(keys.publicKey.subarray(0, 32)).toString("hex")}`), y: BigInt(`0x${Buffer.from(keys.publicKey.subarray(32)).toString("hex")}`) }
      await send(wallet, encodeFunctionData({ abi: ConfidentialTokenArtifact.abi, functionName: "register", args: [key, `0x${Buffer.from(proof).toString("hex")}`] }))
      return { address: wallet.address, keys, wallet }
    }
    /** An address the service knows nothing of: it buys test USDG and shields it into `to`. */
    const outsiderShield = async (to: Address, amount: bigint) => {
      const outsider = await fundedWallet()
      await faucet.mintUsdg(outsider.address, amount)
      const wallet = createWalletClient({ account: outsider, chain, transport })
      const approve = await wallet.sendTransaction({
        to: addresses.usdg,
        data: encodeFunctionData({ abi: TestUsdgArtifact.abi, functionName: "approve", args: [addresses.confidentialUsdg, amount] }),
        gas: 200_000n
      })
      await client.waitForTransactionReceipt({ hash: approve, pollingInterval: 20 })
      const receipt = await send(outsider, encodeFunctionData({ abi: ConfidentialTokenArtifact.abi, functionName: "shield", args: [to, amount] }))
      return receipt.transactionHash
    }
    /** A party's wallet by address: its co-signature (D51) goes beside the guardian's attestation. */
    const walletOf = (address: string) => {
      const wallet = wallets.get(address.toLowerCase())
      if (wallet === undefined) throw new Error(`no wallet for ${address}`)
      return wallet
    }
    /** A wallet that holds no key of its own (an agent's) but co-signs its debits. */
    const knowWallet = (wallet: PrivateKeyAccount) => {
      wallets.set(wallet.address.toLowerCase(), wallet)
      return wallet.address
    }
    return { anvil, client, relayer, addresses, faucet, send, sendWithGas, newChainParty, outsiderShield, walletOf, knowWallet }
  }),
  ({ anvil }) => Effect.promise(() => anvil.stop())
)

class ChainFixture extends Context.Service<ChainFixture, Effect.Success<typeof setup>>()("test/ChainFixture") {}

const point = (hex: string) => ({ x: BigInt(`0x${hex.slice(2, 66)}`), y: BigInt(`0x${hex.slice(66, 130)}`) })

const submit = async (
  chain: Effect.Success<typeof setup>,
  request: Domain.AuthorizeRequest,
  authorized: Domain.Authorized
) => {
  // The sender signs the very typed data the guardian attested (D51).
  const accountSignature = await chain.walletOf(request.from).signTypedData(
    Attestation.confidentialTransfer(Attestation.domain(chainId, chain.addresses.confidentialUsdg), {
      from: getAddress(request.from),
      to: getAddress(request.to),
      transferId: request.transferId as Hex,
      nonce: request.nonce,
      ciphertextDigest: authorized.ciphertextDigest as Hex,
      sealedDigest: request.sealedDigest as Hex,
      deadline: request.deadline
    })
  )
  return chain.send(chain.relayer, encodeFunctionData({
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
    }, authorized.signature as Hex, accountSignature]
  }))
}

/**
 * The `rotateEncryptionKey` calldata of an attested rotation, co-signed by the account's wallet as
 * the server does it (KeyRotations.ts); `proof` is empty for an agent wallet (D68).
 */
const rotationCall = (
  contract: Address,
  wallet: PrivateKeyAccount,
  request: { readonly nonce: bigint; readonly deadline: bigint; readonly newKey: string },
  attested: typeof Domain.KeyRotationResult.Type,
  proof: Hex
) =>
  Effect.gen(function*() {
    const newKey = point(request.newKey)
    const accountSignature = yield* Effect.promise(() =>
      wallet.signTypedData({
        domain: TypedData.domain(Number(chainId), contract),
        types: TypedData.keyRotationTypes,
        primaryType: "KeyRotation",
        message: {
          account: wallet.address,
          nonce: request.nonce,
          keyX: newKey.x,
          keyY: newKey.y,
          previousBalanceDigest: attested.previousBalanceDigest as Hex,
          balanceDigest: attested.balanceDigest as Hex,
          deadline: request.deadline
        }
      })
    )
    return encodeFunctionData({
      abi: ConfidentialTokenArtifact.abi,
      functionName: "rotateEncryptionKey",
      args: [{
        account: wallet.address,
        nonce: request.nonce,
        newKey,
        commitment: point(attested.commitment),
        ownerHandle: point(attested.ownerHandle),
        guardianHandle: point(attested.guardianHandle),
        deadline: request.deadline
      }, proof, attested.guardianSignature as Hex, accountSignature]
    })
  })

/**
 * A key rotation of `party` attested by the guardian and co-signed by its wallet, as the server
 * makes it (KeyRotations.ts): its calldata, what a failure report names, and the new key pair.
 */
const attestedRotation = (guardian: TestGuardianShape, chain: Effect.Success<typeof setup>, party: ChainParty, deadline: bigint) =>
  Effect.gen(function*() {
    const contract = chain.addresses.confidentialUsdg
    const newKeys = EncryptionKey.generate()
    const request = { nonce: nextNonce(), deadline, newKey: bytesToHex(newKeys.publicKey) }
    const attested = yield* guardian.client.keyRotation({ chainId, contract, account: party.address, ...request })
    const proof = EncryptionKey.proveOwnership(newKeys, { chainId, contract, account: party.address })
    const data = yield* rotationCall(contract, party.wallet, request, attested, bytesToHex(proof))
    return { data, nonce: request.nonce, failed: { nonce: request.nonce, deadline, previousBalanceDigest: attested.previousBalanceDigest }, newKeys }
  })

const hexKey = (party: Party) => `0x${Buffer.from(party.keys.publicKey).toString("hex")}`

/** The balance as the account's client reads it: the guardian's statement opened with the party's key. */
const balanceOf = (guardian: TestGuardianShape, contract: Address, party: Party) =>
  Effect.gen(function*() {
    const sealed = yield* guardian.client.sealedBalance({ chainId, contract, account: party.address, publicKey: hexKey(party) })
    const statement = Note.openBalanceStatement(party.keys, hexToBytes(sealed.sealedStatement as Hex), { chainId, contract, account: party.address })
    if (!statement.ok) return yield* Effect.die(new Error(statement.reason))
    return statement.value.amount
  })

/** Books the chain's credits through the block of `hash` (the follower loop is off in the shared guardian). */
const synced = (guardian: TestGuardianShape, hash: Hex) =>
  Effect.gen(function*() {
    assert.deepStrictEqual(yield* guardian.client.sync({ chainId, txHash: hash }), { status: "synced" })
  })

const chainCreditsOf = (guardian: TestGuardianShape, hash: Hex) =>
  guardian.sql<{ readonly kind: string; readonly outcome: string }>`
    SELECT kind, outcome FROM guardian_chain_credits WHERE tx_hash = ${hash.toLowerCase()} ORDER BY log_index`.pipe(Effect.orDie)

describe("the guardian against anvil", () => {
  layer(
    Layer.unwrap(Effect.gen(function*() {
      const chain = yield* setup
      return Layer.merge(
        makeTarget("in-process/pglite", { chains: [{ chainId, rpcUrl: chain.anvil.rpcUrl }], timing: { chainPollIntervalMs: 0 } }),
        Layer.succeed(ChainFixture, chain)
      )
    })),
    { timeout: "180 seconds", excludeTestServices: true }
  )("anvil", (it) => {
    it.effect("attests transfers the contract accepts; a transfer-in is credited once, by its event first, then settle", () =>
      Effect.gen(function*() {
        const guardian = yield* TestGuardian
        const chain = yield* ChainFixture
        const contract: Address = chain.addresses.confidentialUsdg
        const alice = yield* Effect.promise(() => chain.newChainParty())
        const bob = yield* Effect.promise(() => chain.newChainParty())
        // The faucet's grant is a shield: booked from its event, no credit call.
        yield* synced(guardian, yield* Effect.promise(() => chain.faucet.shieldUsdg(alice.address, 1_000n)))
        assert.strictEqual(yield* balanceOf(guardian, contract, alice), 1_000n)
        assert.deepStrictEqual(yield* guardian.client.reconcile({ chainId, contract, account: alice.address }), { status: "matched", frozen: false })

        const request = confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 300n, chainId, contract })
        const result = yield* guardian.client.authorize(request)
        assert.strictEqual(result._tag, "Authorized")
        if (result._tag !== "Authorized") return
        const receipt = yield* Effect.promise(() => submit(chain, request, result))
        // Mined but neither settled nor booked yet: reconciliation counts the in-flight transfer the chain applied.
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: alice.address })).status, "matched")
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: bob.address })).status, "matched")
        // The event comes first: bob is credited from it; settle then debits alice only.
        yield* synced(guardian, receipt.transactionHash)
        assert.strictEqual(yield* balanceOf(guardian, contract, bob), 300n)
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: bob.address })).status, "matched")
        yield* guardian.client.settle({ transferId: request.transferId, outcome: "confirmed" })
        yield* guardian.client.settle({ transferId: request.transferId, outcome: "confirmed" })
        yield* synced(guardian, receipt.transactionHash)
        assert.strictEqual(yield* balanceOf(guardian, contract, bob), 300n)
        assert.strictEqual(yield* balanceOf(guardian, contract, alice), 700n)
        assert.deepStrictEqual(yield* chainCreditsOf(guardian, receipt.transactionHash), [{ kind: "transfer_in", outcome: "booked" }])
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: alice.address })).status, "matched")
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: bob.address })).status, "matched")

        // Bob's statement is sealed to his registered key only.
        const impostor = EncryptionKey.generate()
        const refused = yield* Effect.flip(guardian.client.sealedBalance({ chainId, contract, account: bob.address, publicKey: `0x${Buffer.from(impostor.publicKey).toString("hex")}` }))
        assert.strictEqual(refused._tag, "AccountKeyMismatch")
      }))

    it.effect("the logs of one range, shields and a transfer in, are booked together in block order, each once", () =>
      Effect.gen(function*() {
        const guardian = yield* TestGuardian
        const chain = yield* ChainFixture
        const contract: Address = chain.addresses.confidentialUsdg
        const alice = yield* Effect.promise(() => chain.newChainParty())
        const bob = yield* Effect.promise(() => chain.newChainParty())
        const carol = yield* Effect.promise(() => chain.newChainParty())
        yield* synced(guardian, yield* Effect.promise(() => chain.faucet.shieldUsdg(alice.address, 1_000n)))
        const request = confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 250n, chainId, contract })
        const result = yield* guardian.client.authorize(request)
        if (result._tag !== "Authorized") return assert.fail(`expected Authorized, got ${result._tag}`)
        // Four logs the follower has not read yet: one step books them as one unit (bookLogs).
        const hashes = [
          yield* Effect.promise(() => chain.outsiderShield(bob.address, 3n)),
          (yield* Effect.promise(() => submit(chain, request, result))).transactionHash,
          yield* Effect.promise(() => chain.outsiderShield(carol.address, 5n)),
          yield* Effect.promise(() => chain.outsiderShield(alice.address, 7n))
        ]
        yield* synced(guardian, hashes[3]!)
        yield* synced(guardian, hashes[3]!)
        assert.deepStrictEqual(
          yield* Effect.forEach(hashes, (hash) => chainCreditsOf(guardian, hash)),
          [[{ kind: "shield", outcome: "booked" }], [{ kind: "transfer_in", outcome: "booked" }], [{ kind: "shield", outcome: "booked" }], [{
            kind: "shield",
            outcome: "booked"
          }]]
        )
        assert.strictEqual(yield* balanceOf(guardian, contract, bob), 253n)
        assert.strictEqual(yield* balanceOf(guardian, contract, carol), 5n)
        // Alice's debit is her reservation's, taken at settle; bob's credit is not booked twice.
        yield* guardian.client.settle({ transferId: request.transferId, outcome: "confirmed" })
        assert.strictEqual(yield* balanceOf(guardian, contract, alice), 1_000n - 250n + 7n)
        assert.strictEqual(yield* balanceOf(guardian, contract, bob), 253n)
        for (const party of [alice, bob, carol]) {
          assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: party.address })).status, "matched")
        }
      }))

    it.effect("settle(failed) before the deadline keeps the reservation: the amount cannot be spent twice", () =>
      Effect.gen(function*() {
        const guardian = yield* TestGuardian
        const chain = yield* ChainFixture
        const contract: Address = chain.addresses.confidentialUsdg
        const alice = yield* Effect.promise(() => chain.newChainParty())
        const bob = yield* Effect.promise(() => chain.newChainParty())
        const carol = yield* Effect.promise(() => chain.newChainParty())
        yield* synced(guardian, yield* Effect.promise(() => chain.faucet.shieldUsdg(alice.address, 1_000n)))
        const first = confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 1_000n, chainId, contract })
        const attested = yield* guardian.client.authorize(first)
        if (attested._tag !== "Authorized") return assert.fail(attested._tag)
        // Whoever says it failed (the api tier, or a revert), the attestation is still valid:
        // the reservation stays, and the same funds are not attested again.
        assert.strictEqual((yield* guardian.client.settle({ transferId: first.transferId, outcome: "failed" })).status, "reserved")
        const second = confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: carol, amount: 1_000n, chainId, contract })
        assert.strictEqual((yield* guardian.client.authorize(second))._tag, "InsufficientBalance")
        // The "failed" transfer is mined after all: a later settle follows the chain.
        const mined = yield* Effect.promise(() => submit(chain, first, attested))
        assert.strictEqual((yield* guardian.client.settle({ transferId: first.transferId, outcome: "failed" })).status, "confirmed")
        yield* synced(guardian, mined.transactionHash)
        assert.strictEqual(yield* balanceOf(guardian, contract, alice), 0n)
        assert.strictEqual(yield* balanceOf(guardian, contract, bob), 1_000n)
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: bob.address })).status, "matched")
      }))

    it.effect("a transfer-in is credited once when settle comes before its event", () =>
      Effect.gen(function*() {
        const guardian = yield* TestGuardian
        const chain = yield* ChainFixture
        const contract: Address = chain.addresses.confidentialUsdg
        const alice = yield* Effect.promise(() => chain.newChainParty())
        const bob = yield* Effect.promise(() => chain.newChainParty())
        yield* synced(guardian, yield* Effect.promise(() => chain.faucet.shieldUsdg(alice.address, 500n)))
        const request = confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 120n, chainId, contract })
        const result = yield* guardian.client.authorize(request)
        if (result._tag !== "Authorized") return assert.fail(result._tag)
        const receipt = yield* Effect.promise(() => submit(chain, request, result))
        assert.strictEqual((yield* guardian.client.settle({ transferId: request.transferId, outcome: "confirmed" })).status, "confirmed")
        assert.strictEqual(yield* balanceOf(guardian, contract, bob), 120n)
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: bob.address })).status, "matched")
        yield* synced(guardian, receipt.transactionHash)
        assert.strictEqual(yield* balanceOf(guardian, contract, bob), 120n)
        assert.strictEqual(yield* balanceOf(guardian, contract, alice), 380n)
        assert.deepStrictEqual(yield* chainCreditsOf(guardian, receipt.transactionHash), [{ kind: "transfer_in", outcome: "already_booked" }])
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: bob.address })).status, "matched")
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: alice.address })).status, "matched")
      }))

    it.effect("an outsider's shield is booked from its event: no freeze, no alert, the account's transfers go on", () =>
      Effect.gen(function*() {
        const guardian = yield* TestGuardian
        const chain = yield* ChainFixture
        const contract: Address = chain.addresses.confidentialUsdg
        const alice = yield* Effect.promise(() => chain.newChainParty())
        const bob = yield* Effect.promise(() => chain.newChainParty())
        yield* synced(guardian, yield* Effect.promise(() => chain.faucet.shieldUsdg(alice.address, 400n)))
        const before = (yield* Metric.value(Guardian.reconciliationMismatches)).count
        // Nobody tells the guardian: 1 base unit shielded into alice by an address the service never saw.
        const hash = yield* Effect.promise(() => chain.outsiderShield(alice.address, 1n))
        // Before the follower reaches it, reconciliation accounts for the unbooked event: no false alarm.
        assert.deepStrictEqual(yield* guardian.client.reconcile({ chainId, contract, account: alice.address }), { status: "matched", frozen: false })
        yield* synced(guardian, hash)
        yield* synced(guardian, hash)
        assert.strictEqual(yield* balanceOf(guardian, contract, alice), 401n)
        assert.deepStrictEqual(yield* chainCreditsOf(guardian, hash), [{ kind: "shield", outcome: "booked" }])
        assert.deepStrictEqual(yield* guardian.client.reconcile({ chainId, contract, account: alice.address }), { status: "matched", frozen: false })
        assert.strictEqual((yield* Metric.value(Guardian.reconciliationMismatches)).count, before)
        assert.isTrue((yield* guardian.client.health).ready)
        // The whole balance, outsider's unit included, can be spent.
        assert.strictEqual((yield* guardian.client.authorize(confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 401n, chainId, contract })))._tag, "Authorized")
        // On a chain the guardian follows, nobody reports credits any more.
        const reported = yield* Effect.flip(guardian.client.credit({ chainId, contract, account: alice.address, amount: 5n, creditId: `reported-${hash}` }))
        assert.strictEqual(reported._tag, "CreditRefused")
      }))

    it.effect("encrypts only to registered keys, or to the key pinned for an address without one (an agent)", () =>
      Effect.gen(function*() {
        const guardian = yield* TestGuardian
        const chain = yield* ChainFixture
        const contract: Address = chain.addresses.confidentialUsdg
        const alice = yield* Effect.promise(() => chain.newChainParty())
        const bob = yield* Effect.promise(() => chain.newChainParty())
        yield* synced(guardian, yield* Effect.promise(() => chain.faucet.shieldUsdg(alice.address, 1_000n)))
        const key = guardian.encryptionKey
        const impostor: Party = { address: bob.address, keys: EncryptionKey.generate() }
        const reasonOf = (result: Domain.AuthorizeResult) => (result._tag === "Refused" ? result.reason : result._tag)
        // An api tier substituting a key it holds for the recipient's (or the sender's) is refused.
        assert.strictEqual(reasonOf(yield* guardian.client.authorize(confidentialRequest({ guardianKey: key, from: alice, to: impostor, amount: 10n, chainId, contract }))), "recipient_key_not_registered")
        assert.strictEqual(reasonOf(yield* guardian.client.authorize(confidentialRequest({ guardianKey: key, from: alice, fromKeyOwner: impostor, to: bob, amount: 10n, chainId, contract }))), "sender_key_not_registered")

        // An agent's wallet has no registered key: its balance is encrypted to its owner's. The
        // first key used for it is pinned; another one is refused afterwards.
        const agent: Party = { address: chain.knowWallet(privateKeyToAccount(generatePrivateKey())), keys: alice.keys }
        const funding = confidentialRequest({ guardianKey: key, from: alice, to: agent, amount: 200n, chainId, contract })
        const funded = yield* guardian.client.authorize(funding)
        if (funded._tag !== "Authorized") return assert.fail(reasonOf(funded))
        yield* synced(guardian, (yield* Effect.promise(() => submit(chain, funding, funded))).transactionHash)
        yield* guardian.client.settle({ transferId: funding.transferId, outcome: "confirmed" })
        assert.strictEqual(reasonOf(yield* guardian.client.authorize(confidentialRequest({ guardianKey: key, from: bob, to: { address: agent.address, keys: bob.keys }, amount: 1n, chainId, contract }))), "recipient_key_not_registered")
        assert.strictEqual(reasonOf(yield* guardian.client.authorize(confidentialRequest({ guardianKey: key, from: agent, fromKeyOwner: bob, to: bob, amount: 5n, chainId, contract }))), "sender_key_not_registered")
        const spend = confidentialRequest({ guardianKey: key, from: agent, fromKeyOwner: alice, to: bob, amount: 50n, chainId, contract })
        const spent = yield* guardian.client.authorize(spend)
        assert.strictEqual(spent._tag, "Authorized")
        if (spent._tag !== "Authorized") return
        // The contract accepts it, and the agent's books match the chain.
        yield* synced(guardian, (yield* Effect.promise(() => submit(chain, spend, spent))).transactionHash)
        yield* guardian.client.settle({ transferId: spend.transferId, outcome: "confirmed" })
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: agent.address })).status, "matched")
      }))

    it.effect("an unsettled transfer that was mined is confirmed from the chain when its reservation falls due", () =>
      Effect.gen(function*() {
        const guardian = yield* TestGuardian
        const chain = yield* ChainFixture
        const contract: Address = chain.addresses.confidentialUsdg
        const alice = yield* Effect.promise(() => chain.newChainParty())
        const bob = yield* Effect.promise(() => chain.newChainParty())
        yield* synced(guardian, yield* Effect.promise(() => chain.faucet.shieldUsdg(alice.address, 500n)))
        const mined = confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 200n, chainId, contract, deadline: nowSeconds() + 3n })
        const notMined = confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 100n, chainId, contract, deadline: nowSeconds() + 3n, nonce: nextNonce() })
        const minedResult = yield* guardian.client.authorize(mined)
        assert.strictEqual((yield* guardian.client.authorize(notMined))._tag, "Authorized")
        if (minedResult._tag !== "Authorized") return assert.fail("not authorized")
        const receipt = yield* Effect.promise(() => submit(chain, mined, minedResult))
        // Nobody settles either; past the deadline the sweeper asks the chain.
        yield* Effect.sleep("5 seconds")
        const [first, second] = [
          yield* guardian.client.settle({ transferId: mined.transferId, outcome: "failed" }),
          yield* guardian.client.settle({ transferId: notMined.transferId, outcome: "failed" })
        ]
        assert.deepStrictEqual([first.status, second.status], ["confirmed", "expired"])
        yield* synced(guardian, receipt.transactionHash)
        assert.strictEqual(yield* balanceOf(guardian, contract, bob), 200n)
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: alice.address })).status, "matched")
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: bob.address })).status, "matched")
      }))

    it.effect("a mismatch raises an alert (health, log, metric) and never freezes; the account's transfers go on", () =>
      Effect.scoped(Effect.gen(function*() {
        const guardian = yield* TestGuardian
        const chain = yield* ChainFixture
        const contract: Address = chain.addresses.confidentialUsdg
        const carol = yield* Effect.promise(() => chain.newChainParty())
        const dave = yield* Effect.promise(() => chain.newChainParty())
        yield* synced(guardian, yield* Effect.promise(() => chain.faucet.shieldUsdg(carol.address, 400n)))
        const before = (yield* Metric.value(Guardian.reconciliationMismatches)).count
        // A second guardian with the same key and books of its own (a restored backup, a
        // leaked key): its attestation is valid on chain, but this guardian never reserved it.
        const rogue = Context.get(yield* Layer.build(makeTarget("in-process/pglite")), TestGuardian)
        yield* rogue.client.credit({ chainId, contract, account: carol.address, amount: 400n, creditId: "rogue-books" })
        const request = confidentialRequest({ guardianKey: rogue.encryptionKey, from: carol, to: dave, amount: 40n, chainId, contract })
        const result = yield* rogue.client.authorize(request)
        if (result._tag !== "Authorized") return assert.fail(result._tag)
        yield* synced(guardian, (yield* Effect.promise(() => submit(chain, request, result))).transactionHash)

        // Carol's books are above the chain, dave's below: both alert, neither is frozen.
        assert.deepStrictEqual(yield* guardian.client.reconcile({ chainId, contract, account: carol.address }), { status: "mismatched", frozen: false })
        assert.deepStrictEqual(yield* guardian.client.reconcile({ chainId, contract, account: dave.address }), { status: "mismatched", frozen: false })
        assert.deepStrictEqual(yield* guardian.client.reconcile({ chainId, contract, account: carol.address }), { status: "mismatched", frozen: false })
        assert.strictEqual((yield* Metric.value(Guardian.reconciliationMismatches)).count, before + 2, "one count per account, not per check")
        const health = yield* guardian.client.health
        assert.isTrue(health.ready)
        assert.strictEqual(health.frozenAccounts, 0)
        const alerted = health.alerts.map((alert) => `${alert.account}/${alert.kind}`).sort()
        assert.deepStrictEqual(alerted, [
          `${carol.address.toLowerCase()}/reconciliation_mismatch`,
          `${dave.address.toLowerCase()}/reconciliation_mismatch`,
          `${dave.address.toLowerCase()}/unknown_transfer`
        ].sort())
        assert.strictEqual(health.alertCount, 3)
        for (const alert of health.alerts) {
          assert.strictEqual(alert.contract, contract.toLowerCase())
          assert.isTrue(alert.explanation.length > 0 && Date.parse(alert.since) <= Date.parse(alert.lastSeen))
        }
        const alertLines = guardian.logs.filter((line) => line.includes("guardian alert"))
        assert.isTrue(alertLines.some((line) => line.includes(carol.address.toLowerCase()) && line.includes("reconciliation_mismatch")))
        assert.isFalse(alertLines.some((line) => /"(amount|expected)"/.test(line)), "alert lines carry no amount field")
        // Carol can still spend what the chain holds; dave can spend what the books hold.
        assert.strictEqual((yield* guardian.client.authorize(confidentialRequest({ guardianKey: guardian.encryptionKey, from: carol, to: dave, amount: 360n, chainId, contract })))._tag, "Authorized")
      })))

    it.effect("a faucet grant and an outsider's shield are booked with no call, once, also across restarts", () =>
      Effect.gen(function*() {
        const chain = yield* ChainFixture
        const contract: Address = chain.addresses.confidentialUsdg
        const erin = yield* Effect.promise(() => chain.newChainParty())
        const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-guardian-restart-"))
        const following = { chains: [{ chainId, rpcUrl: chain.anvil.rpcUrl }], dataDir, timing: { chainPollIntervalMs: 100 } } as const
        const run = <A, E>(use: (guardian: TestGuardianShape) => Effect.Effect<A, E>) =>
          Effect.scoped(Effect.flatMap(Layer.build(makeTarget("in-process/pglite", following)), (context) => use(Context.get(context, TestGuardian))))
        const eventually = <E>(check: Effect.Effect<boolean, E>) =>
          check.pipe(
            Effect.flatMap((ok) => (ok ? Effect.void : Effect.fail("not yet" as const))),
            Effect.retry({ schedule: Schedule.spaced(100), times: 100 })
          )
        yield* Effect.gen(function*() {
          yield* run((guardian) =>
            Effect.gen(function*() {
              yield* Effect.promise(() => chain.faucet.shieldUsdg(erin.address, 70n))
              yield* Effect.promise(() => chain.outsiderShield(erin.address, 3n))
              yield* eventually(Effect.map(balanceOf(guardian, contract, erin), (amount) => amount === 73n))
              // A crash after booking but before the cursor moved: the next run reads the logs again.
              yield* guardian.sql`UPDATE guardian_chain_cursors SET next_block = 0`
            }))
          yield* run((guardian) =>
            Effect.gen(function*() {
              const hash = yield* Effect.promise(() => chain.outsiderShield(erin.address, 4n))
              yield* eventually(Effect.map(balanceOf(guardian, contract, erin), (amount) => amount >= 77n))
              yield* synced(guardian, hash)
              assert.strictEqual(yield* balanceOf(guardian, contract, erin), 77n)
              const rows = yield* guardian.sql<{ readonly count: string }>`
                SELECT count(*)::text AS count FROM guardian_chain_credits WHERE account = ${erin.address.toLowerCase()}`
              assert.strictEqual(rows[0]?.count, "3")
              assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: erin.address })).status, "matched")
            }))
        }).pipe(Effect.ensuring(Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true }))))
      }))

    it.effect("a key rotation and a transfer to the rotating account never both get attested, however they interleave (D55)", () =>
      Effect.gen(function*() {
        const guardian = yield* TestGuardian
        const chain = yield* ChainFixture
        const contract: Address = chain.addresses.confidentialUsdg
        const outcomes: Array<string> = []
        for (let round = 0; round < 6; round++) {
          const alice = yield* Effect.promise(() => chain.newChainParty())
          const bob = yield* Effect.promise(() => chain.newChainParty())
          yield* synced(guardian, yield* Effect.promise(() => chain.faucet.shieldUsdg(alice.address, 100n)))
          const request = confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to: bob, amount: 10n, chainId, contract })
          // The transfer first: past the early check, it reads its parties' keys from the chain
          // (new parties: nothing remembered) while its recipient's rotation is placed.
          const transfer = yield* Effect.forkChild(Effect.result(guardian.client.authorize(request)))
          yield* Effect.sleep("1 millis")
          const rotation = yield* Effect.result(guardian.client.keyRotation({
            chainId,
            contract,
            account: bob.address,
            newKey: `0x${Buffer.from(EncryptionKey.generate().publicKey).toString("hex")}`,
            nonce: nextNonce(),
            deadline: nowSeconds() + 600n
          }))
          const decided = yield* Fiber.join(transfer)
          const transferAttested = Result.isSuccess(decided) && decided.success._tag === "Authorized"
          const rotationAttested = Result.isSuccess(rotation)
          assert.isFalse(transferAttested && rotationAttested, `round ${round}: the transfer and the rotation were both attested`)
          outcomes.push(transferAttested ? "transfer" : rotationAttested ? "rotation" : "neither")
          // As the server does once the rotation is mined or refused: the hold is lifted.
          yield* guardian.client.forgetKey({ chainId, contract, account: bob.address })
        }
        assert.notInclude(outcomes, "neither")
      }))

    it.effect("an agent's pin follows its owner's rotation (D68): only to the owner's registered key, moved once the re-encrypted balance is mined", () =>
      Effect.gen(function*() {
        const guardian = yield* TestGuardian
        const chain = yield* ChainFixture
        const contract: Address = chain.addresses.confidentialUsdg
        const alice = yield* Effect.promise(() => chain.newChainParty())
        const bob = yield* Effect.promise(() => chain.newChainParty())
        // Carol's registered key stands for alice's after her rotation: the key the agent's balance follows.
        const carol = yield* Effect.promise(() => chain.newChainParty())
        yield* synced(guardian, yield* Effect.promise(() => chain.faucet.shieldUsdg(alice.address, 1_000n)))
        const key = guardian.encryptionKey
        const agentWallet = privateKeyToAccount(generatePrivateKey())
        const agent: Party = { address: chain.knowWallet(agentWallet), keys: alice.keys }
        const funding = confidentialRequest({ guardianKey: key, from: alice, to: agent, amount: 300n, chainId, contract })
        const funded = yield* guardian.client.authorize(funding)
        if (funded._tag !== "Authorized") return assert.fail(funded._tag)
        yield* synced(guardian, (yield* Effect.promise(() => submit(chain, funding, funded))).transactionHash)
        yield* guardian.client.settle({ transferId: funding.transferId, outcome: "confirmed" })
        const rotation = (newKey: Party, keyOwner: Party, account: Address = agent.address) =>
          ({ chainId, contract, account, newKey: hexKey(newKey), nonce: nextNonce(), deadline: nowSeconds() + 600n, keyOwner: keyOwner.address })
        const refusal = (request: Parameters<typeof guardian.client.keyRotation>[0]) =>
          Effect.flip(guardian.client.keyRotation(request)).pipe(Effect.map((error) => `${error._tag}:${"reason" in error ? error.reason : ""}`))
        // Not the named owner's registered key; the key pinned already; an address with no pin.
        assert.strictEqual(yield* refusal(rotation(carol, bob)), "KeyRotationBusy:new_key_not_owners")
        assert.strictEqual(yield* refusal(rotation(alice, alice)), "KeyRotationNotNeeded:key_current")
        assert.strictEqual(yield* refusal(rotation(carol, carol, privateKeyToAccount(generatePrivateKey()).address)), "KeyRotationNotNeeded:no_pinned_key")
        // Named without an owner, an unregistered wallet is no D55 rotation: no key of the api tier's
        // choosing, sent with no proof; and a registered one is no agent.
        const { keyOwner: _owner, ...ownerless } = rotation(carol, carol)
        assert.strictEqual(yield* refusal(ownerless), "KeyRotationBusy:account_not_registered")
        assert.strictEqual(yield* refusal(rotation(carol, carol, bob.address)), "KeyRotationBusy:account_registered")
        const reasonOf = (result: Domain.AuthorizeResult) => (result._tag === "Refused" ? result.reason : result._tag)
        const pays = (keyOwner: Party) =>
          guardian.client.authorize(confidentialRequest({ guardianKey: key, from: agent, fromKeyOwner: keyOwner, to: bob, amount: 10n, chainId, contract }))

        // Attested, never mined, its outcome reported (as mined, naming it): the pin stays.
        const unmined = rotation(carol, carol)
        yield* guardian.client.keyRotation(unmined)
        yield* guardian.client.forgetKey({ chainId, contract, account: agent.address, nonce: unmined.nonce })
        assert.strictEqual(reasonOf(yield* pays(carol)), "sender_key_not_registered")

        // The agent's wallet co-signs the attested rotation and a relayer sends it (no proof: D68).
        const mine = (request: ReturnType<typeof rotation>, attested: typeof Domain.KeyRotationResult.Type) =>
          rotationCall(contract, agentWallet, request, attested, "0x").pipe(
            Effect.flatMap((data) => Effect.promise(() => chain.send(chain.relayer, data)))
          )

        // Attested and mined: held until reported, then the pin is carol's key, though an outsider's
        // shield to the agent changed its balance (not its handles) before the report.
        const request = rotation(carol, carol)
        yield* mine(request, yield* guardian.client.keyRotation(request))
        yield* synced(guardian, yield* Effect.promise(() => chain.outsiderShield(agent.address, 1n)))
        assert.strictEqual((yield* Effect.flip(pays(carol)))._tag, "GuardianError")
        yield* guardian.client.forgetKey({ chainId, contract, account: agent.address })
        assert.strictEqual(reasonOf(yield* pays(alice)), "sender_key_not_registered")
        assert.strictEqual(yield* refusal(rotation(carol, carol)), "KeyRotationNotNeeded:key_current")
        // The agent pays under the new key; the contract takes it and the books match the chain.
        const spend = confidentialRequest({ guardianKey: key, from: agent, fromKeyOwner: carol, to: bob, amount: 50n, chainId, contract })
        const spent = yield* guardian.client.authorize(spend)
        if (spent._tag !== "Authorized") return assert.fail(reasonOf(spent))
        yield* synced(guardian, (yield* Effect.promise(() => submit(chain, spend, spent))).transactionHash)
        yield* guardian.client.settle({ transferId: spend.transferId, outcome: "confirmed" })
        assert.strictEqual((yield* guardian.client.reconcile({ chainId, contract, account: agent.address })).status, "matched")
        // Its balance on chain opens with the new key, and no longer with the old one.
        const stored = yield* Effect.promise(() =>
          chain.client.readContract({ address: contract, abi: ConfidentialTokenArtifact.abi, functionName: "encryptedBalanceOf", args: [agentWallet.address] })
        )
        const pointBytes = (words: { readonly x: bigint; readonly y: bigint }) => hexToBytes(`0x${words.x.toString(16).padStart(64, "0")}${words.y.toString(16).padStart(64, "0")}`) as Point.Point
        const opens = (keys: EncryptionKey.KeyPair) => ElGamal.matches(keys.secretKey, pointBytes(stored.commitment), pointBytes(stored.ownerHandle), 251n)
        assert.deepStrictEqual([opens(carol.keys), opens(alice.keys)], [true, false])

        // Mined and never reported (the server cut off): once the hold lapses, the next key lookup
        // finds the chain ahead and moves the pin before the old key is used again.
        const dave = yield* Effect.promise(() => chain.newChainParty())
        const unreported = { ...rotation(dave, dave), deadline: nowSeconds() + 3n }
        yield* mine(unreported, yield* guardian.client.keyRotation(unreported))
        yield* Effect.sleep("4200 millis")
        assert.strictEqual(reasonOf(yield* pays(carol)), "sender_key_not_registered")
        assert.strictEqual(reasonOf(yield* pays(dave)), "Authorized")
      }))

    it.effect("a rotation reported failed keeps its hold while its attestation can still be mined; the chain showing it dead lifts it (D55)", () =>
      Effect.gen(function*() {
        const guardian = yield* TestGuardian
        const chain = yield* ChainFixture
        const contract: Address = chain.addresses.confidentialUsdg
        const alice = yield* Effect.promise(() => chain.newChainParty())
        yield* synced(guardian, yield* Effect.promise(() => chain.faucet.shieldUsdg(alice.address, 100n)))
        /** Alice pays 1 to `to` under the key given for it: the guardian's answer, or "held" (its rotation hold). */
        const payTo = (to: Party) =>
          guardian.client.authorize(confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to, amount: 1n, chainId, contract })).pipe(
            Effect.map((answer) => answer._tag === "Refused" ? answer.reason : answer._tag),
            Effect.catchTag("GuardianError", (error) => Effect.succeed(error.reason === "unavailable" ? "held" : error.message))
          )
        const report = (party: Party, failed?: (typeof Domain.ForgetKeyRequest.Type)["failed"]) =>
          guardian.client.forgetKey({ chainId, contract, account: party.address, ...(failed === undefined ? {} : { failed }) })

        // Out of gas: the revert changes nothing on chain, and the same calldata is mined later.
        const bob = yield* Effect.promise(() => chain.newChainParty())
        const bobs = yield* attestedRotation(guardian, chain, bob, nowSeconds() + 600n)
        assert.strictEqual((yield* Effect.promise(() => chain.sendWithGas(chain.relayer, bobs.data, 60_000n))).status, "reverted")
        yield* report(bob, bobs.failed)
        assert.strictEqual(yield* payTo(bob), "held", "a transfer to Bob under his old key, attested now, could be mined after the rotation")
        assert.strictEqual((yield* Effect.promise(() => chain.sendWithGas(chain.relayer, bobs.data, 1_000_000n))).status, "success")
        yield* report(bob)
        assert.strictEqual(yield* payTo(bob), "recipient_key_not_registered")
        assert.strictEqual(yield* payTo({ address: bob.address, keys: bobs.newKeys }), "Authorized")

        // The balance moved after the attestation (an outsider's shield): the contract refuses it for good.
        const carol = yield* Effect.promise(() => chain.newChainParty())
        const carols = yield* attestedRotation(guardian, chain, carol, nowSeconds() + 600n)
        yield* Effect.promise(() => chain.outsiderShield(carol.address, 5n))
        assert.strictEqual((yield* Effect.promise(() => chain.sendWithGas(chain.relayer, carols.data, 1_000_000n))).status, "reverted")
        assert.strictEqual(yield* payTo(carol), "held")
        yield* report(carol, carols.failed)
        assert.strictEqual(yield* payTo(carol), "Authorized")

        // Never sent, and the chain's time is past its deadline.
        const dave = yield* Effect.promise(() => chain.newChainParty())
        const daves = yield* attestedRotation(guardian, chain, dave, nowSeconds() + 2n)
        yield* report(dave, daves.failed)
        assert.strictEqual(yield* payTo(dave), "held")
        while ((yield* Effect.promise(() => chain.client.getBlock({ blockTag: "latest" }))).timestamp <= daves.failed.deadline) {
          yield* Effect.sleep("200 millis")
        }
        yield* report(dave, daves.failed)
        assert.strictEqual(yield* payTo(dave), "Authorized")
      }))

    it.effect("one hold for all of an account's attestations: a report on an earlier one lifts nothing while the latest can be mined (D55)", () =>
      Effect.gen(function*() {
        const guardian = yield* TestGuardian
        const chain = yield* ChainFixture
        const contract: Address = chain.addresses.confidentialUsdg
        const alice = yield* Effect.promise(() => chain.newChainParty())
        yield* synced(guardian, yield* Effect.promise(() => chain.faucet.shieldUsdg(alice.address, 100n)))
        const payTo = (to: Party) =>
          guardian.client.authorize(confidentialRequest({ guardianKey: guardian.encryptionKey, from: alice, to, amount: 1n, chainId, contract })).pipe(
            Effect.map((answer) => answer._tag === "Refused" ? answer.reason : answer._tag),
            Effect.catchTag("GuardianError", (error) => Effect.succeed(error.reason === "unavailable" ? "held" : error.message))
          )
        const report = (party: Party, about: { readonly nonce: bigint } | { readonly failed: (typeof Domain.ForgetKeyRequest.Type)["failed"] & {} }) =>
          guardian.client.forgetKey({ chainId, contract, account: party.address, ...about })
        /** An outsider's shield to `party`, booked: the balance moves to new points. */
        const moved = (party: Party) => Effect.promise(() => chain.outsiderShield(party.address, 2n)).pipe(Effect.flatMap((hash) => synced(guardian, hash)))

        // Two requests at once: the first attests A on the balance then, an outsider's shield moves
        // it, the second attests B on the new one. A reverts (the digest): its failure lifts nothing.
        const bob = yield* Effect.promise(() => chain.newChainParty())
        const first = yield* attestedRotation(guardian, chain, bob, nowSeconds() + 600n)
        yield* moved(bob)
        const second = yield* attestedRotation(guardian, chain, bob, nowSeconds() + 600n)
        assert.strictEqual((yield* Effect.promise(() => chain.sendWithGas(chain.relayer, first.data, 1_000_000n))).status, "reverted")
        yield* report(bob, { failed: first.failed })
        assert.strictEqual(yield* payTo(bob), "held", "B can still be mined: a transfer to Bob's old key attested now could follow it")
        // B dead too (the balance moved again, it reverts): its failure lifts the hold.
        yield* moved(bob)
        assert.strictEqual((yield* Effect.promise(() => chain.sendWithGas(chain.relayer, second.data, 1_000_000n))).status, "reverted")
        yield* report(bob, { failed: second.failed })
        assert.strictEqual(yield* payTo(bob), "Authorized")

        // A mined, then B attested on A's result: A's mined report lifts nothing; B's does.
        const carol = yield* Effect.promise(() => chain.newChainParty())
        const a = yield* attestedRotation(guardian, chain, carol, nowSeconds() + 600n)
        assert.strictEqual((yield* Effect.promise(() => chain.sendWithGas(chain.relayer, a.data, 1_000_000n))).status, "success")
        const b = yield* attestedRotation(guardian, chain, carol, nowSeconds() + 600n)
        yield* report(carol, { nonce: a.nonce })
        assert.strictEqual(yield* payTo({ address: carol.address, keys: a.newKeys }), "held", "B can still be mined")
        assert.strictEqual((yield* Effect.promise(() => chain.sendWithGas(chain.relayer, b.data, 1_000_000n))).status, "success")
        yield* report(carol, { nonce: b.nonce })
        assert.strictEqual(yield* payTo({ address: carol.address, keys: b.newKeys }), "Authorized")
      }))

    it.effect("a hold's latest attestation outlives a restart: a report on an earlier one after it lifts nothing (D55)", () =>
      Effect.gen(function*() {
        const chain = yield* ChainFixture
        const contract: Address = chain.addresses.confidentialUsdg
        const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-guardian-holds-"))
        const settings = { chains: [{ chainId, rpcUrl: chain.anvil.rpcUrl }], dataDir, timing: { chainPollIntervalMs: 0 } } as const
        const run = <A, E>(use: (guardian: TestGuardianShape) => Effect.Effect<A, E>) =>
          Effect.scoped(Effect.flatMap(Layer.build(makeTarget("in-process/pglite", settings)), (context) => use(Context.get(context, TestGuardian))))
        const bob = yield* Effect.promise(() => chain.newChainParty())
        const carol = yield* Effect.promise(() => chain.newChainParty())
        const shielded = yield* Effect.promise(() => chain.faucet.shieldUsdg(bob.address, 50n))
        /** Bob pays 1 to Carol: the guardian's answer, or "held" (his rotation hold). */
        const pays = (guardian: TestGuardianShape) =>
          guardian.client.authorize(confidentialRequest({ guardianKey: guardian.encryptionKey, from: bob, to: carol, amount: 1n, chainId, contract })).pipe(
            Effect.map((answer) => answer._tag === "Refused" ? answer.reason : answer._tag),
            Effect.catchTag("GuardianError", (error) => Effect.succeed(error.reason === "unavailable" ? "held" : error.message))
          )
        const moved = (guardian: TestGuardianShape) => Effect.promise(() => chain.outsiderShield(bob.address, 2n)).pipe(Effect.flatMap((hash) => synced(guardian, hash)))
        yield* Effect.gen(function*() {
          // A on the balance then, B on the one after an outsider's shield; then the guardian stops.
          const [first, second] = yield* run((guardian) =>
            Effect.gen(function*() {
              yield* synced(guardian, shielded)
              const first = yield* attestedRotation(guardian, chain, bob, nowSeconds() + 600n)
              yield* moved(guardian)
              return [first, yield* attestedRotation(guardian, chain, bob, nowSeconds() + 600n)] as const
            })
          )
          assert.strictEqual((yield* Effect.promise(() => chain.sendWithGas(chain.relayer, first.data, 1_000_000n))).status, "reverted")
          yield* run((guardian) =>
            Effect.gen(function*() {
              yield* guardian.client.forgetKey({ chainId, contract, account: bob.address, failed: first.failed })
              assert.strictEqual(yield* pays(guardian), "held", "the restarted guardian knows B is the latest, and B can still be mined")
              yield* moved(guardian)
              yield* guardian.client.forgetKey({ chainId, contract, account: bob.address, failed: second.failed })
              assert.strictEqual(yield* pays(guardian), "Authorized")
            })
          )
        }).pipe(Effect.ensuring(Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true }))))
      }))
  })
})

// On a chain of its own: the guardian above books every event of its chain, and this test's
// transfer, attested by a guardian with the same key and books of its own, would be an
// unknown transfer there (an alert the alert test counts).
describe("the guardian at a confirmation depth", () => {
  layer(Layer.effect(ChainFixture, setup), { timeout: "120 seconds", excludeTestServices: true })("anvil", (it) => {
    it.effect("with GUARDIAN_CONFIRMATIONS, a failure report is judged at that depth: a transfer mined moments ago stays reserved until it is that deep", () =>
      Effect.scoped(Effect.gen(function*() {
        const chain = yield* ChainFixture
        // 30 blocks of 0.1 s: about 3 s from a transaction's block to the depth.
        const deep = Context.get(
          yield* Layer.build(makeTarget("in-process/pglite", {
            chains: [{ chainId, rpcUrl: chain.anvil.rpcUrl }],
            timing: { chainPollIntervalMs: 0, chainConfirmations: 30 }
          })),
          TestGuardian
        )
        const syncedAtDepth = (hash: Hex) =>
          Effect.gen(function*() {
            for (let tries = 0; tries < 100; tries++) {
              if ((yield* deep.client.sync({ chainId, txHash: hash })).status === "synced") return
              yield* Effect.sleep("200 millis")
            }
            assert.fail("never synced at depth")
          })
        const contract: Address = chain.addresses.confidentialUsdg
        const alice = yield* Effect.promise(() => chain.newChainParty())
        const bob = yield* Effect.promise(() => chain.newChainParty())
        yield* syncedAtDepth(yield* Effect.promise(() => chain.faucet.shieldUsdg(alice.address, 500n)))
        const request = confidentialRequest({ guardianKey: deep.encryptionKey, from: alice, to: bob, amount: 200n, chainId, contract })
        const attested = yield* deep.client.authorize(request)
        if (attested._tag !== "Authorized") return assert.fail(attested._tag)
        const receipt = yield* Effect.promise(() => submit(chain, request, attested))
        // Its nonce is used at the head, not yet 30 blocks down: the chain has not decided.
        assert.strictEqual((yield* deep.client.settle({ transferId: request.transferId, outcome: "failed" })).status, "reserved")
        // Once that deep, it has.
        yield* syncedAtDepth(receipt.transactionHash)
        assert.strictEqual((yield* deep.client.settle({ transferId: request.transferId, outcome: "failed" })).status, "confirmed")
        assert.strictEqual(yield* balanceOf(deep, contract, alice), 300n)
      })))

  })
})
