/**
 * Calldata of the ConfidentialToken calls the server submits, from the crypto
 * package's 64-byte points (EVM x ‖ y) to the contract's `Point { x, y }` structs.
 *
 * @since 0.1.0
 */
import { ConfidentialTokenArtifact } from "@pps/contracts"
import { type Address, bytesToBigInt, concatBytes, decodeFunctionData, encodeFunctionData, type Hex, numberToBytes } from "viem"

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

/**
 * `confidentialTransferBatch(requests, guardianSignatures)` from the recorded calldata of single
 * `confidentialTransfer` calls: the batch carries each item's request and attestation unchanged,
 * so what the guardian signed is what the contract checks. Undefined when a call is not a
 * confidential transfer (it must then be sent on its own).
 *
 * @since 0.1.0
 * @category constructors
 */
export const confidentialTransferBatchCall = (singleCalls: ReadonlyArray<Hex>): Hex | undefined => {
  const requests = []
  const signatures: Array<Hex> = []
  for (const data of singleCalls) {
    const decoded = decodeFunctionData({ abi: ConfidentialTokenArtifact.abi, data })
    if (decoded.functionName !== "confidentialTransfer") return undefined
    requests.push(decoded.args[0])
    signatures.push(decoded.args[1])
  }
  return encodeFunctionData({ abi: ConfidentialTokenArtifact.abi, functionName: "confidentialTransferBatch", args: [requests, signatures] })
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
