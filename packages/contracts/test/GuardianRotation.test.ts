/**
 * No single operator key can move confidential funds (docs/contracts.md), against a real anvil.
 *
 * The owner's only power over the guardian is a proposal that waits out the rotation delay and
 * that the current guardian (by an EIP-712 signature anyone relays) or the owner can cancel.
 * Here: immediate rotation is gone; execution before the delay, after the window, or twice
 * fails; cancellation by either party works and binds to one proposal; the drain the review
 * reproduced (owner rotates to its own signer, then unshields the pool) fails; and every
 * state-changing function of every contract, called by the owner, leaves other accounts'
 * balances, keys, nonces and the pools' tokens where they were. The mainnet floor on the delay
 * is checked on an anvil that runs chain id 4663.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type Abi,
  type Address,
  BaseError,
  createPublicClient,
  createTestClient,
  decodeErrorResult,
  encodeDeployData,
  encodeFunctionData,
  type Hex,
  http,
  type LocalAccount,
  maxUint256,
  parseEther,
  parseEventLogs,
  toFunctionSelector,
  zeroAddress
} from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import * as Anvil from "../src/anvil.ts"
import * as ConfidentialToken from "../src/artifacts/ConfidentialToken.ts"
import * as TestUSDG from "../src/artifacts/TestUSDG.ts"
import * as WrappedEther from "../src/artifacts/WrappedEther.ts"
import * as Deploy from "../src/deploy.ts"
import * as Faucet from "../src/faucet.ts"
import * as TypedData from "../src/typedData.ts"
import { makeSender } from "../src/internal/transactions.ts"
import { type Chain, errorAbi, startChain } from "./helpers/chain.ts"
import { type EvmPoint, type KeyPair, makeKeyPair, proveKeyPossession } from "./helpers/elgamal.ts"
import { confidentialRequest, keyRotationRequest, publicRequest, signConfidential, signPublic } from "./helpers/transfers.ts"

const abi = ConfidentialToken.abi
const executionWindowSeconds = 1_209_600n
const delayMaxSeconds = 2_592_000n

let chain: Chain
let token: Address
let relayer: LocalAccount
let faucet: Faucet.Faucet
let delaySeconds: bigint

beforeAll(async () => {
  chain = await startChain()
  token = chain.addresses.confidentialUsdg
  relayer = await chain.newAccount()
  const minter = await chain.newAccount()
  await chain.send(
    chain.owner,
    chain.addresses.usdg,
    encodeFunctionData({ abi: TestUSDG.abi, functionName: "setMinter", args: [minter.address, true] })
  )
  faucet = Faucet.make({ client: chain.client, minter, usdg: chain.addresses.usdg, confidentialUsdg: token, receiptPollingMs: 20 })
  delaySeconds = await read("rotationDelaySeconds")
})

afterAll(async () => {
  await chain?.stop()
})

const read = <F extends "rotationDelaySeconds" | "guardianSigner" | "guardianEncryptionKey" | "pendingGuardianRotation" | "owner">(
  functionName: F,
  address = token
) => chain.client.readContract({ address, abi, functionName })

const call = {
  propose: (signer: Address, key: EvmPoint) => encodeFunctionData({ abi, functionName: "proposeGuardianRotation", args: [signer, key] }),
  execute: () => encodeFunctionData({ abi, functionName: "executeGuardianRotation" }),
  cancel: () => encodeFunctionData({ abi, functionName: "cancelGuardianRotation" }),
  cancelBySignature: (signature: Hex) => encodeFunctionData({ abi, functionName: "cancelGuardianRotationBySignature", args: [signature] })
}

/** The guardian's veto of `proposalId`, signed with the TypedData definition the guardian uses. */
const signCancel = (signer: LocalAccount, proposalId: bigint, newSigner: Address, contract = token) =>
  signer.signTypedData({
    domain: TypedData.domain(chain.chainId, contract),
    types: TypedData.cancelGuardianRotationTypes,
    primaryType: "CancelGuardianRotation",
    message: { proposalId, newSigner }
  })

const propose = async (signer: Address, key: EvmPoint) => {
  const receipt = await chain.send(chain.owner, token, call.propose(signer, key))
  const [event] = parseEventLogs({ abi, logs: receipt.logs, eventName: "GuardianRotationProposed" })
  if (event === undefined) throw new Error("no GuardianRotationProposed event")
  return { receipt, ...event.args }
}

const expectNothingPending = async () => {
  expect((await read("pendingGuardianRotation")).newSigner).toBe(zeroAddress)
}

