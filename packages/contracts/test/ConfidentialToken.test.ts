/**
 * ConfidentialToken against a real anvil: the key registry, shield, confidential and public
 * transfers, guardian rotation and ownership, every custom error, and homomorphic correctness
 * (the on-chain balance triple equals the off-chain sum and decrypts to the plaintext balance).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type Address,
  concatHex,
  encodeFunctionData,
  type Hex,
  hexToBigInt,
  keccak256,
  type LocalAccount,
  numberToHex,
  parseEventLogs,
  size,
  slice,
  stringToHex,
  zeroAddress
} from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import * as ConfidentialToken from "../src/artifacts/ConfidentialToken.ts"
import * as TestUSDG from "../src/artifacts/TestUSDG.ts"
import * as Faucet from "../src/faucet.ts"
import * as TypedData from "../src/typedData.ts"
import { type Chain, startChain } from "./helpers/chain.ts"
import { decryptToPoint, deriveH, fromEvm, G, type KeyPair, makeKeyPair, mul, N, P, proveKeyPossession, toEvm } from "./helpers/elgamal.ts"
import {
  type ConfidentialTransferRequest,
  confidentialRequest,
  Ledger,
  newTransferId,
  publicRequest,
  type PublicTransferRequest,
  signConfidential,
  signPublic
} from "./helpers/transfers.ts"

const abi = ConfidentialToken.abi
const secp256k1N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n

let chain: Chain
let token: Address
let faucet: Faucet.Faucet
let relayer: LocalAccount
const ledger = new Ledger()

interface Party {
  readonly account: LocalAccount
  readonly key: KeyPair
  nextNonce: bigint
}

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
})

afterAll(async () => {
  await chain?.stop()
})

const domain = () => ({ chainId: chain.chainId, contract: token })
const read = {
  balance: (account: Address) => chain.client.readContract({ address: token, abi, functionName: "encryptedBalanceOf", args: [account] }),
  usdg: (account: Address) =>
    chain.client.readContract({ address: chain.addresses.usdg, abi: TestUSDG.abi, functionName: "balanceOf", args: [account] })
}
const deadlineIn = async (seconds: bigint) => (await chain.latestTimestamp()) + seconds

const registerData = (key: KeyPair, proof: Hex) =>
  encodeFunctionData({ abi, functionName: "register", args: [key.evm, proof] })

const register = async (account: LocalAccount, key: KeyPair) => {
  const proof = proveKeyPossession(key, { chainId: chain.chainId, contract: token, account: account.address })
  return chain.send(account, token, registerData(key, proof))
}

/** A registered account holding `amount` shielded USDG. */
const fundedParty = async (amount: bigint): Promise<Party> => {
  const account = await chain.newAccount()
  wallets.set(account.address, account)
  const key = makeKeyPair()
  await register(account, key)
  if (amount > 0n) {
    await faucet.shieldUsdg(account.address, amount)
    ledger.shield(account.address, amount)
  }
  return { account, key, nextNonce: 0n }
}

/** Every party's wallet by address: the sender's co-signature (D51) is made with it. */
const wallets = new Map<Address, LocalAccount>()
const walletOf = (address: Address): LocalAccount => {
  const wallet = wallets.get(address)
  if (wallet === undefined) throw new Error(`no wallet for ${address}`)
  return wallet
}

/** The call with the guardian's `signature` and, unless given, the sender's own signature over the same typed data. */
const transferData = async (request: ConfidentialTransferRequest, signature: Hex, accountSignature?: Hex) =>
  encodeFunctionData({
    abi,
    functionName: "confidentialTransfer",
    args: [request, signature, accountSignature ?? await signConfidential(walletOf(request.from), domain(), request)]
  })
const publicData = async (request: PublicTransferRequest, signature: Hex, accountSignature?: Hex) =>
  encodeFunctionData({
    abi,
    functionName: "publicTransfer",
    args: [request, signature, accountSignature ?? await signPublic(walletOf(request.from), domain(), request)]
  })

