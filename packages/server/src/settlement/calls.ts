/**
 * Calldata of the ConfidentialToken calls the server submits, from the crypto
 * package's 64-byte points (EVM x ‖ y) to the contract's `Point { x, y }` structs.
 *
 * @since 0.1.0
 */
import { ConfidentialTokenArtifact, type RootHints } from "@pps/contracts"
import { type Address, bytesToBigInt, bytesToHex, concatBytes, encodeFunctionData, getAbiItem, type Hex, numberToBytes, toFunctionSelector } from "viem"

/**
 * A BN254 point in the contract's form.
 *
 * @since 0.1.0
 * @category models
 */
export interface EvmPoint {
  readonly x: bigint
  readonly y: bigint
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const toEvmPoint = (point: Uint8Array): EvmPoint => ({
  x: bytesToBigInt(point.subarray(0, 32)),
  y: bytesToBigInt(point.subarray(32, 64))
})

/**
 * The 64-byte EVM encoding (x ‖ y) of a point read from the contract.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromEvmPoint = (point: EvmPoint): Uint8Array => concatBytes([numberToBytes(point.x, { size: 32 }), numberToBytes(point.y, { size: 32 })])

/**
 * The ciphertext of a confidential transfer: C and the sender's, recipient's and
 * guardian's handles, each 64 bytes.
 *
 * @since 0.1.0
 * @category models
 */
export interface TransferCiphertext {
  readonly commitment: Uint8Array
  readonly fromHandle: Uint8Array
  readonly toHandle: Uint8Array
  readonly guardianHandle: Uint8Array
}

/**
 * The two signatures a debit carries in ConfidentialToken v2 (D51): the guardian's attestation
 * and the sender's own signature over the same typed data.
 *
 * @since 0.5.0
 * @category models
 */
export interface DebitSignatures {
  readonly guardian: Hex
  readonly account: Hex
}

/**
 * `confidentialTransfer(request, guardianSignature, accountSignature)`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const confidentialTransferCall = (
  request: {
    readonly from: Address
    readonly to: Address
    readonly transferId: Hex
    readonly nonce: bigint
    readonly ciphertext: TransferCiphertext
    readonly sealedDigest: Hex
    readonly deadlineSeconds: bigint
  },
  signatures: DebitSignatures
): Hex =>
  encodeFunctionData({
    abi: ConfidentialTokenArtifact.abi,
    functionName: "confidentialTransfer",
    args: [
      {
        from: request.from,
        to: request.to,
        transferId: request.transferId,
        nonce: request.nonce,
        commitment: toEvmPoint(request.ciphertext.commitment),
        fromHandle: toEvmPoint(request.ciphertext.fromHandle),
        toHandle: toEvmPoint(request.ciphertext.toHandle),
        guardianHandle: toEvmPoint(request.ciphertext.guardianHandle),
        sealedDigest: request.sealedDigest,
        deadline: request.deadlineSeconds
      },
      signatures.guardian,
      signatures.account
    ]
  })

const confidentialTransferSelector = toFunctionSelector(getAbiItem({ abi: ConfidentialTokenArtifact.abi, name: "confidentialTransfer" }))
const confidentialTransferBatchSelector = toFunctionSelector(
  getAbiItem({ abi: ConfidentialTokenArtifact.abi, name: "confidentialTransferBatch" })
)
const encryptedBalancesOfSelector = toFunctionSelector(getAbiItem({ abi: ConfidentialTokenArtifact.abi, name: "encryptedBalancesOf" }))

/** ABI words of one `ConfidentialTransferRequest`: a static tuple of 14 words (its four points are two words each). */
const requestWords = 14
const word = 32
/** Bytes of one single call's head: the request, then the two signatures' offsets. */
const requestBytes = requestWords * word
const headBytes = requestBytes + 2 * word

/** A big-endian ABI word holding `value`. */
const uintWord = (value: number): Uint8Array => {
  const out = new Uint8Array(word)
  new DataView(out.buffer).setUint32(word - 4, value)
  return out
}

/** A big-endian ABI word holding `value` (< 2^256), without viem's detour through hex. */
const uint256Word = (value: bigint): Uint8Array => {
  const out = new Uint8Array(word)
  const view = new DataView(out.buffer)
  for (let at = word - 8; at >= 0; at -= 8, value >>= 64n) view.setBigUint64(at, value & 0xffffffffffffffffn)
  return out
}

const paddedLength = (length: number) => Math.ceil(length / word) * word

// Node's hex codec: viem's reads a character at a time, a visible cost on calldata of this size.
const bytesOfHex = (hex: Hex): Uint8Array => Buffer.from(hex.slice(2), "hex")
const hexOfBytes = (bytes: Uint8Array): Hex => `0x${Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex")}`

const hexBytesPattern = /^0x(?:[0-9a-fA-F]{2})*$/

interface SingleCall {
  readonly request: Uint8Array
  /** The guardian's and the account's signatures, each its ABI-encoded `bytes` tail (length word and padded data). */
  readonly signatures: readonly [Uint8Array, Uint8Array]
}

/**
 * A single call's request words and signature tails, read by position; undefined unless it is
 * exactly the encoding `confidentialTransferCall` writes (the two tails back to back, in order).
 */
const splitSingleCall = (data: Hex): SingleCall | undefined => {
  if (data.slice(0, 10).toLowerCase() !== confidentialTransferSelector) return undefined
  // Buffer's decoder would stop at a non-hex digit or drop an odd one at the end.
  if (!hexBytesPattern.test(data)) return undefined
  const args = bytesOfHex(data).subarray(4)
  if (args.length < headBytes + word) return undefined
  const view = new DataView(args.buffer, args.byteOffset, args.byteLength)
  const readWord = (at: number) =>
    // Every word the layout uses is small: its first 28 bytes are zero.
    at + word <= args.length && args.subarray(at, at + word - 4).every((byte) => byte === 0) ? view.getUint32(at + word - 4) : undefined
  if (readWord(requestBytes) !== headBytes) return undefined
  const guardianLength = readWord(headBytes)
  if (guardianLength === undefined) return undefined
  const accountAt = headBytes + word + paddedLength(guardianLength)
  if (readWord(requestBytes + word) !== accountAt) return undefined
  const accountLength = readWord(accountAt)
  if (accountLength === undefined || args.length !== accountAt + word + paddedLength(accountLength)) return undefined
  return { request: args.subarray(0, requestBytes), signatures: [args.subarray(headBytes, accountAt), args.subarray(accountAt)] }
}

/**
 * The single `confidentialTransfer` calls a batch is made of, read from their recorded calldata,
 * and each item's sender and recipient (the accounts whose balances the batch reads: what the
 * relayer hints, D70).
 *
 * @since 0.7.0
 * @category models
 */
export interface BatchItems {
  readonly items: ReadonlyArray<SingleCall>
  readonly parties: ReadonlyArray<RootHints.BatchParties>
}

/**
 * The calls as batch items; undefined when one is not a well-formed single confidential transfer
 * (it must then be sent on its own).
 *
 * @since 0.7.0
 * @category constructors
 */
export const batchItems = (singleCalls: ReadonlyArray<Hex>): BatchItems | undefined => {
  const items: Array<SingleCall> = []
  const parties: Array<RootHints.BatchParties> = []
  for (const data of singleCalls) {
    const item = splitSingleCall(data)
    if (item === undefined) return undefined
    items.push(item)
    // The request's first two words: from and to, each an address in its low 20 bytes.
    parties.push({ from: bytesToHex(item.request.subarray(12, word)), to: bytesToHex(item.request.subarray(word + 12, 2 * word)) })
  }
  return { items, parties }
}

/**
 * `confidentialTransferBatch(requests, guardianSignatures, accountSignatures, rootHints)`: the
 * batch carries each item's request and both its signatures unchanged, so what the guardian
 * and the sender signed is what the contract checks. `rootHints` (empty, or six words per item:
 * `RootHints.rootHints`) are not signed: the contract checks each one and falls back when it
 * is wrong (D70).
 *
 * Assembled from the single calls' bytes: a request is a static tuple, so its words are the
 * same in both encodings, and a signature's `bytes` tail is copied as it is (decoding every
 * item with viem and encoding the batch again cost ~0.15 ms of the server's CPU a transfer).
 * test/calls.test.ts checks the bytes against viem's `encodeFunctionData`.
 *
 * @since 0.7.0
 * @category constructors
 */
export const encodeBatch = ({ items }: BatchItems, rootHints: ReadonlyArray<bigint>): Hex => {
  const count = items.length
  // Head: the four arrays' offsets. Then requests[] (length, the requests in place), two
  // bytes[] (each: length, one offset per item from the start of its offsets, then the tails)
  // and uint256[] (length, the words).
  const requestsAt = 4 * word
  const signatureArrays = [0, 1].map((which) => signatureArray(items.map((item) => item.signatures[which]!)))
  const guardianAt = requestsAt + word + count * requestBytes
  const accountAt = guardianAt + byteLength(signatureArrays[0]!)
  const hintsAt = accountAt + byteLength(signatureArrays[1]!)
  const parts: Array<Uint8Array> = [
    bytesOfHex(confidentialTransferBatchSelector),
    uintWord(requestsAt),
    uintWord(guardianAt),
    uintWord(accountAt),
    uintWord(hintsAt),
    uintWord(count)
  ]
  for (const item of items) parts.push(item.request)
  for (const array of signatureArrays) parts.push(...array)
  parts.push(uintWord(rootHints.length))
  for (const hint of rootHints) parts.push(uint256Word(hint))
  return hexOfBytes(concatBytes(parts))
}

/**
 * `encodeBatch` of `batchItems(singleCalls)`; undefined when a call is not a confidential transfer.
 *
 * @since 0.1.0
 * @category constructors
 */
export const confidentialTransferBatchCall = (singleCalls: ReadonlyArray<Hex>, rootHints: ReadonlyArray<bigint> = []): Hex | undefined => {
  const batch = batchItems(singleCalls)
  return batch === undefined ? undefined : encodeBatch(batch, rootHints)
}

const byteLength = (parts: ReadonlyArray<Uint8Array>) => parts.reduce((sum, part) => sum + part.length, 0)

/** A `bytes[]` in ABI form from its items' tails: the count, one offset per item (from the first offset), the tails. */
const signatureArray = (tails: ReadonlyArray<Uint8Array>): Array<Uint8Array> => {
  const parts = [uintWord(tails.length)]
  let tailAt = tails.length * word
  for (const tail of tails) {
    parts.push(uintWord(tailAt))
    tailAt += tail.length
  }
  parts.push(...tails)
  return parts
}

/**
 * `encryptedBalancesOf(accounts)`, the read a batch's root hints come from (D70). Encoded and
 * its result read here rather than by viem: viem's decoder took ~28 µs of CPU per transfer of a
 * batch of 32 (64 balances), more than assembling the batch itself. test/calls.test.ts checks
 * both against viem.
 *
 * @since 0.7.0
 * @category constructors
 */
export const encryptedBalancesOfCall = (accounts: ReadonlyArray<Address>): Hex =>
  `${encryptedBalancesOfSelector}${"0".repeat(62)}20${accounts.length.toString(16).padStart(64, "0")}${
    accounts.map((account) => account.slice(2).toLowerCase().padStart(64, "0")).join("")
  }`

/** Words of one `EncryptedBalance` in the result: three points, x and y each. */
const balanceWords = 6

/**
 * The y of each point of `encryptedBalancesOf`'s result for `count` accounts; undefined when
 * the result is not that many balances.
 *
 * @since 0.7.0
 * @category constructors
 */
export const balanceRoots = (result: Hex, count: number): Array<RootHints.StoredBalancePoints> | undefined => {
  // 0x, then the array's offset and length words, then six words per balance.
  const digits = 2 * word
  if (result.length !== 2 + digits * (2 + count * balanceWords)) return undefined
  const wordAt = (index: number) => BigInt(`0x${result.slice(2 + digits * index, 2 + digits * (index + 1))}`)
  if (wordAt(0) !== 32n || wordAt(1) !== BigInt(count)) return undefined
  return Array.from({ length: count }, (_, item) => {
    const first = 2 + item * balanceWords
    return { commitment: { y: wordAt(first + 1) }, ownerHandle: { y: wordAt(first + 3) }, guardianHandle: { y: wordAt(first + 5) } }
  })
}

/**
 * `publicTransfer(request, guardianSignature, accountSignature)` (confidential: false, or unshield when `to` is `from`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const publicTransferCall = (
  request: {
    readonly from: Address
    readonly to: Address
    readonly transferId: Hex
    readonly nonce: bigint
    readonly amount: bigint
    readonly commitment: Uint8Array
    readonly fromHandle: Uint8Array
    readonly guardianHandle: Uint8Array
    readonly deadlineSeconds: bigint
  },
  signatures: DebitSignatures
): Hex =>
  encodeFunctionData({
    abi: ConfidentialTokenArtifact.abi,
    functionName: "publicTransfer",
    args: [
      {
        from: request.from,
        to: request.to,
        transferId: request.transferId,
        nonce: request.nonce,
        amount: request.amount,
        commitment: toEvmPoint(request.commitment),
        fromHandle: toEvmPoint(request.fromHandle),
        guardianHandle: toEvmPoint(request.guardianHandle),
        deadline: request.deadlineSeconds
      },
      signatures.guardian,
      signatures.account
    ]
  })