describe("immediate rotation", () => {
  it("is gone: no rotateGuardian in the ABI, and its old selector reverts", async () => {
    const names = abi.filter((item) => item.type === "function").map((item) => item.name)
    expect(names).not.toContain("rotateGuardian")
    // The call the review used, with valid arguments, so only the missing function can refuse it.
    const legacyAbi = [{
      type: "function",
      name: "rotateGuardian",
      stateMutability: "nonpayable",
      inputs: [
        { name: "newSigner", type: "address" },
        { name: "newEncryptionKey", type: "tuple", components: [{ name: "x", type: "uint256" }, { name: "y", type: "uint256" }] }
      ],
      outputs: []
    }] as const
    const legacy = encodeFunctionData({ abi: legacyAbi, functionName: "rotateGuardian", args: [chain.owner.address, makeKeyPair().evm] })
    expect(legacy.slice(0, 10)).toBe(toFunctionSelector("rotateGuardian(address,(uint256,uint256))"))
    await expect(chain.send(chain.owner, token, legacy, 200_000n)).rejects.toThrow(/reverted/)
    expect(await read("guardianSigner")).toBe(chain.guardian.address)
  })

  it("is impossible through propose + execute in a row: the delay holds, also in a mined transaction", async () => {
    const next = privateKeyToAccount(generatePrivateKey())
    const proposal = await propose(next.address, makeKeyPair().evm)
    await chain.expectRevert({ account: chain.owner.address, to: token, data: call.execute() }, "GuardianRotationNotReady", [
      proposal.executableAt
    ])
    await expect(chain.send(chain.owner, token, call.execute(), 200_000n)).rejects.toThrow(/reverted/)
    expect(await read("guardianSigner")).toBe(chain.guardian.address)
    await chain.send(chain.owner, token, call.cancel())
  })
})

describe("proposeGuardianRotation", () => {
  it("is the owner's only: a relayer, the guardian's own address or a stranger cannot propose", async () => {
    const stranger = await chain.newAccount()
    const key = makeKeyPair().evm
    for (const caller of [relayer.address, chain.guardian.address, stranger.address]) {
      await chain.expectRevert({ account: caller, to: token, data: call.propose(stranger.address, key) }, "NotOwner", [caller])
    }
    await expect(chain.send(stranger, token, call.propose(stranger.address, key), 300_000n)).rejects.toThrow(/reverted/)
    await expectNothingPending()
  })

  it("refuses a zero signer and an invalid encryption key", async () => {
    const next = privateKeyToAccount(generatePrivateKey()).address
    const owner = chain.owner.address
    await chain.expectRevert({ account: owner, to: token, data: call.propose(zeroAddress, makeKeyPair().evm) }, "ZeroAddress")
    await chain.expectRevert({ account: owner, to: token, data: call.propose(next, { x: 0n, y: 0n }) }, "InvalidEncryptionKey")
    await chain.expectRevert({ account: owner, to: token, data: call.propose(next, { x: 1n, y: 3n }) }, "InvalidPoint")
  })

  it("records one pending rotation and announces its earliest execution time; a second waits", async () => {
    const next = privateKeyToAccount(generatePrivateKey())
    const nextKey = makeKeyPair()
    const proposal = await propose(next.address, nextKey.evm)
    const block = await chain.client.getBlock({ blockNumber: proposal.receipt.blockNumber })
    expect(proposal).toMatchObject({
      currentSigner: chain.guardian.address,
      newSigner: next.address,
      encryptionKey: nextKey.evm,
      executableAt: block.timestamp + delaySeconds,
      expiresAt: block.timestamp + delaySeconds + executionWindowSeconds
    })
    expect(proposal.proposalId).toBeGreaterThan(0n)
    expect(await read("pendingGuardianRotation")).toEqual({
      proposalId: proposal.proposalId,
      newSigner: next.address,
      executableAt: proposal.executableAt,
      expiresAt: proposal.expiresAt,
      newEncryptionKey: nextKey.evm
    })
    await chain.expectRevert(
      { account: chain.owner.address, to: token, data: call.propose(chain.owner.address, makeKeyPair().evm) },
      "GuardianRotationPending",
      [proposal.proposalId]
    )
    await chain.send(chain.owner, token, call.cancel())
    await expectNothingPending()
  })
})

