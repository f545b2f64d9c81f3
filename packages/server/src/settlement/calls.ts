/**
 * Calldata of the ConfidentialToken calls the server submits, from the crypto
 * package's 64-byte points (EVM x ‖ y) to the contract's `Point { x, y }` structs.
 *
 * @since 0.1.0
 */
import { ConfidentialTokenArtifact } from "@pps/contracts"
import { type Address, bytesToBigInt, concatBytes, encodeFunctionData, getAbiItem, type Hex, numberToBytes, toFunctionSelector } from "viem"

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
 * `confidentialTransfer(request, guardianSignature)`.
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
  guardianSignature: Hex
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
      guardianSignature
    ]
  })

const confidentialTransferSelector = toFunctionSelector(getAbiItem({ abi: ConfidentialTokenArtifact.abi, name: "confidentialTransfer" }))
const confidentialTransferBatchSelector = toFunctionSelector(
  getAbiItem({ abi: ConfidentialTokenArtifact.abi, name: "confidentialTransferBatch" })
)

/** ABI words of one `ConfidentialTransferRequest`: a static tuple of 14 words (its four points are two words each). */
const requestWords = 14
const word = 32
/** Bytes of one single call's arguments before its signature's bytes: the request, the signature's offset, its length. */
const requestBytes = requestWords * word
const signatureOffset = requestBytes + word

/** A big-endian ABI word holding `value`. */
const uintWord = (value: number): Uint8Array => {
  const out = new Uint8Array(word)
  new DataView(out.buffer).setUint32(word - 4, value)
  return out
}

const paddedLength = (length: number) => Math.ceil(length / word) * word

// Node's hex codec: viem's reads a character at a time, a visible cost on calldata of this size.
const bytesOfHex = (hex: Hex): Uint8Array => Buffer.from(hex.slice(2), "hex")
const hexOfBytes = (bytes: Uint8Array): Hex => `0x${Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex")}`

const hexBytesPattern = /^0x(?:[0-9a-fA-F]{2})*$/

/**
 * A single call's request words and signature bytes (its ABI-encoded `bytes` tail: length word
 * and padded data), read by position; undefined unless it is exactly the encoding
 * `confidentialTransferCall` writes.
 */
const splitSingleCall = (data: Hex): { readonly request: Uint8Array; readonly signature: Uint8Array } | undefined => {
  if (data.slice(0, 10).toLowerCase() !== confidentialTransferSelector) return undefined
  // Buffer's decoder would stop at a non-hex digit or drop an odd one at the end.
  if (!hexBytesPattern.test(data)) return undefined
  const args = bytesOfHex(data).subarray(4)
  if (args.length < signatureOffset + word) return undefined
  const view = new DataView(args.buffer, args.byteOffset, args.byteLength)
  const readWord = (at: number) =>
    // Every word the layout uses is small: its first 28 bytes are zero.
    args.subarray(at, at + word - 4).every((byte) => byte === 0) ? view.getUint32(at + word - 4) : undefined
  if (readWord(requestBytes) !== signatureOffset) return undefined
  const signatureLength = readWord(signatureOffset)
  if (signatureLength === undefined || args.length !== signatureOffset + word + paddedLength(signatureLength)) return undefined
  return { request: args.subarray(0, requestBytes), signature: args.subarray(signatureOffset) }
}

/**
 * `confidentialTransferBatch(requests, guardianSignatures)` from the recorded calldata of single
 * `confidentialTransfer` calls: the batch carries each item's request and attestation unchanged,
 * so what the guardian signed is what the contract checks. Undefined when a call is not a
 * confidential transfer (it must then be sent on its own).
 *
 * Assembled from the single calls' bytes: a request is a static tuple, so its words are the
 * same in both encodings, and a signature's `bytes` tail is copied as it is (decoding every
 * item with viem and encoding the batch again cost ~0.15 ms of the server's CPU a transfer).
 * test/calls.test.ts checks the bytes against viem's `encodeFunctionData`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const confidentialTransferBatchCall = (singleCalls: ReadonlyArray<Hex>): Hex | undefined => {
  const items = []
  for (const data of singleCalls) {
    const item = splitSingleCall(data)
    if (item === undefined) return undefined
    items.push(item)
  }
  const count = items.length
  // Head: the two arrays' offsets. Then requests[] (length, the requests in place) and bytes[]
  // (length, one offset per item from the start of the offsets, then each item's tail).
  const requestsAt = 2 * word
  const signaturesAt = requestsAt + word + count * requestBytes
  const parts: Array<Uint8Array> = [bytesOfHex(confidentialTransferBatchSelector), uintWord(requestsAt), uintWord(signaturesAt), uintWord(count)]
  for (const item of items) parts.push(item.request)
  parts.push(uintWord(count))
  let tailAt = count * word
  for (const item of items) {
    parts.push(uintWord(tailAt))
    tailAt += item.signature.length
  }
  for (const item of items) parts.push(item.signature)
  return hexOfBytes(concatBytes(parts))
}

/**
 * `publicTransfer(request, guardianSignature)` (confidential: false, or unshield when `to` is `from`).
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
  guardianSignature: Hex
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
      guardianSignature
    ]
  })