const newConfidential = async (from: Party, to: Party, amount: bigint, nonce = from.nextNonce++) =>
  confidentialRequest({
    from: from.account.address,
    to: to.account.address,
    amount,
    fromKey: from.key,
    toKey: to.key,
    guardianKey: chain.guardianKey,
    nonce,
    deadline: await deadlineIn(3600n)
  })

/** Relayed (msg.sender is the relayer, not the sender) and mirrored in the off-chain ledger. */
const sendConfidential = async (request: ConfidentialTransferRequest) => {
  const receipt = await chain.send(relayer, token, await transferData(request, await signConfidential(chain.guardian, domain(), request)))
  ledger.confidential(request)
  return receipt
}

const expectOnChainEqualsLedger = async (account: Address) => {
  expect(await read.balance(account)).toEqual(ledger.evm(account))
}

/** C − s·D for the owner's and for the guardian's key both decrypt to balance·G. */
const expectDecryptsTo = async (party: Party, balance: bigint) => {
  const onChain = await read.balance(party.account.address)
  const expected = balance === 0n ? toEvm(mul(G, 0n)) : toEvm(G.multiply(balance))
  expect(toEvm(decryptToPoint(fromEvm(onChain.commitment), fromEvm(onChain.ownerHandle), party.key.secret))).toEqual(expected)
  expect(toEvm(decryptToPoint(fromEvm(onChain.commitment), fromEvm(onChain.guardianHandle), chain.guardianKey.secret))).toEqual(
    expected
  )
}

describe("deployment and EIP-712", () => {
  it("records asset, owner, guardian and its encryption key", async () => {
    const readToken = <F extends "asset" | "owner" | "guardianSigner" | "guardianEncryptionKey">(functionName: F) =>
      chain.client.readContract({ address: token, abi, functionName })
    expect(await readToken("asset")).toBe(chain.addresses.usdg)
    expect(await readToken("owner")).toBe(chain.owner.address)
    expect(await readToken("guardianSigner")).toBe(chain.guardian.address)
    expect(await readToken("guardianEncryptionKey")).toEqual(chain.guardianKey.evm)
    // Deploy.deploy's default on a test chain, and no rotation pending.
    expect(await chain.client.readContract({ address: token, abi, functionName: "rotationDelaySeconds" })).toBe(60n)
    expect(await chain.client.readContract({ address: token, abi, functionName: "pendingGuardianRotation" })).toEqual({
      proposalId: 0n,
      newSigner: zeroAddress,
      executableAt: 0n,
      expiresAt: 0n,
      newEncryptionKey: { x: 0n, y: 0n }
    })
  })

  it("publishes H equal to the interface's derivation (counter 2, even y)", async () => {
    const derived = deriveH()
    expect(derived.counter).toBe(2)
    expect(derived.point.toAffine().y % 2n).toBe(0n)
    expect(await chain.client.readContract({ address: token, abi, functionName: "generatorH" })).toEqual(toEvm(derived.point))
  })

  it("has type hashes equal to the TypedData definitions", async () => {
    const typeString = (name: string, fields: ReadonlyArray<{ name: string; type: string }>) =>
      `${name}(${fields.map((field) => `${field.type} ${field.name}`).join(",")})`
    const cases = [
      ["CONFIDENTIAL_TRANSFER_TYPEHASH", typeString("ConfidentialTransfer", TypedData.confidentialTransferTypes.ConfidentialTransfer)],
      ["PUBLIC_TRANSFER_TYPEHASH", typeString("PublicTransfer", TypedData.publicTransferTypes.PublicTransfer)],
      ["KEY_REGISTRATION_TYPEHASH", typeString("KeyRegistration", TypedData.keyRegistrationTypes.KeyRegistration)]
    ] as const
    for (const [functionName, type] of cases) {
      expect(await chain.client.readContract({ address: token, abi, functionName })).toBe(keccak256(stringToHex(type)))
    }
    // The interface's type strings, verbatim.
    expect(cases[0][1]).toBe(
      "ConfidentialTransfer(address from,address to,bytes32 transferId,uint256 nonce,bytes32 ciphertextDigest,bytes32 sealedDigest,uint64 deadline)"
    )
    expect(cases[1][1]).toBe(
      "PublicTransfer(address from,address to,bytes32 transferId,uint256 nonce,uint256 amount,bytes32 ciphertextDigest,uint64 deadline)"
    )
  })

  it("reports its EIP-712 domain (EIP-5267) as the interface fixes it", async () => {
    const { domain: reported, fields } = await chain.client.getEip712Domain({ address: token })
    // 0x0f: name, version, chainId and verifyingContract are set; salt (reported as zero) is not.
    expect(fields).toBe("0x0f")
    expect({ ...reported, salt: undefined }).toEqual({
      name: "PPS ConfidentialToken",
      version: "2",
      chainId: chain.chainId,
      verifyingContract: token,
      salt: undefined
    })
  })
})