describe("executeGuardianRotation", () => {
  it("reverts before the delay, works after it from any account, once, and the new guardian then signs", async () => {
    const next = privateKeyToAccount(generatePrivateKey())
    const nextKey = makeKeyPair()
    const proposal = await propose(next.address, nextKey.evm)
    await chain.advanceTime(delaySeconds - 10n)
    await chain.expectRevert({ account: relayer.address, to: token, data: call.execute() }, "GuardianRotationNotReady", [
      proposal.executableAt
    ])
    await chain.advanceTime(10n)
    // Neither the owner nor the guardian: anyone may carry out a rotation whose delay has passed.
    const stranger = await chain.newAccount()
    const receipt = await chain.send(stranger, token, call.execute())
    const [event] = parseEventLogs({ abi, logs: receipt.logs, eventName: "GuardianRotated" })
    expect(event?.args).toEqual({ previousSigner: chain.guardian.address, newSigner: next.address, encryptionKey: nextKey.evm })
    expect(await read("guardianSigner")).toBe(next.address)
    expect(await read("guardianEncryptionKey")).toEqual(nextKey.evm)
    await expectNothingPending()
    await chain.expectRevert({ account: stranger.address, to: token, data: call.execute() }, "NoGuardianRotationPending")

    // Back to the original guardian, proposed by the owner, executed by the owner this time.
    await propose(chain.guardian.address, chain.guardianKey.evm)
    await chain.advanceTime(delaySeconds)
    await chain.send(chain.owner, token, call.execute())
    expect(await read("guardianSigner")).toBe(chain.guardian.address)
  })

  it("reverts once the execution window has passed; a lapsed proposal may be replaced", async () => {
    const next = privateKeyToAccount(generatePrivateKey())
    const proposal = await propose(next.address, makeKeyPair().evm)
    // Still pending until expiresAt: a second proposal waits.
    await chain.advanceTime(delaySeconds + executionWindowSeconds - 10n)
    await chain.expectRevert(
      { account: chain.owner.address, to: token, data: call.propose(next.address, makeKeyPair().evm) },
      "GuardianRotationPending"
    )
    await chain.advanceTime(20n)
    await chain.expectRevert({ account: relayer.address, to: token, data: call.execute() }, "GuardianRotationExpired", [
      proposal.expiresAt
    ])
    const replacement = await propose(next.address, makeKeyPair().evm)
    expect(replacement.proposalId).toBe(proposal.proposalId + 1n)
    await chain.send(chain.owner, token, call.cancel())
    expect(await read("guardianSigner")).toBe(chain.guardian.address)
  })
})

describe("cancelGuardianRotation", () => {
  it("by the owner: the rotation can no longer be executed", async () => {
    const proposal = await propose(privateKeyToAccount(generatePrivateKey()).address, makeKeyPair().evm)
    await chain.expectRevert({ account: relayer.address, to: token, data: call.cancel() }, "NotOwner", [relayer.address])
    await chain.expectRevert({ account: chain.guardian.address, to: token, data: call.cancel() }, "NotOwner")
    const receipt = await chain.send(chain.owner, token, call.cancel())
    const [event] = parseEventLogs({ abi, logs: receipt.logs, eventName: "GuardianRotationCancelled" })
    expect(event?.args).toEqual({ proposalId: proposal.proposalId, newSigner: proposal.newSigner, cancelledBy: chain.owner.address })
    await chain.advanceTime(delaySeconds)
    await chain.expectRevert({ account: relayer.address, to: token, data: call.execute() }, "NoGuardianRotationPending")
    await chain.expectRevert({ account: chain.owner.address, to: token, data: call.cancel() }, "NoGuardianRotationPending")
    expect(await read("guardianSigner")).toBe(chain.guardian.address)
  })

  it("by the current guardian's signature, relayed by anyone; bound to that one proposal", async () => {
    const next = privateKeyToAccount(generatePrivateKey())
    const proposal = await propose(next.address, makeKeyPair().evm)
    const relay = (signature: Hex) => ({ account: relayer.address, to: token, data: call.cancelBySignature(signature) })
    // Signatures by anyone but the current guardian, or over other fields, do not cancel.
    await chain.expectRevert(relay(await signCancel(chain.owner, proposal.proposalId, next.address)), "GuardianSignatureInvalid")
    await chain.expectRevert(relay(await signCancel(next, proposal.proposalId, next.address)), "GuardianSignatureInvalid")
    await chain.expectRevert(relay(await signCancel(chain.guardian, proposal.proposalId + 1n, next.address)), "GuardianSignatureInvalid")
    await chain.expectRevert(relay(await signCancel(chain.guardian, proposal.proposalId, relayer.address)), "GuardianSignatureInvalid")
    await chain.expectRevert(
      relay(await signCancel(chain.guardian, proposal.proposalId, next.address, chain.addresses.confidentialEth)),
      "GuardianSignatureInvalid"
    )

    // Signed from TypedData.cancelGuardianRotationTypes: the contract's private type hash agrees.
    const veto = await signCancel(chain.guardian, proposal.proposalId, next.address)
    const receipt = await chain.send(relayer, token, call.cancelBySignature(veto))
    const [event] = parseEventLogs({ abi, logs: receipt.logs, eventName: "GuardianRotationCancelled" })
    expect(event?.args).toEqual({ proposalId: proposal.proposalId, newSigner: next.address, cancelledBy: chain.guardian.address })
    await expectNothingPending()
    await chain.expectRevert(relay(veto), "NoGuardianRotationPending")

    // The same signer and key proposed again get a new id: the old veto does not carry over.
    const again = await propose(next.address, proposal.encryptionKey)
    expect(again.proposalId).toBe(proposal.proposalId + 1n)
    await chain.expectRevert(relay(veto), "GuardianSignatureInvalid")
    await chain.send(relayer, token, call.cancelBySignature(await signCancel(chain.guardian, again.proposalId, next.address)))
    await chain.advanceTime(delaySeconds)
    await chain.expectRevert({ account: relayer.address, to: token, data: call.execute() }, "NoGuardianRotationPending")
    expect(await read("guardianSigner")).toBe(chain.guardian.address)
  })
})

