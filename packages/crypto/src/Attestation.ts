/**
 * The guardian's attestation: EIP-712 typed data over a transfer, signed with the
 * guardian's secp256k1 key and checked on chain with ecrecover (low-s only).
 *
 * domain = { name: "PPS ConfidentialToken", version: "2", chainId, verifyingContract }
 * (version 2: ConfidentialToken v2, D53, where the sender signs the same typed data beside the guardian, D51)
 * ConfidentialTransfer(address from,address to,bytes32 transferId,uint256 nonce,
 *   bytes32 ciphertextDigest,bytes32 sealedDigest,uint64 deadline)
 * PublicTransfer(address from,address to,bytes32 transferId,uint256 nonce,uint256 amount,
 *   bytes32 ciphertextDigest,uint64 deadline)
 *
 * A public transfer debits the sender's ciphertext (C, D_from, D_guardian), whose digest is
 * keccak256(C ‖ D_from ‖ D_guardian), and pays `amount` public tokens to `to`; an unshield
 * is a public transfer to the sender's own address. Signatures are 65 bytes r ‖ s ‖ v
 * with v ∈ {27, 28} and s ≤ n/2.
 *
 * The guardian, the server and the contract tests all build the typed data here, so the
 * three cannot drift apart.
 *
 * @since 0.1.0
 */
import { secp256k1 } from "@noble/curves/secp256k1.js"
import { bytesToHex, hexToBytes } from "@noble/hashes/utils.js"
import { keccak_256 } from "@noble/hashes/sha3.js"
import { type Address, getAddress, type Hex, isAddress } from "viem"
import { addressBytes, concatBytes, uintBE, utf8 } from "./internal/bytes.ts"
import { fail, type Result, succeed } from "./Result.ts"

/**
 * The EIP-712 domain name.
 *
 * @since 0.1.0
 * @category constants
 */
export const domainName = "PPS ConfidentialToken"

/**
 * The EIP-712 domain version.
 *
 * @since 0.1.0
 * @category constants
 */
export const domainVersion = "2"

/**
 * The EIP-712 struct types, in viem's form.
 *
 * @since 0.1.0
 * @category constants
 */
export const types = {
  ConfidentialTransfer: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "transferId", type: "bytes32" },
    { name: "nonce", type: "uint256" },
    { name: "ciphertextDigest", type: "bytes32" },
    { name: "sealedDigest", type: "bytes32" },
    { name: "deadline", type: "uint64" }
  ],
  PublicTransfer: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "transferId", type: "bytes32" },
    { name: "nonce", type: "uint256" },
    { name: "amount", type: "uint256" },
    { name: "ciphertextDigest", type: "bytes32" },
    { name: "deadline", type: "uint64" }
  ]
} as const

/**
 * The EIP-712 domain of one ConfidentialToken.
 *
 * @since 0.1.0
 * @category models
 */