describe("key registry", () => {
  it("registers a key with a valid proof of possession", async () => {
    const account = await chain.newAccount()
    const key = makeKeyPair()
    const receipt = await register(account, key)
    expect(await chain.client.readContract({ address: token, abi, functionName: "isRegistered", args: [account.address] })).toBe(true)
    expect(await chain.client.readContract({ address: token, abi, functionName: "encryptionKeyOf", args: [account.address] })).toEqual(
      key.evm
    )
    const [event] = parseEventLogs({ abi, logs: receipt.logs, eventName: "KeyRegistered" })
    expect(event?.args).toEqual({ account: account.address, encryptionKey: key.evm })
  })

  it("reports no key as the identity", async () => {
    const stranger = privateKeyToAccount(generatePrivateKey()).address
    expect(await chain.client.readContract({ address: token, abi, functionName: "isRegistered", args: [stranger] })).toBe(false)
    expect(await chain.client.readContract({ address: token, abi, functionName: "encryptionKeyOf", args: [stranger] })).toEqual({
      x: 0n,
      y: 0n
    })
  })

  it("refuses a second registration", async () => {
    const account = await chain.newAccount()
    await register(account, makeKeyPair())
    const other = makeKeyPair()
    const proof = proveKeyPossession(other, { chainId: chain.chainId, contract: token, account: account.address })
    await chain.expectRevert({ account: account.address, to: token, data: registerData(other, proof) }, "KeyAlreadyRegistered", [
      account.address
    ])
  })

  it("refuses proofs bound to another account, chain or contract, or malformed", async () => {
    const account = await chain.newAccount()
    const key = makeKeyPair()
    const call = (proof: Hex) => ({ account: account.address, to: token, data: registerData(key, proof) })
    const binding = { chainId: chain.chainId, contract: token, account: account.address }
    const valid = proveKeyPossession(key, binding)
    const other = privateKeyToAccount(generatePrivateKey()).address
    await chain.expectRevert(call(proveKeyPossession(key, { ...binding, account: other })), "ProofOfPossessionInvalid")
    await chain.expectRevert(call(proveKeyPossession(key, { ...binding, chainId: 4663 })), "ProofOfPossessionInvalid")
    await chain.expectRevert(call(proveKeyPossession(key, { ...binding, contract: chain.addresses.confidentialEth })), "ProofOfPossessionInvalid")
    await chain.expectRevert(call(slice(valid, 0, 95)), "ProofOfPossessionInvalid")
    // z + n is the same scalar to ecMul, but the contract must refuse the non-canonical form.
    const z = hexToBigInt(slice(valid, 64, 96))
    await chain.expectRevert(call(concatHex([slice(valid, 0, 64), numberToHex(z + N, { size: 32 })])), "ProofOfPossessionInvalid")
    // A proof made with a different secret for the same key.
    const impostor = { ...key, secret: makeKeyPair().secret }
    await chain.expectRevert(call(proveKeyPossession(impostor, binding)), "ProofOfPossessionInvalid")
    // The valid proof still works after all that.
    expect(size(valid)).toBe(96)
    await chain.send(account, token, registerData(key, valid))
  })

  it("refuses the identity and off-curve keys, and an off-curve R", async () => {
    const account = await chain.newAccount()
    const identity = { ...makeKeyPair(), evm: { x: 0n, y: 0n } }
    const identityProof = concatHex([numberToHex(0n, { size: 64 }), numberToHex(1n, { size: 32 })])
    await chain.expectRevert({ account: account.address, to: token, data: registerData(identity, identityProof) }, "InvalidEncryptionKey")
    const offCurve = { ...makeKeyPair(), evm: { x: 1n, y: 3n } }
    await chain.expectRevert({ account: account.address, to: token, data: registerData(offCurve, identityProof) }, "InvalidPoint")
    const outOfField = { ...makeKeyPair(), evm: { x: 1n, y: 2n + P } }
    await chain.expectRevert({ account: account.address, to: token, data: registerData(outOfField, identityProof) }, "InvalidPoint")
    const key = makeKeyPair()
    const valid = proveKeyPossession(key, { chainId: chain.chainId, contract: token, account: account.address })
    const badR = concatHex([numberToHex(1n, { size: 32 }), numberToHex(3n, { size: 32 }), slice(valid, 64, 96)])
    await chain.expectRevert({ account: account.address, to: token, data: registerData(key, badR) }, "InvalidPoint")
  })

  it("registerFor: a relayer registers with the account's EIP-712 consent and the key's proof", async () => {
    const account = privateKeyToAccount(generatePrivateKey()) // holds no gas at all
    const key = makeKeyPair()
    const proof = proveKeyPossession(key, { chainId: chain.chainId, contract: token, account: account.address })
    const consent = (signer: LocalAccount, chainId = chain.chainId) =>
      signer.signTypedData({
        domain: TypedData.domain(chainId, token),
        types: TypedData.keyRegistrationTypes,
        primaryType: "KeyRegistration",
        message: { account: account.address, keyX: key.evm.x, keyY: key.evm.y }
      })
    const data = (signature: Hex) =>
      encodeFunctionData({ abi, functionName: "registerFor", args: [account.address, key.evm, proof, signature] })
    // Someone else's consent, or consent for another chain, does not count.
    const stranger = privateKeyToAccount(generatePrivateKey())
    await chain.expectRevert({ account: relayer.address, to: token, data: data(await consent(stranger)) }, "AccountSignatureInvalid", [
      account.address
    ])
    await chain.expectRevert({ account: relayer.address, to: token, data: data(await consent(account, 4663)) }, "AccountSignatureInvalid")
    await chain.send(relayer, token, data(await consent(account)))
    expect(await chain.client.readContract({ address: token, abi, functionName: "encryptionKeyOf", args: [account.address] })).toEqual(
      key.evm
    )
  })

  it("registerFor: the zero address cannot be claimed with a signature that fails to recover", async () => {
    const key = makeKeyPair()
    const proof = proveKeyPossession(key, { chainId: chain.chainId, contract: token, account: zeroAddress })
    // r = 0 makes ecrecover return zero.
    const unrecoverable = concatHex([numberToHex(0n, { size: 32 }), numberToHex(1n, { size: 32 }), "0x1b"])
    await chain.expectRevert(
      {
        account: relayer.address,
        to: token,
        data: encodeFunctionData({ abi, functionName: "registerFor", args: [zeroAddress, key.evm, proof, unrecoverable] })
      },
      "AccountSignatureInvalid"
    )
  })
})