describe("bounded veto (D52)", () => {
  it("a vetoing guardian delays its replacement by two proposals of the same signer, not for ever", async () => {
    const successor = privateKeyToAccount(generatePrivateKey())
    const successorKey = makeKeyPair()
    const relay = (signature: Hex) => chain.send(relayer, token, call.cancelBySignature(signature))
    const vetoesUsed = () =>
      chain.client.readContract({ address: token, abi, functionName: "guardianVetoesUsed", args: [chain.guardian.address, successor.address] })
    expect(await chain.client.readContract({ address: token, abi, functionName: "MAX_GUARDIAN_VETOES_PER_SIGNER" })).toBe(2n)
    for (let round = 1n; round <= 2n; round++) {
      const proposal = await propose(successor.address, successorKey.evm)
      await relay(await signCancel(chain.guardian, proposal.proposalId, successor.address))
      await expectNothingPending()
      expect(await vetoesUsed()).toBe(round)
    }
    // The third proposal of the same signer: the guardian's veto is refused, simulated and mined.
    const third = await propose(successor.address, successorKey.evm)
    const veto = await signCancel(chain.guardian, third.proposalId, successor.address)
    await chain.expectRevert({ account: relayer.address, to: token, data: call.cancelBySignature(veto) }, "GuardianVetoesExhausted", [successor.address])
    await expect(chain.send(relayer, token, call.cancelBySignature(veto), 200_000n)).rejects.toThrow(/reverted/)
    // Another signer proposed meanwhile would have had its own two vetoes; this one goes through.
    await chain.advanceTime(delaySeconds)
    await chain.send(relayer, token, call.execute())
    expect(await read("guardianSigner")).toBe(successor.address)
    expect(await read("guardianEncryptionKey")).toEqual(successorKey.evm)

    // The new guardian has its own vetoes against a proposal back to the old one.
    const back = await propose(chain.guardian.address, chain.guardianKey.evm)
    await relay(await signCancel(successor, back.proposalId, chain.guardian.address))
    await expectNothingPending()
    // Restore the original guardian for the other tests (its second proposal, vetoable but not vetoed).
    await propose(chain.guardian.address, chain.guardianKey.evm)
    await chain.advanceTime(delaySeconds)
    await chain.send(relayer, token, call.execute())
    expect(await read("guardianSigner")).toBe(chain.guardian.address)
  })

  it("the owner can still cancel a proposal the guardian may no longer veto", async () => {
    const successor = privateKeyToAccount(generatePrivateKey())
    for (let round = 0; round < 2; round++) {
      const proposal = await propose(successor.address, makeKeyPair().evm)
      await chain.send(relayer, token, call.cancelBySignature(await signCancel(chain.guardian, proposal.proposalId, successor.address)))
    }
    await propose(successor.address, makeKeyPair().evm)
    await chain.send(chain.owner, token, call.cancel())
    await expectNothingPending()
    expect(await read("guardianSigner")).toBe(chain.guardian.address)
  })
})

/** A registered account holding `amount` shielded USDG. */
const fundedVictim = async (amount: bigint) => {
  const account = await chain.newAccount()
  const key = makeKeyPair()
  const proof = proveKeyPossession(key, { chainId: chain.chainId, contract: token, account: account.address })
  await chain.send(account, token, encodeFunctionData({ abi, functionName: "register", args: [key.evm, proof] }))
  await faucet.shieldUsdg(account.address, amount)
  return { account, key }
}

const usdgBalance = (holder: Address) =>
  chain.client.readContract({ address: chain.addresses.usdg, abi: TestUSDG.abi, functionName: "balanceOf", args: [holder] })
const wethBalance = (holder: Address) =>
  chain.client.readContract({ address: chain.addresses.weth, abi: WrappedEther.abi, functionName: "balanceOf", args: [holder] })