export interface Domain {
  readonly name: typeof domainName
  readonly version: typeof domainVersion
  readonly chainId: bigint
  readonly verifyingContract: Address
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ConfidentialTransfer {
  readonly from: Address
  readonly to: Address
  readonly transferId: Hex
  readonly nonce: bigint
  readonly ciphertextDigest: Hex
  readonly sealedDigest: Hex
  readonly deadline: bigint
}

/**
 * @since 0.1.0
 * @category models
 */
export interface PublicTransfer {
  readonly from: Address
  readonly to: Address
  readonly transferId: Hex
  readonly nonce: bigint
  readonly amount: bigint
  readonly ciphertextDigest: Hex
  readonly deadline: bigint
}

/**
 * Typed data of a confidential transfer, ready for viem.
 *
 * @since 0.1.0
 * @category models
 */
export interface ConfidentialTransferTypedData {
  readonly domain: Domain
  readonly types: typeof types
  readonly primaryType: "ConfidentialTransfer"
  readonly message: ConfidentialTransfer
}

/**
 * Typed data of a public transfer, ready for viem.
 *
 * @since 0.1.0
 * @category models
 */
export interface PublicTransferTypedData {
  readonly domain: Domain
  readonly types: typeof types
  readonly primaryType: "PublicTransfer"
  readonly message: PublicTransfer
}

/**
 * Typed data ready for viem (`hashTypedData`, `signTypedData`, `verifyTypedData`).
 *
 * @since 0.1.0
 * @category models
 */
export type TypedData = ConfidentialTransferTypedData | PublicTransferTypedData

/**
 * Why a signature was refused.
 *
 * @since 0.1.0
 * @category errors
 */
export type SignatureError = "signature_length_invalid" | "signature_v_invalid" | "signature_high_s" | "signature_invalid"

const uint64Limit = 1n << 64n

/**
 * The domain of the ConfidentialToken at `verifyingContract` on `chainId`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const domain = (chainId: bigint, verifyingContract: Address): Domain => ({
  name: domainName,
  version: domainVersion,
  chainId,
  verifyingContract: getAddress(verifyingContract)
})

const assertDeadline = (deadline: bigint): void => {
  if (deadline < 0n || deadline >= uint64Limit) throw new RangeError("deadline must fit in uint64")
}

/**
 * Typed data of a confidential transfer.
 *
 * @since 0.1.0
 * @category constructors
 */
export const confidentialTransfer = (domainValue: Domain, message: ConfidentialTransfer): ConfidentialTransferTypedData => {
  assertDeadline(message.deadline)
  return { domain: domainValue, types, primaryType: "ConfidentialTransfer", message }
}

/**
 * Typed data of a public transfer (and of an unshield, `to` = `from`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const publicTransfer = (domainValue: Domain, message: PublicTransfer): PublicTransferTypedData => {
  assertDeadline(message.deadline)
  return { domain: domainValue, types, primaryType: "PublicTransfer", message }
}

// ---- EIP-712, encoded directly ----------------------------------------------------------------
//
// viem's `hashTypedData` derives the encoding from the types on every call (type strings, ABI
// encoding, validation through its generic paths): ~150 µs a digest, measured on the guardian's
// per-transfer path. The two message types and the domain are fixed, so the encoding is written
// out here: keccak256 of 32-byte words, the type hashes computed once from `types`, and the
// domain separator kept per (chainId, contract). It gives viem's bytes for every valid input and
// refuses what viem refuses (test/Attestation.test.ts compares the two on random inputs).

/** EIP-712's encodeType for a struct without nested struct types: `Name(type1 name1,type2 name2,...)`. */
const encodeType = (name: string, fields: ReadonlyArray<{ readonly name: string; readonly type: string }>) =>
  `${name}(${fields.map((field) => `${field.type} ${field.name}`).join(",")})`

const typeHashes = {
  EIP712Domain: keccak_256(utf8(encodeType("EIP712Domain", [
    { name: "name", type: "string" },
    { name: "version", type: "string" },
    { name: "chainId", type: "uint256" },
    { name: "verifyingContract", type: "address" }
  ]))),
  ConfidentialTransfer: keccak_256(utf8(encodeType("ConfidentialTransfer", types.ConfidentialTransfer))),
  PublicTransfer: keccak_256(utf8(encodeType("PublicTransfer", types.PublicTransfer)))
}

/** A word of the encoding: an address, checked as viem checks it (a mixed-case address must carry its checksum). */
const addressWord = (words: Uint8Array, index: number, value: string): void => {
  if (!isAddress(value)) throw new TypeError(`not an address: ${value}`)
  words.set(addressBytes(value), 32 * index + 12)
}

const bytes32Pattern = /^0x[0-9a-fA-F]{64}$/

const bytes32Word = (words: Uint8Array, index: number, value: string): void => {
  if (!bytes32Pattern.test(value)) throw new TypeError("bytes32 must be 0x followed by 64 hex digits")
  words.set(hexToBytes(value.slice(2)), 32 * index)
}

/** An unsigned integer word; `bits` is its Solidity width (the value must fit, as viem requires). */
const uintWord = (words: Uint8Array, index: number, value: bigint, bits: 64 | 256): void => {
  if (typeof value !== "bigint" || value < 0n || value >= 1n << BigInt(bits)) throw new RangeError(`not a uint${bits}`)
  words.set(uintBE(value, 32), 32 * index)
}

/** Domain separators by chain id and contract: a service signs for a handful of them. */
const domainSeparators = new Map<string, Uint8Array>()
const domainSeparatorsMax = 64

const domainSeparator = (value: Domain): Uint8Array => {
  // Checked before the cache: a number equal to a cached bigint must be refused as on a miss.
  if (typeof value.chainId !== "bigint") throw new TypeError("chainId must be a bigint")
  const key = `${value.chainId}:${value.verifyingContract}:${value.name}:${value.version}`
  const known = domainSeparators.get(key)
  if (known !== undefined) return known
  const words = new Uint8Array(5 * 32)
  words.set(typeHashes.EIP712Domain, 0)
  words.set(keccak_256(utf8(value.name)), 32)
  words.set(keccak_256(utf8(value.version)), 64)
  uintWord(words, 3, value.chainId, 256)
  addressWord(words, 4, value.verifyingContract)
  const separator = keccak_256(words)
  // A crude bound: forgetting costs one hash again.
  if (domainSeparators.size >= domainSeparatorsMax) domainSeparators.clear()
  domainSeparators.set(key, separator)
  return separator
}

/** hashStruct(message): keccak256(typeHash ‖ the fields' words, in the type's order). */
const structHash = (typedData: TypedData): Uint8Array => {
  const words = new Uint8Array(8 * 32)
  const { message } = typedData
  words.set(typeHashes[typedData.primaryType], 0)
  addressWord(words, 1, message.from)
  addressWord(words, 2, message.to)
  bytes32Word(words, 3, message.transferId)
  uintWord(words, 4, message.nonce, 256)
  if (typedData.primaryType === "ConfidentialTransfer") {
    bytes32Word(words, 5, typedData.message.ciphertextDigest)
    bytes32Word(words, 6, typedData.message.sealedDigest)
  } else {
    uintWord(words, 5, typedData.message.amount, 256)
    bytes32Word(words, 6, typedData.message.ciphertextDigest)
  }
  uintWord(words, 7, message.deadline, 64)
  return keccak_256(words)
}

const eip712Prefix = Uint8Array.of(0x19, 0x01)

/** The digest as bytes (what a signer signs). */
const digestBytes = (typedData: TypedData): Uint8Array =>
  keccak_256(concatBytes(eip712Prefix, domainSeparator(typedData.domain), structHash(typedData)))

/**
 * The EIP-712 digest keccak256(0x1901 ‖ domainSeparator ‖ hashStruct(message)).
 *
 * @since 0.1.0
 * @category digests
 */
export const digest = (typedData: TypedData): Hex => `0x${bytesToHex(digestBytes(typedData))}`

let signingTablePrepared = false

// noble builds its secp256k1 base-point table lazily with a small window; building the
// full 8-bit table once measured 507 µs → 300 µs per signature, which matters on the
// guardian's per-transfer path. Done on first use so that importing stays cheap.
const prepareSigningTable = (): void => {
  if (signingTablePrepared) return
  secp256k1.Point.BASE.precompute(8, false)
  signingTablePrepared = true
}

/**
 * What signs a 32-byte digest with one secp256k1 key: deterministic (RFC 6979), low-s; the
 * 64 bytes r ‖ s and the recovery id. Every implementation gives the same bytes for the same
 * key and digest, so the choice is speed only (the guardian's is WebAssembly libsecp256k1).
 *
 * @since 0.4.0
 * @category models
 */
export type DigestSigner = (digest: Uint8Array) => { readonly signature: Uint8Array; readonly recoveryId: number }

/**
 * The pure-TypeScript digest signer (noble), for any runtime.
 *
 * @since 0.4.0
 * @category constructors
 */
export const nobleDigestSigner = (privateKey: Uint8Array): DigestSigner => (toSign) => {
  prepareSigningTable()
  const recovered = secp256k1.sign(toSign, privateKey, { prehash: false, lowS: true, format: "recovered" })
  return { signature: recovered.subarray(1, 65), recoveryId: recovered[0] ?? 0 }
}

/**
 * Signs typed data with a digest signer: 65 bytes r ‖ s ‖ v, v = 27 + recovery id, hex-encoded.
 *
 * @since 0.4.0
 * @category constructors
 */
export const signWith = (signer: DigestSigner, typedData: TypedData): Hex => {
  const { recoveryId, signature } = signer(digestBytes(typedData))
  return `0x${bytesToHex(concatBytes(signature, Uint8Array.of(27 + recoveryId)))}`
}

/**
 * Signs typed data with a secp256k1 private key (32 bytes): deterministic (RFC 6979),
 * low-s, returned as 65 bytes r ‖ s ‖ v, v = 27 + recovery id, hex-encoded.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sign = (privateKey: Uint8Array, typedData: TypedData): Hex => signWith(nobleDigestSigner(privateKey), typedData)

/**
 * The address of a secp256k1 private key (what the contract is configured with).
 *
 * @since 0.1.0
 * @category getters
 */
export const signerAddress = (privateKey: Uint8Array): Address => {
  const uncompressed = secp256k1.getPublicKey(privateKey, false)
  return getAddress(`0x${bytesToHex(keccak_256(uncompressed.subarray(1)).subarray(12))}`)
}

/**
 * Recovers the signer of typed data as the contract does (ecrecover, refusing high s and
 * any v other than 27 or 28).
 *
 * @since 0.1.0
 * @category validation
 */
export const recoverSigner = (typedData: TypedData, signature: Hex): Result<Address, SignatureError> => {
  if (!/^0x[0-9a-fA-F]{130}$/.test(signature)) return fail("signature_length_invalid")
  const bytes = hexToBytes(signature.slice(2))
  const v = bytes[64] ?? 0
  if (v !== 27 && v !== 28) return fail("signature_v_invalid")
  try {
    const parsed = secp256k1.Signature.fromBytes(bytes.subarray(0, 64), "compact")
    if (parsed.hasHighS()) return fail("signature_high_s")
    const publicKey = parsed
      .addRecoveryBit(v - 27)
      .recoverPublicKey(digestBytes(typedData))
      .toBytes(false)
    return succeed(getAddress(`0x${bytesToHex(keccak_256(publicKey.subarray(1)).subarray(12))}`))
  } catch {
    return fail("signature_invalid")
  }
}