describe("shield", () => {
  it("moves public USDG in and credits (a·G, 0, 0)", async () => {
    const party = await fundedParty(0n)
    const before = await read.usdg(token)
    const hash = await faucet.shieldUsdg(party.account.address, 2_500_000n)
    ledger.shield(party.account.address, 2_500_000n)
    expect((await read.usdg(token)) - before).toBe(2_500_000n)
    expect(await read.balance(party.account.address)).toEqual({
      commitment: toEvm(G.multiply(2_500_000n)),
      ownerHandle: { x: 0n, y: 0n },
      guardianHandle: { x: 0n, y: 0n }
    })
    const receipt = await chain.client.getTransactionReceipt({ hash })
    const [event] = parseEventLogs({ abi, logs: receipt.logs, eventName: "Shielded" })
    expect(event?.args).toEqual({ from: faucet.address, to: party.account.address, amount: 2_500_000n })
    await expectDecryptsTo(party, 2_500_000n)
  })

  it("refuses a zero amount, an amount of n or more, the zero address and a missing approval", async () => {
    const account = await chain.newAccount()
    const shieldCall = (to: Address, amount: bigint) => ({
      account: account.address,
      to: token,
      data: encodeFunctionData({ abi, functionName: "shield", args: [to, amount] })
    })
    await chain.expectRevert(shieldCall(account.address, 0n), "AmountOutOfRange", [0n])
    await chain.expectRevert(shieldCall(account.address, N), "AmountOutOfRange", [N])
    await chain.expectRevert(shieldCall(zeroAddress, 1n), "ZeroAddress")
    await chain.expectRevert(shieldCall(account.address, 1n), "InsufficientAllowance", [token, 0n, 1n])
  })
})