describe("the review's drain", () => {
  it("fails: the owner's own signer cannot attest before the delay, and the guardian cancels in time", async () => {
    const victim = await fundedVictim(1_000_000_000n) // 1000 USDG
    const pool = await usdgBalance(token)
    const evil = privateKeyToAccount(generatePrivateKey())
    const evilKey = makeKeyPair()
    const drain = publicRequest({
      from: victim.account.address,
      to: chain.owner.address,
      amount: 1_000_000_000n,
      fromKey: victim.key,
      guardianKey: evilKey,
      nonce: 1n,
      deadline: (await chain.latestTimestamp()) + 30n * 86_400n
    })
    const drainData = encodeFunctionData({
      abi,
      functionName: "publicTransfer",
      args: [drain, await signPublic(evil, { chainId: chain.chainId, contract: token }, drain), await signPublic(evil, { chainId: chain.chainId, contract: token }, drain)]
    })

    const proposal = await propose(evil.address, evilKey.evm)
    await chain.expectRevert({ account: chain.owner.address, to: token, data: drainData }, "GuardianSignatureInvalid")
    await chain.expectRevert({ account: chain.owner.address, to: token, data: call.execute() }, "GuardianRotationNotReady")
    // The guardian sees GuardianRotationProposed and vetoes; any account relays the veto.
    await chain.send(relayer, token, call.cancelBySignature(await signCancel(chain.guardian, proposal.proposalId, evil.address)))
    await chain.advanceTime(delaySeconds)
    await chain.expectRevert({ account: chain.owner.address, to: token, data: call.execute() }, "NoGuardianRotationPending")
    await chain.expectRevert({ account: chain.owner.address, to: token, data: drainData }, "GuardianSignatureInvalid")
    expect(await usdgBalance(token)).toBe(pool)
    expect(await usdgBalance(chain.owner.address)).toBe(0n)
  })
})

