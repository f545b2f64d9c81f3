/**
 * TypedData: the EIP-712 domain and types that ConfidentialToken verifies, in the form viem's
 * `signTypedData` and `hashTypedData` take. The contract exposes the matching type hashes
 * (CONFIDENTIAL_TRANSFER_TYPEHASH, ...) and a test checks the two agree.
 *
 * ConfidentialTransfer and PublicTransfer are the guardian's attestations and, in version 2, the
 * sender's authorisations over the same typed data (the fixed
 * cross-package interface); KeyRegistration is an account's consent to `registerFor`, which
 * lets a relayer pay for the account's key registration; CancelGuardianRotation is the current
 * guardian's veto of a pending rotation, which anyone may submit.
 *
 * @since 0.1.0
 */
import { Attestation } from "@pps/crypto"
import type { Address } from "viem"

/**
 * The EIP-712 domain name of every ConfidentialToken.
 *
 * @since 0.1.0
 * @category constants
 */
export const domainName = "PPS ConfidentialToken"

/**
 * @since 0.1.0
 * @category constants
 */
export const domainVersion = "2"

/**
 * The EIP-712 domain of the ConfidentialToken at `verifyingContract` on chain `chainId`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const domain = (chainId: number, verifyingContract: Address) =>
  ({ name: domainName, version: domainVersion, chainId, verifyingContract }) as const

/**
 * The guardian's attestation of a confidential transfer.
 *
 * @since 0.1.0
 * @category models
 */
export const confidentialTransferTypes = { ConfidentialTransfer: Attestation.types.ConfidentialTransfer } as const

/**
 * The guardian's attestation of a public transfer (confidential: false) or an unshield.
 * The crypto package owns the attestation types (one definition for guardian, server and contract).
 *
 * @since 0.1.0
 * @category models
 */
export const publicTransferTypes = { PublicTransfer: Attestation.types.PublicTransfer } as const

/**
 * An account's consent to having `keyX, keyY` registered as its encryption key by a relayer.
 *
 * @since 0.1.0
 * @category models
 */
export const keyRegistrationTypes = {
  KeyRegistration: [
    { name: "account", type: "address" },
    { name: "keyX", type: "uint256" },
    { name: "keyY", type: "uint256" }
  ]
} as const

/**
 * The current guardian's veto of the pending rotation `proposalId` (to `newSigner`), for
 * `cancelGuardianRotationBySignature`. Both fields come from `pendingGuardianRotation()`; ids are
 * never reused, so the signature cancels that one proposal and nothing later.
 *
 * @since 0.2.0
 * @category models
 */
export const cancelGuardianRotationTypes = {
  CancelGuardianRotation: [
    { name: "proposalId", type: "uint256" },
    { name: "newSigner", type: "address" }
  ]
} as const

/**
 * Domain tag of the key proof of possession's Fiat–Shamir challenge.
 *
 * @since 0.1.0
 * @category constants
 */
export const keyProofTag = "PPS/v1/key-pop"

/**
 * `rotateEncryptionKey`'s typed data (version 2), signed by both the current guardian and the
 * account over the same digest. `previousBalanceDigest` is keccak256 of the six words
 * `encryptedBalanceOf` returns for the account's balance (commitment, owner handle, guardian
 * handle, each x ‖ y: the three stored words decompressed, D66) at the time the guardian attests; `balanceDigest` is keccak256 of the new
 * balance's three points in the same order. `nonce` is from the account's transfer nonce space.
 *
 * @since 0.5.0
 * @category models
 */
export const keyRotationTypes = {
  KeyRotation: [
    { name: "account", type: "address" },
    { name: "nonce", type: "uint256" },
    { name: "keyX", type: "uint256" },
    { name: "keyY", type: "uint256" },
    { name: "previousBalanceDigest", type: "bytes32" },
    { name: "balanceDigest", type: "bytes32" },
    { name: "deadline", type: "uint64" }
  ]
} as const