describe("confidentialTransfer", () => {
  let alice: Party
  let bob: Party

  beforeAll(async () => {
    alice = await fundedParty(10_000_000n)
    bob = await fundedParty(3_000_000n)
  })

  it("debits and credits homomorphically, relayed, with an event carrying the ciphertext", async () => {
    const request = await newConfidential(alice, bob, 1_250_000n)
    const receipt = await sendConfidential(request)
    await expectOnChainEqualsLedger(alice.account.address)
    await expectOnChainEqualsLedger(bob.account.address)
    await expectDecryptsTo(alice, 8_750_000n)
    await expectDecryptsTo(bob, 4_250_000n)
    const [event] = parseEventLogs({ abi, logs: receipt.logs, eventName: "ConfidentialTransfer" })
    expect(event?.args).toEqual({
      from: request.from,
      to: request.to,
      transferId: request.transferId,
      nonce: request.nonce,
      commitment: request.commitment,
      fromHandle: request.fromHandle,
      toHandle: request.toHandle,
      guardianHandle: request.guardianHandle,
      sealedDigest: request.sealedDigest
    })
    expect(receipt.from).toBe(relayer.address.toLowerCase())
  })

  it("accepts nonces in any order, each exactly once", async () => {
    const late = await newConfidential(alice, bob, 1n, 5_000n)
    const early = await newConfidential(alice, bob, 2n, 3n)
    await sendConfidential(late)
    await sendConfidential(early)
    for (const nonce of [3n, 5_000n]) {
      expect(await chain.client.readContract({ address: token, abi, functionName: "isNonceUsed", args: [alice.account.address, nonce] })).toBe(true)
    }
    expect(await chain.client.readContract({ address: token, abi, functionName: "isNonceUsed", args: [alice.account.address, 4n] })).toBe(false)
    expect(await chain.client.readContract({ address: token, abi, functionName: "nonceBitmap", args: [alice.account.address, 0n] })).toBe(
      (1n << 0n) | (1n << 3n)
    )
    await expectDecryptsTo(alice, 8_749_997n)
    await expectDecryptsTo(bob, 4_250_003n)
  })

  it("refuses a replayed nonce, in simulation and when mined (the transaction reverts)", async () => {
    const request = await newConfidential(alice, bob, 10n)
    const signature = await signConfidential(chain.guardian, domain(), request)
    await sendConfidential(request)
    await chain.expectRevert({ account: relayer.address, to: token, data: await transferData(request, signature) }, "NonceUsed", [
      alice.account.address,
      request.nonce
    ])
    // Same nonce, different transfer id and ciphertext: still refused, the nonce is the replay key.
    const again = { ...(await newConfidential(alice, bob, 10n, request.nonce)), transferId: newTransferId() }
    await chain.expectRevert(
      { account: relayer.address, to: token, data: await transferData(again, await signConfidential(chain.guardian, domain(), again)) },
      "NonceUsed"
    )
    await expect(chain.send(relayer, token, await transferData(request, signature), 300_000n)).rejects.toThrow(/reverted/)
    await expectOnChainEqualsLedger(alice.account.address)
  })

  it("refuses an expired deadline", async () => {
    const request = { ...(await newConfidential(alice, bob, 1n)), deadline: (await chain.latestTimestamp()) - 10n }
    await chain.expectRevert(
      { account: relayer.address, to: token, data: await transferData(request, await signConfidential(chain.guardian, domain(), request)) },
      "DeadlineExpired",
      [request.deadline]
    )
  })

  it("refuses signatures from anyone but the guardian, for another chain or contract, or over other fields", async () => {
    const request = await newConfidential(alice, bob, 1n)
    const call = async (signature: Hex, body = request) => ({ account: relayer.address, to: token, data: await transferData(body, signature) })
    const impostor = privateKeyToAccount(generatePrivateKey())
    await chain.expectRevert(await call(await signConfidential(impostor, domain(), request)), "GuardianSignatureInvalid")
    await chain.expectRevert(await call(await signConfidential(chain.guardian, { ...domain(), chainId: 4663 }, request)), "GuardianSignatureInvalid")
    await chain.expectRevert(
      await call(await signConfidential(chain.guardian, { ...domain(), contract: chain.addresses.confidentialEth }, request)),
      "GuardianSignatureInvalid"
    )
    const signature = await signConfidential(chain.guardian, domain(), request)
    const swapped = await newConfidential(alice, bob, 1_000_000n, request.nonce)
    await chain.expectRevert(await call(signature, { ...swapped, transferId: request.transferId, sealedDigest: request.sealedDigest, deadline: request.deadline }), "GuardianSignatureInvalid")
    await chain.expectRevert(await call(signature, { ...request, to: alice.account.address }), "GuardianSignatureInvalid")
    await chain.expectRevert(await call(signature, { ...request, sealedDigest: keccak256("0x01") }), "GuardianSignatureInvalid")
    await chain.expectRevert(await call(signature, { ...request, transferId: newTransferId() }), "GuardianSignatureInvalid")
  })

  it("refuses a high-s twin of a valid signature and malformed signatures", async () => {
    const request = await newConfidential(alice, bob, 7n)
    const signature = await signConfidential(chain.guardian, domain(), request)
    const r = slice(signature, 0, 32)
    const s = hexToBigInt(slice(signature, 32, 64))
    const v = hexToBigInt(slice(signature, 64, 65))
    // (r, n − s, v flipped) recovers the same signer: ecrecover alone would accept it.
    const twin = concatHex([r, numberToHex(secp256k1N - s, { size: 32 }), numberToHex(v === 27n ? 28n : 27n, { size: 1 })])
    const call = async (sig: Hex) => ({ account: relayer.address, to: token, data: await transferData(request, sig) })
    await chain.expectRevert(await call(twin), "SignatureHighS")
    await chain.expectRevert(await call(slice(signature, 0, 64)), "SignatureMalformed")
    await chain.expectRevert(await call(concatHex([slice(signature, 0, 64), "0x1d"])), "SignatureMalformed")
    await chain.expectRevert(await call(concatHex([signature, "0x00"])), "SignatureMalformed")
    await sendConfidential(request)
    await expectOnChainEqualsLedger(bob.account.address)
  })

  it("refuses off-curve and out-of-field points even when the guardian signed them", async () => {
    const base = await newConfidential(alice, bob, 1n)
    const cases: ReadonlyArray<[string, ConfidentialTransferRequest]> = [
      ["commitment off the curve", { ...base, commitment: { x: 1n, y: 3n } }],
      ["sender handle off the curve", { ...base, fromHandle: { x: 1n, y: 3n } }],
      // −(x, y) with y ≥ p would alias a valid point after P − y; the contract checks y first.
      ["sender handle y = y + p", { ...base, fromHandle: { x: base.fromHandle.x, y: base.fromHandle.y + P } }],
      ["sender handle y = p", { ...base, fromHandle: { x: 0n, y: P } }],
      ["recipient handle off the curve", { ...base, toHandle: { x: 5n, y: 5n } }],
      ["guardian handle x = x + p", { ...base, guardianHandle: { x: base.guardianHandle.x + P, y: base.guardianHandle.y } }]
    ]
    for (const [, request] of cases) {
      const signature = await signConfidential(chain.guardian, domain(), request)
      await chain.expectRevert({ account: relayer.address, to: token, data: await transferData(request, signature) }, "InvalidPoint")
    }
  })
})