describe("every owner path", () => {
  it("moves no other account's balance, key or nonce, and none of either pool's tokens", async () => {
    const owner = chain.owner
    const victim = await fundedVictim(5_000_000n)
    // The victim also holds public USDG with an unlimited approval to the ConfidentialToken, and
    // shielded WETH in the ETH pool, so any path that could pull from it would show.
    await faucet.mintUsdg(victim.account.address, 7_000_000n)
    await chain.send(victim.account, chain.addresses.usdg, encodeFunctionData({ abi: TestUSDG.abi, functionName: "approve", args: [token, maxUint256] }))
    const ethPool = chain.addresses.confidentialEth
    await chain.send(victim.account, chain.addresses.weth, encodeFunctionData({ abi: WrappedEther.abi, functionName: "deposit" }), 100_000n, parseEther("2"))
    await chain.send(victim.account, chain.addresses.weth, encodeFunctionData({ abi: WrappedEther.abi, functionName: "approve", args: [ethPool, maxUint256] }))
    await chain.send(victim.account, ethPool, encodeFunctionData({ abi, functionName: "shield", args: [victim.account.address, parseEther("1")] }))

    const snapshot = async () => ({
      usdgPool: await usdgBalance(token),
      wethPool: await wethBalance(ethPool),
      victimUsdg: await usdgBalance(victim.account.address),
      victimWeth: await wethBalance(victim.account.address),
      victimBalance: await chain.client.readContract({ address: token, abi, functionName: "encryptedBalanceOf", args: [victim.account.address] }),
      victimEthBalance: await chain.client.readContract({ address: ethPool, abi, functionName: "encryptedBalanceOf", args: [victim.account.address] }),
      victimKey: await chain.client.readContract({ address: token, abi, functionName: "encryptionKeyOf", args: [victim.account.address] }),
      victimNonces: await chain.client.readContract({ address: token, abi, functionName: "nonceBitmap", args: [victim.account.address, 0n] }),
      guardianSigner: await read("guardianSigner"),
      guardianKey: await read("guardianEncryptionKey")
    })
    const before = await snapshot()
    // Units the owner itself puts into the USDG pool (its own shield) are the only change allowed.
    let ownerShieldedUsdg = 0n

    const domain = { chainId: chain.chainId, contract: token }
    const deadline = (await chain.latestTimestamp()) + 30n * 86_400n
    const ownerKey: KeyPair = makeKeyPair()
    const tokenCall = (data: Hex) => ({ account: owner.address, to: token, data })
    const as = (to: Address, data: Hex) => ({ account: owner.address, to, data })
    const succeeds = (to: Address, data: Hex, value = 0n) => chain.send(owner, to, data, 1_000_000n, value)

    // One entry per state-changing function of each contract, each tried by the owner in the
    // way most likely to reach someone else's funds. The coverage check below fails when a
    // contract gains a function this table does not try.
    const confidentialTokenPaths: Record<string, () => Promise<unknown>> = {
      register: async () => {
        // Only ever for msg.sender: the owner registers itself, the victim's key stays.
        const proof = proveKeyPossession(ownerKey, { chainId: chain.chainId, contract: token, account: owner.address })
        await succeeds(token, encodeFunctionData({ abi, functionName: "register", args: [ownerKey.evm, proof] }))
      },
      registerFor: async () => {
        const proof = proveKeyPossession(ownerKey, { chainId: chain.chainId, contract: token, account: victim.account.address })
        const consent = await owner.signTypedData({
          domain: TypedData.domain(chain.chainId, token),
          types: TypedData.keyRegistrationTypes,
          primaryType: "KeyRegistration",
          message: { account: victim.account.address, keyX: ownerKey.evm.x, keyY: ownerKey.evm.y }
        })
        await chain.expectRevert(
          tokenCall(encodeFunctionData({ abi, functionName: "registerFor", args: [victim.account.address, ownerKey.evm, proof, consent] })),
          "AccountSignatureInvalid",
          [victim.account.address]
        )
      },
      shield: async () => {
        // shield pulls from msg.sender only: the victim's approval is of no use to the owner.
        await chain.expectRevert(
          tokenCall(encodeFunctionData({ abi, functionName: "shield", args: [owner.address, 1_000_000n] })),
          "InsufficientAllowance",
          [token, 0n, 1_000_000n]
        )
        await succeeds(chain.addresses.usdg, encodeFunctionData({ abi: TestUSDG.abi, functionName: "mint", args: [owner.address, 3n] }))
        await succeeds(chain.addresses.usdg, encodeFunctionData({ abi: TestUSDG.abi, functionName: "approve", args: [token, 3n] }))
        await succeeds(token, encodeFunctionData({ abi, functionName: "shield", args: [owner.address, 3n] }))
        ownerShieldedUsdg += 3n
      },
      confidentialTransfer: async () => {
        const request = confidentialRequest({
          from: victim.account.address,
          to: owner.address,
          amount: 5_000_000n,
          fromKey: victim.key,
          toKey: ownerKey,
          guardianKey: chain.guardianKey,
          nonce: 0n,
          deadline
        })
        const signature = await signConfidential(owner, domain, request)
        await chain.expectRevert(
          tokenCall(encodeFunctionData({ abi, functionName: "confidentialTransfer", args: [request, signature, signature] })),
          "GuardianSignatureInvalid"
        )
      },
      confidentialTransferBatch: async () => {
        // The owner's signature on a batch item is not the guardian's: the item is skipped, the
        // transaction succeeds and moves nothing (the snapshot below checks it).
        const request = confidentialRequest({
          from: victim.account.address,
          to: owner.address,
          amount: 5_000_000n,
          fromKey: victim.key,
          toKey: ownerKey,
          guardianKey: chain.guardianKey,
          nonce: 1n,
          deadline
        })
        const signature = await signConfidential(owner, domain, request)
        await succeeds(token, encodeFunctionData({ abi, functionName: "confidentialTransferBatch", args: [[request], [signature], [signature], []] }))
      },
      publicTransfer: async () => {
        const request = publicRequest({
          from: victim.account.address,
          to: owner.address,
          amount: before.usdgPool,
          fromKey: victim.key,
          guardianKey: chain.guardianKey,
          nonce: 0n,
          deadline
        })
        const signature = await signPublic(owner, domain, request)
        await chain.expectRevert(
          tokenCall(encodeFunctionData({ abi, functionName: "publicTransfer", args: [request, signature, signature] })),
          "GuardianSignatureInvalid"
        )
      },
      rotateEncryptionKey: async () => {
        // The owner's key for the victim, with a valid proof bound to the victim: without the
        // guardian's attestation (and the victim's consent) the key and balance stay.
        const proof = proveKeyPossession(ownerKey, { chainId: chain.chainId, contract: token, account: victim.account.address })
        const { request, sign } = await keyRotationRequest(chain, token, victim.account.address, ownerKey, 0n, deadline)
        const signature = await sign(owner)
        await chain.expectRevert(
          tokenCall(encodeFunctionData({ abi, functionName: "rotateEncryptionKey", args: [request, proof, signature, signature] })),
          "GuardianSignatureInvalid"
        )
      },
      transferOwnership: async () => {
        // Hands over nothing but the power to propose; handed back at once.
        const other = await chain.newAccount()
        await succeeds(token, encodeFunctionData({ abi, functionName: "transferOwnership", args: [other.address] }))
        await chain.send(other, token, encodeFunctionData({ abi, functionName: "transferOwnership", args: [owner.address] }))
      },
      proposeGuardianRotation: async () => {
        await succeeds(token, call.propose(owner.address, ownerKey.evm))
      },
      executeGuardianRotation: async () => {
        await chain.expectRevert(tokenCall(call.execute()), "GuardianRotationNotReady")
      },
      cancelGuardianRotationBySignature: async () => {
        const { proposalId } = await read("pendingGuardianRotation")
        await chain.expectRevert(
          tokenCall(call.cancelBySignature(await signCancel(owner, proposalId, owner.address))),
          "GuardianSignatureInvalid"
        )
      },
      cancelGuardianRotation: async () => {
        await succeeds(token, call.cancel())
      }
    }
    const testUsdgPaths: Record<string, () => Promise<unknown>> = {
      transferFrom: async () => {
        const data = (from: Address) =>
          encodeFunctionData({ abi: TestUSDG.abi, functionName: "transferFrom", args: [from, owner.address, 1n] })
        await chain.expectRevert(as(chain.addresses.usdg, data(token)), "InsufficientAllowance")
        await chain.expectRevert(as(chain.addresses.usdg, data(victim.account.address)), "InsufficientAllowance")
      },
      transfer: async () => {
        // Moves the owner's own units only; it holds none outside what it shielded.
        await chain.expectRevert(
          as(chain.addresses.usdg, encodeFunctionData({ abi: TestUSDG.abi, functionName: "transfer", args: [victim.account.address, 1n] })),
          "InsufficientBalance"
        )
      },
      approve: async () => {
        await succeeds(chain.addresses.usdg, encodeFunctionData({ abi: TestUSDG.abi, functionName: "approve", args: [victim.account.address, 1n] }))
      },
      mint: async () => {
        // Prints new units to the owner (test USDG's purpose); takes none from anyone.
        await succeeds(chain.addresses.usdg, encodeFunctionData({ abi: TestUSDG.abi, functionName: "mint", args: [owner.address, 1n] }))
      },
      setMinter: async () => {
        const other = privateKeyToAccount(generatePrivateKey()).address
        await succeeds(chain.addresses.usdg, encodeFunctionData({ abi: TestUSDG.abi, functionName: "setMinter", args: [other, true] }))
      },
      transferOwnership: async () => {
        await succeeds(chain.addresses.usdg, encodeFunctionData({ abi: TestUSDG.abi, functionName: "transferOwnership", args: [owner.address] }))
      }
    }
    // WrappedEther has no privileged role at all; the owner is one more holder.
    const wrappedEtherPaths: Record<string, () => Promise<unknown>> = {
      transferFrom: async () => {
        const data = (from: Address) =>
          encodeFunctionData({ abi: WrappedEther.abi, functionName: "transferFrom", args: [from, owner.address, 1n] })
        await chain.expectRevert(as(chain.addresses.weth, data(ethPool)), "InsufficientAllowance")
        await chain.expectRevert(as(chain.addresses.weth, data(victim.account.address)), "InsufficientAllowance")
      },
      withdraw: async () => {
        await chain.expectRevert(
          as(chain.addresses.weth, encodeFunctionData({ abi: WrappedEther.abi, functionName: "withdraw", args: [1n] })),
          "InsufficientBalance"
        )
      },
      transfer: async () => {
        await chain.expectRevert(
          as(chain.addresses.weth, encodeFunctionData({ abi: WrappedEther.abi, functionName: "transfer", args: [victim.account.address, 1n] })),
          "InsufficientBalance"
        )
      },
      approve: async () => {
        await succeeds(chain.addresses.weth, encodeFunctionData({ abi: WrappedEther.abi, functionName: "approve", args: [victim.account.address, 1n] }))
      },
      deposit: async () => {
        await succeeds(chain.addresses.weth, encodeFunctionData({ abi: WrappedEther.abi, functionName: "deposit" }), 1n)
      }
    }

    const stateChanging = (contractAbi: Abi) =>
      contractAbi
        .filter((item) => item.type === "function" && item.stateMutability !== "view" && item.stateMutability !== "pure")
        .map((item) => (item as { name: string }).name)
        .sort()
    expect(Object.keys(confidentialTokenPaths).sort()).toEqual(stateChanging(ConfidentialToken.abi))
    expect(Object.keys(testUsdgPaths).sort()).toEqual(stateChanging(TestUSDG.abi))
    expect(Object.keys(wrappedEtherPaths).sort()).toEqual(stateChanging(WrappedEther.abi))

    for (const paths of [confidentialTokenPaths, testUsdgPaths, wrappedEtherPaths]) {
      for (const [name, attempt] of Object.entries(paths)) {
        await attempt()
        const after = await snapshot()
        expect({ ...after, usdgPool: after.usdgPool - ownerShieldedUsdg }, `after the owner's ${name}`).toEqual(before)
      }
    }
    await expectNothingPending()
  })
})

