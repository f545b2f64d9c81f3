/**
 * `rotateEncryptionKey` against a real anvil: an account's encryption key is replaced and its
 * balance re-encrypted to the new key, only with the new key's proof of possession, the
 * guardian's attestation and the account's signature over the same KeyRotation typed data.
 * The balance then decrypts under the new key to what it held, later transfers are readable
 * with it, a stale attestation (a transfer landed in between) and a replay revert. An account
 * with no registered key (an agent wallet, D68) has its balance re-encrypted the same way, with
 * no proof of possession and nothing registered.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Address, encodeFunctionData, type Hex, keccak256, type LocalAccount, parseEventLogs, stringToHex } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import * as ConfidentialToken from "../src/artifacts/ConfidentialToken.ts"
import * as TypedData from "../src/typedData.ts"
import type { Chain } from "./helpers/chain.ts"
import { makeKeyPair, proveKeyPossession } from "./helpers/elgamal.ts"
import { type Party, startTokenChain, type TokenChain } from "./helpers/parties.ts"
import { confidentialRequest, type KeyRotationRequest, keyRotationRequest, signConfidential } from "./helpers/transfers.ts"

const abi = ConfidentialToken.abi

let chain: Chain
let token: Address
let relayer: LocalAccount
let fundedParty: TokenChain["fundedParty"]
let expectDecryptsTo: TokenChain["expectDecryptsTo"]

beforeAll(async () => {
  ;({ chain, token, relayer, fundedParty, expectDecryptsTo } = await startTokenChain())
})

afterAll(async () => {
  await chain?.stop()
})

const keyOf = (account: Address) => chain.client.readContract({ address: token, abi, functionName: "encryptionKeyOf", args: [account] })

const rotateData = (request: KeyRotationRequest, proof: Hex, guardianSignature: Hex, accountSignature: Hex) =>
  encodeFunctionData({ abi, functionName: "rotateEncryptionKey", args: [request, proof, guardianSignature, accountSignature] })

const deadlineIn = async (seconds: bigint) => (await chain.latestTimestamp()) + seconds

const transfer = async (from: Party, to: Party, amount: bigint) => {
  const request = confidentialRequest({
    from: from.account.address,
    to: to.account.address,
    amount,
    fromKey: from.key,
    toKey: to.key,
    guardianKey: chain.guardianKey,
    nonce: from.nextNonce++,
    deadline: await deadlineIn(3_600n)
  })
  const domain = { chainId: chain.chainId, contract: token }
  await chain.send(
    relayer,
    token,
    encodeFunctionData({
      abi,
      functionName: "confidentialTransfer",
      args: [request, await signConfidential(chain.guardian, domain, request), await signConfidential(from.account, domain, request)]
    })
  )
}

describe("rotateEncryptionKey", () => {
  it("replaces the key and re-encrypts the balance; later transfers in both directions read with the new key", async () => {
    const holder = await fundedParty(4_000n)
    const peer = await fundedParty(1_000n)
    const newKey = makeKeyPair()
    const nonce = holder.nextNonce++
    const { request, sign } = await keyRotationRequest(chain, token, holder.account.address, newKey, 4_000n, await deadlineIn(600n), nonce)
    const proof = proveKeyPossession(newKey, { chainId: chain.chainId, contract: token, account: holder.account.address })
    const receipt = await chain.send(relayer, token, rotateData(request, proof, await sign(chain.guardian), await sign(holder.account)))
    const [event] = parseEventLogs({ abi, logs: receipt.logs, eventName: "EncryptionKeyRotated" })
    expect(event?.args).toEqual({
      account: holder.account.address,
      nonce,
      encryptionKey: newKey.evm,
      commitment: request.commitment,
      ownerHandle: request.ownerHandle,
      guardianHandle: request.guardianHandle
    })
    expect(await keyOf(holder.account.address)).toEqual(newKey.evm)
    expect(await chain.client.readContract({ address: token, abi, functionName: "isNonceUsed", args: [holder.account.address, nonce] })).toBe(true)
    await expectDecryptsTo(holder.account.address, newKey, 4_000n)
    holder.key = newKey
    await transfer(holder, peer, 1_500n)
    await transfer(peer, holder, 700n)
    await expectDecryptsTo(holder.account.address, newKey, 3_200n)
    await expectDecryptsTo(peer.account.address, peer.key, 1_800n)
  })

  it("needs the proof of possession, the guardian's attestation and the account's signature, each its own", async () => {
    const holder = await fundedParty(100n)
    const newKey = makeKeyPair()
    const { request, sign } = await keyRotationRequest(chain, token, holder.account.address, newKey, 100n, await deadlineIn(600n), 7n)
    const proof = proveKeyPossession(newKey, { chainId: chain.chainId, contract: token, account: holder.account.address })
    const byGuardian = await sign(chain.guardian)
    const byAccount = await sign(holder.account)
    const call = (data: Hex) => ({ account: relayer.address, to: token, data })
    // The guardian alone, the account alone, a stranger as either.
    await chain.expectRevert(call(rotateData(request, proof, byGuardian, byGuardian)), "AccountSignatureInvalid", [holder.account.address])
    await chain.expectRevert(call(rotateData(request, proof, byAccount, byAccount)), "GuardianSignatureInvalid")
    await chain.expectRevert(call(rotateData(request, proof, byGuardian, await sign(privateKeyToAccount(generatePrivateKey())))), "AccountSignatureInvalid")
    // A proof for another key, or for this key bound to another account.
    const otherProof = proveKeyPossession(makeKeyPair(), { chainId: chain.chainId, contract: token, account: holder.account.address })
    await chain.expectRevert(call(rotateData(request, otherProof, byGuardian, byAccount)), "ProofOfPossessionInvalid")
    const elsewhereProof = proveKeyPossession(newKey, { chainId: chain.chainId, contract: token, account: relayer.address })
    await chain.expectRevert(call(rotateData(request, elsewhereProof, byGuardian, byAccount)), "ProofOfPossessionInvalid")
    // Any signed field changed: the key, the new balance, the nonce, the deadline.
    const otherKey = makeKeyPair()
    await chain.expectRevert(call(rotateData({ ...request, newKey: otherKey.evm }, proveKeyPossession(otherKey, { chainId: chain.chainId, contract: token, account: holder.account.address }), byGuardian, byAccount)), "GuardianSignatureInvalid")
    await chain.expectRevert(call(rotateData({ ...request, commitment: request.ownerHandle }, proof, byGuardian, byAccount)), "GuardianSignatureInvalid")
    await chain.expectRevert(call(rotateData({ ...request, nonce: 8n }, proof, byGuardian, byAccount)), "GuardianSignatureInvalid")
    // Expired, unregistered, and the identity as a key.
    const expired = { ...request, deadline: (await chain.latestTimestamp()) - 1n }
    await chain.expectRevert(call(rotateData(expired, proof, byGuardian, byAccount)), "DeadlineExpired")
    // A registered account needs the proof: an empty one (an agent's way, below) does not do.
    await chain.expectRevert(call(rotateData(request, "0x", byGuardian, byAccount)), "ProofOfPossessionInvalid")
    await chain.expectRevert(call(rotateData({ ...request, newKey: { x: 0n, y: 0n } }, proof, byGuardian, byAccount)), "InvalidEncryptionKey")
    // All three: it applies, once.
    await chain.send(relayer, token, rotateData(request, proof, byGuardian, byAccount))
    await expectDecryptsTo(holder.account.address, newKey, 100n)
    await chain.expectRevert(call(rotateData(request, proof, byGuardian, byAccount)), "GuardianSignatureInvalid")
  })

  it("reverts when the balance changed after the attestation (a credit landed), so no amount is lost; re-attested, it applies", async () => {
    const holder = await fundedParty(500n)
    const payer = await fundedParty(300n)
    const newKey = makeKeyPair()
    const proof = proveKeyPossession(newKey, { chainId: chain.chainId, contract: token, account: holder.account.address })
    const stale = await keyRotationRequest(chain, token, holder.account.address, newKey, 500n, await deadlineIn(600n), 20n)
    const staleSignatures = [await stale.sign(chain.guardian), await stale.sign(holder.account)] as const
    await transfer(payer, holder, 300n)
    await chain.expectRevert(
      { account: relayer.address, to: token, data: rotateData(stale.request, proof, ...staleSignatures) },
      "GuardianSignatureInvalid"
    )
    const fresh = await keyRotationRequest(chain, token, holder.account.address, newKey, 800n, await deadlineIn(600n), 20n)
    await chain.send(relayer, token, rotateData(fresh.request, proof, await fresh.sign(chain.guardian), await fresh.sign(holder.account)))
    await expectDecryptsTo(holder.account.address, newKey, 800n)
  })

  it("re-encrypts the balance of an account with no key (an agent wallet) with both signatures and no proof; registers nothing (D68)", async () => {
    const owner = await fundedParty(2_000n)
    const peer = await fundedParty(0n)
    // The agent: a wallet with no registered key, paid with its owner's key as its balance's key.
    const agent: Party = { account: await chain.newAccount(), key: owner.key, nextNonce: 0n }
    await transfer(owner, agent, 900n)
    await expectDecryptsTo(agent.account.address, owner.key, 900n)
    const newKey = makeKeyPair()
    const nonce = agent.nextNonce++
    const { request, sign } = await keyRotationRequest(chain, token, agent.account.address, newKey, 900n, await deadlineIn(600n), nonce)
    const byGuardian = await sign(chain.guardian)
    const byAgent = await sign(agent.account)
    const call = (data: Hex) => ({ account: relayer.address, to: token, data })
    // The guardian alone, the agent alone, and a proof where none is due all revert.
    await chain.expectRevert(call(rotateData(request, "0x", byGuardian, byGuardian)), "AccountSignatureInvalid", [agent.account.address])
    await chain.expectRevert(call(rotateData(request, "0x", byAgent, byAgent)), "GuardianSignatureInvalid")
    const proof = proveKeyPossession(newKey, { chainId: chain.chainId, contract: token, account: agent.account.address })
    await chain.expectRevert(call(rotateData(request, proof, byGuardian, byAgent)), "ProofOfPossessionInvalid")
    // Both: it applies, and only the balance changes.
    const receipt = await chain.send(relayer, token, rotateData(request, "0x", byGuardian, byAgent))
    expect(parseEventLogs({ abi, logs: receipt.logs, eventName: "EncryptionKeyRotated" })).toEqual([])
    const [event] = parseEventLogs({ abi, logs: receipt.logs, eventName: "BalanceReencrypted" })
    expect(event?.args).toEqual({
      account: agent.account.address,
      nonce,
      encryptionKey: newKey.evm,
      commitment: request.commitment,
      ownerHandle: request.ownerHandle,
      guardianHandle: request.guardianHandle
    })
    expect(await keyOf(agent.account.address)).toEqual({ x: 0n, y: 0n })
    await expectDecryptsTo(agent.account.address, newKey, 900n)
    await expect(expectDecryptsTo(agent.account.address, owner.key, 900n)).rejects.toThrow()
    // Once: a replay reverts.
    await chain.expectRevert(call(rotateData(request, "0x", byGuardian, byAgent)), "GuardianSignatureInvalid")
    // The agent pays and is paid under the new key.
    agent.key = newKey
    await transfer(agent, peer, 250n)
    await transfer(owner, agent, 100n)
    await expectDecryptsTo(agent.account.address, newKey, 750n)
    await expectDecryptsTo(peer.account.address, peer.key, 250n)
  })

  it("publishes its type hash equal to the TypedData definition", async () => {
    const fields = TypedData.keyRotationTypes.KeyRotation.map((field) => `${field.type} ${field.name}`).join(",")
    expect(await chain.client.readContract({ address: token, abi, functionName: "KEY_ROTATION_TYPEHASH" })).toBe(
      keccak256(stringToHex(`KeyRotation(${fields})`))
    )
  })
})