describe("publicTransfer", () => {
  let carol: Party

  beforeAll(async () => {
    carol = await fundedParty(5_000_000n)
  })

  const newPublic = async (to: Address, amount: bigint, nonce = carol.nextNonce++) =>
    publicRequest({
      from: carol.account.address,
      to,
      amount,
      fromKey: carol.key,
      guardianKey: chain.guardianKey,
      nonce,
      deadline: await deadlineIn(3600n)
    })

  it("pays public USDG to a third party and debits the ciphertext", async () => {
    const payee = privateKeyToAccount(generatePrivateKey()).address
    const request = await newPublic(payee, 1_500_000n)
    const receipt = await chain.send(relayer, token, await publicData(request, await signPublic(chain.guardian, domain(), request)))
    ledger.public(request)
    expect(await read.usdg(payee)).toBe(1_500_000n)
    await expectOnChainEqualsLedger(carol.account.address)
    await expectDecryptsTo(carol, 3_500_000n)
    const [event] = parseEventLogs({ abi, logs: receipt.logs, eventName: "PublicTransfer" })
    expect(event?.args).toEqual({
      from: request.from,
      to: payee,
      transferId: request.transferId,
      nonce: request.nonce,
      amount: 1_500_000n,
      commitment: request.commitment,
      fromHandle: request.fromHandle,
      guardianHandle: request.guardianHandle
    })
  })

  it("unshields when to is the sender", async () => {
    const request = await newPublic(carol.account.address, 500_000n)
    await chain.send(relayer, token, await publicData(request, await signPublic(chain.guardian, domain(), request)))
    ledger.public(request)
    expect(await read.usdg(carol.account.address)).toBe(500_000n)
    await expectDecryptsTo(carol, 3_000_000n)
  })

  it("shares the sender's nonce space with confidential transfers and refuses replays", async () => {
    const request = await newPublic(carol.account.address, 1n)
    const signature = await signPublic(chain.guardian, domain(), request)
    await chain.send(relayer, token, await publicData(request, signature))
    ledger.public(request)
    await chain.expectRevert({ account: relayer.address, to: token, data: await publicData(request, signature) }, "NonceUsed", [
      carol.account.address,
      request.nonce
    ])
    const dave = await fundedParty(0n)
    const confidential = await newConfidential(carol, dave, 1n, request.nonce)
    await chain.expectRevert(
      { account: relayer.address, to: token, data: await transferData(confidential, await signConfidential(chain.guardian, domain(), confidential)) },
      "NonceUsed"
    )
  })

  it("refuses a changed amount, zero amount, zero recipient, expired deadline and high-s", async () => {
    const request = await newPublic(carol.account.address, 100n)
    const signature = await signPublic(chain.guardian, domain(), request)
    const call = async (body: PublicTransferRequest, sig: Hex) => ({ account: relayer.address, to: token, data: await publicData(body, sig) })
    await chain.expectRevert(await call({ ...request, amount: 101n }, signature), "GuardianSignatureInvalid")
    await chain.expectRevert(await call({ ...request, amount: 0n }, signature), "AmountOutOfRange", [0n])
    await chain.expectRevert(await call({ ...request, to: zeroAddress }, signature), "ZeroAddress")
    const expired = { ...request, deadline: (await chain.latestTimestamp()) - 10n }
    await chain.expectRevert(await call(expired, await signPublic(chain.guardian, domain(), expired)), "DeadlineExpired")
    const s = hexToBigInt(slice(signature, 32, 64))
    const v = hexToBigInt(slice(signature, 64, 65))
    const twin = concatHex([slice(signature, 0, 32), numberToHex(secp256k1N - s, { size: 32 }), numberToHex(v === 27n ? 28n : 27n, { size: 1 })])
    await chain.expectRevert(await call(request, twin), "SignatureHighS")
    const offCurve = { ...request, fromHandle: { x: 1n, y: 3n } }
    await chain.expectRevert(await call(offCurve, await signPublic(chain.guardian, domain(), offCurve)), "InvalidPoint")
  })
})