describe("the delay is fixed at deployment", () => {
  const deployData = (delay: bigint, asset: Address = chain.addresses.usdg) =>
    encodeDeployData({
      abi,
      bytecode: ConfidentialToken.bytecode,
      args: [asset, chain.owner.address, chain.guardian.address, chain.guardianKey.evm, delay]
    })

  it("on a test chain: 0 is allowed (propose and execute in one block's time), more than 30 days is not", async () => {
    const deployer = await chain.newAccount()
    const sender = makeSender(chain.client, deployer, 20)
    const receipt = await sender.send({ to: null, data: deployData(0n), gas: 4_000_000n })
    const instant = receipt.contractAddress as Address
    expect(await read("rotationDelaySeconds", instant)).toBe(0n)
    const next = privateKeyToAccount(generatePrivateKey())
    await chain.send(chain.owner, instant, call.propose(next.address, makeKeyPair().evm))
    await chain.send(relayer, instant, call.execute())
    expect(await read("guardianSigner", instant)).toBe(next.address)

    await expectDeployReverts(chain.client, deployer.address, deployData(delayMaxSeconds + 1n), [delayMaxSeconds + 1n, 0n, delayMaxSeconds])
    await sender.send({ to: null, data: deployData(delayMaxSeconds), gas: 4_000_000n })
  })
})

/** Simulates a deployment and expects GuardianRotationDelayOutOfRange with `args`. */
const expectDeployReverts = async (
  client: Chain["client"],
  from: Address,
  data: Hex,
  args: ReadonlyArray<bigint>
) => {
  let caught: unknown
  try {
    await client.call({ account: from, data })
  } catch (error) {
    caught = error
  }
  expect(caught, "the deployment succeeded").toBeInstanceOf(BaseError)
  const carrier = (caught as BaseError).walk((error) => typeof (error as { data?: unknown }).data === "string")
  const revertData = (carrier as { data?: Hex } | null)?.data
  expect(revertData, "no revert data").toBeTypeOf("string")
  const decoded = decodeErrorResult({ abi: errorAbi as Abi, data: revertData as Hex })
  expect(decoded.errorName).toBe("GuardianRotationDelayOutOfRange")
  expect(decoded.args).toEqual(args)
}

describe("on mainnet (chain id 4663)", () => {
  it("a ConfidentialToken with a delay under 48 hours refuses to deploy; Deploy.deploy defaults to 48 hours", async () => {
    const anvil = await Anvil.start({ chainId: Deploy.mainnetChainId, blockTimeSeconds: 0.1 })
    try {
      const transport = http(anvil.rpcUrl)
      const client = createPublicClient({ transport, pollingInterval: 20 })
      expect(await client.getChainId()).toBe(4663)
      const testClient = createTestClient({ mode: "anvil", transport })
      // One account per sender: each tracks its own nonces.
      const funded = async () => {
        const account = privateKeyToAccount(generatePrivateKey())
        await testClient.setBalance({ address: account.address, value: parseEther("100") })
        return account
      }
      const deployer = await funded()
      const guardian = privateKeyToAccount(generatePrivateKey())
      const guardianKey = makeKeyPair()
      const sender = makeSender(client, deployer, 20)
      const usdgReceipt = await sender.send({
        to: null,
        data: encodeDeployData({ abi: TestUSDG.abi, bytecode: TestUSDG.bytecode, args: [deployer.address] }),
        gas: 1_300_000n
      })
      const usdg = usdgReceipt.contractAddress as Address
      const data = (delay: bigint) =>
        encodeDeployData({ abi, bytecode: ConfidentialToken.bytecode, args: [usdg, deployer.address, guardian.address, guardianKey.evm, delay] })
      const floor = Deploy.mainnetGuardianRotationDelayMinSeconds
      expect(floor).toBe(172_800n)

      for (const delay of [0n, 5n, Deploy.testChainGuardianRotationDelaySeconds, floor - 1n]) {
        await expectDeployReverts(client, deployer.address, data(delay), [delay, floor, delayMaxSeconds])
      }
      // Mined, not only simulated: the deployment transaction itself reverts.
      await expect(sender.send({ to: null, data: data(5n), gas: 4_000_000n })).rejects.toThrow(/reverted/)
      // Deploy.deploy asking for a short delay on mainnet fails the same way.
      await expect(
        Deploy.deploy({
          client,
          deployer: await funded(),
          owner: deployer.address,
          guardianSigner: guardian.address,
          guardianEncryptionKey: guardianKey.evm,
          guardianRotationDelaySeconds: 60n,
          receiptPollingMs: 20
        })
      ).rejects.toThrow(/reverted/)

      const exact = await sender.send({ to: null, data: data(floor), gas: 4_000_000n })
      expect(await client.readContract({ address: exact.contractAddress as Address, abi, functionName: "rotationDelaySeconds" })).toBe(floor)
      const addresses = await Deploy.deploy({
        client,
        deployer: await funded(),
        owner: deployer.address,
        guardianSigner: guardian.address,
        guardianEncryptionKey: guardianKey.evm,
        receiptPollingMs: 20
      })
      for (const contract of [addresses.confidentialUsdg, addresses.confidentialEth]) {
        expect(await client.readContract({ address: contract, abi, functionName: "rotationDelaySeconds" })).toBe(floor)
      }
    } finally {
      await anvil.stop()
    }
  })
})