describe("roles", () => {
  it("rotates the guardian (through the timelock): old attestations stop verifying, their nonces stay usable", async () => {
    // A second ConfidentialToken instance would need a new deployment; rotating the shared one
    // and rotating back keeps the other tests independent of order. The timelock itself is
    // tested in GuardianRotation.test.ts.
    const erin = await fundedParty(1_000n)
    const frank = await fundedParty(0n)
    const delaySeconds = await chain.client.readContract({ address: token, abi, functionName: "rotationDelaySeconds" })
    const rotate = async (signer: Address, key: { x: bigint; y: bigint }) => {
      await chain.send(chain.owner, token, encodeFunctionData({ abi, functionName: "proposeGuardianRotation", args: [signer, key] }))
      await chain.advanceTime(delaySeconds)
      return chain.send(relayer, token, encodeFunctionData({ abi, functionName: "executeGuardianRotation" }))
    }
    const next = privateKeyToAccount(generatePrivateKey())
    const nextKey = makeKeyPair()

    const request = await newConfidential(erin, frank, 10n)
    const oldSignature = await signConfidential(chain.guardian, domain(), request)
    const receipt = await rotate(next.address, nextKey.evm)
    const [event] = parseEventLogs({ abi, logs: receipt.logs, eventName: "GuardianRotated" })
    expect(event?.args).toEqual({ previousSigner: chain.guardian.address, newSigner: next.address, encryptionKey: nextKey.evm })
    expect(await chain.client.readContract({ address: token, abi, functionName: "guardianEncryptionKey" })).toEqual(nextKey.evm)
    try {
      await chain.expectRevert({ account: relayer.address, to: token, data: await transferData(request, oldSignature) }, "GuardianSignatureInvalid")
      await chain.send(relayer, token, await transferData(request, await signConfidential(next, domain(), request)))
      ledger.confidential(request)
      await expectOnChainEqualsLedger(frank.account.address)
    } finally {
      await rotate(chain.guardian.address, chain.guardianKey.evm)
    }
    expect(await chain.client.readContract({ address: token, abi, functionName: "guardianSigner" })).toBe(chain.guardian.address)
  })

  it("transfers ownership only from the owner and never to zero", async () => {
    const successor = await chain.newAccount()
    const transfer = (to: Address) => encodeFunctionData({ abi, functionName: "transferOwnership", args: [to] })
    await chain.expectRevert({ account: relayer.address, to: token, data: transfer(relayer.address) }, "NotOwner")
    await chain.expectRevert({ account: chain.owner.address, to: token, data: transfer(zeroAddress) }, "ZeroAddress")
    await chain.send(chain.owner, token, transfer(successor.address))
    expect(await chain.client.readContract({ address: token, abi, functionName: "owner" })).toBe(successor.address)
    await chain.send(successor, token, transfer(chain.owner.address))
    expect(await chain.client.readContract({ address: token, abi, functionName: "owner" })).toBe(chain.owner.address)
  })
})

describe("gas", () => {
  it("a steady-state confidential transfer costs at most 112k gas (111.0k measured: 108.6k in v1, the sender's co-signature, D51, adds ~5.4k, three-word balances, D66, take ~3k off)", async () => {
    const sender = await fundedParty(1_000_000n)
    const recipient = await fundedParty(1_000_000n)
    // Warm-up: each side's first debit turns its handle sums from zero to non-zero (new slots).
    await sendConfidential(await newConfidential(sender, recipient, 1n))
    await sendConfidential(await newConfidential(recipient, sender, 1n))
    const used: Array<bigint> = []
    for (let round = 0; round < 8; round++) {
      const [from, to] = round % 2 === 0 ? [sender, recipient] : [recipient, sender]
      used.push((await sendConfidential(await newConfidential(from, to, 1_000n))).gasUsed)
    }
    const median = [...used].sort((a, b) => Number(a - b))[used.length / 2] ?? 0n
    expect(median).toBeGreaterThan(50_000n)
    expect(median).toBeLessThanOrEqual(112_000n)
    await expectDecryptsTo(sender, 1_000_000n)
    await expectDecryptsTo(recipient, 1_000_000n)
  })
})
