/**
 * Account encryption keys and their proof of possession.
 *
 * An account's secret is a scalar s in [1, n) (32 big-endian bytes); its public key is
 * PK = s⁻¹·H. The inverse is what makes twisted ElGamal decryptable with one
 * multiplication: s·D = s·r·PK = r·H, which is exactly the blinding term of the
 * commitment C = a·G + r·H.
 *
 * The proof of possession is a Schnorr proof of knowledge of s with s·PK = H, bound to
 * (chain id, key-registry contract, account address) and hashed with keccak256 so the
 * registry contract verifies it on chain. It prevents registering someone else's key (or a
 * key related to it) under one's own address.
 *
 * @since 0.1.0
 */
import { keccak_256 } from "@noble/hashes/sha3.js"
import type { Address } from "viem"
import { addressBytes, concatBytes, uintBE, utf8 } from "./internal/bytes.ts"
import { current } from "./internal/backend.ts"
import { secretScalar } from "./internal/keys.ts"
import { element, encode } from "./internal/points.ts"
import {
  invertSecret,
  multiplyAdd,
  parseNonZeroScalar,
  parseScalar,
  randomScalar,
  reduceDigest,
  scalarBytes
} from "./internal/scalars.ts"
import * as Point from "./Point.ts"
import { type RandomSource, secure } from "./Random.ts"
import { fail, type Result, succeed } from "./Result.ts"

/**
 * A validated account public key: a `Point` that is not the identity.
 *
 * @since 0.1.0
 * @category models
 */
export type PublicKey = Point.Point & { readonly PublicKey: unique symbol }

/**
 * An account's key pair. `secretKey` is 32 big-endian bytes; it stays on the client (or,
 * for the guardian's own key, in the guardian).
 *
 * @since 0.1.0
 * @category models
 */
export interface KeyPair {
  readonly secretKey: Uint8Array
  readonly publicKey: PublicKey
}

/**
 * What a proof of possession is bound to.
 *
 * @since 0.1.0
 * @category models
 */
export interface PossessionBinding {
  readonly chainId: bigint
  /** The key-registry contract that verifies the proof. */
  readonly contract: Address
  /** The account registering the key. */
  readonly account: Address
}

/**
 * Why a secret key was refused.
 *
 * @since 0.1.0
 * @category errors
 */
export type SecretKeyError = "secret_key_invalid"

/**
 * Why a public key was refused.
 *
 * @since 0.1.0
 * @category errors
 */
export type PublicKeyError = Point.PointError

/**
 * Why a proof of possession was refused.
 *
 * @since 0.1.0
 * @category errors
 */
export type PossessionError =
  | PublicKeyError
  | "proof_length_invalid"
  | "proof_commitment_invalid"
  | "proof_scalar_out_of_range"
  | "proof_mismatch"

/**
 * Domain tag of the proof-of-possession challenge.
 *
 * @since 0.1.0
 * @category constants
 */
export const possessionTag = "PPS/v1/key-pop"

/**
 * Length of a proof of possession: R (64) ‖ z (32).
 *
 * @since 0.1.0
 * @category constants
 */
export const possessionProofLength = 96

const publicKeyOf = (secret: bigint): PublicKey =>
  encode(current().multiplySecret(current().generatorH, invertSecret(secret))) as PublicKey

/**
 * A fresh key pair.
 *
 * @since 0.1.0
 * @category constructors
 */
export const generate = (random: RandomSource = secure): KeyPair => {
  const secret = randomScalar(random)
  return { secretKey: scalarBytes(secret), publicKey: publicKeyOf(secret) }
}

/**
 * The key pair of a stored secret key, which must be 32 bytes encoding a scalar in [1, n).
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromSecretKey = (secretKey: Uint8Array): Result<KeyPair, SecretKeyError> => {
  const secret = parseNonZeroScalar(secretKey)
  if (secret === undefined) return fail("secret_key_invalid")
  return succeed({ secretKey: Uint8Array.from(secretKey), publicKey: publicKeyOf(secret) })
}

/**
 * Validates a public key given in the EVM encoding (64 bytes) or compressed (33 bytes):
 * on the curve, coordinates below p, not the identity.
 *
 * @since 0.1.0
 * @category validation
 */
export const parsePublicKey = (bytes: Uint8Array): Result<PublicKey, PublicKeyError> => {
  const parsed = bytes.length === 33 ? Point.decompress(bytes) : Point.parse(bytes)
  return parsed.ok ? succeed(parsed.value as PublicKey) : parsed
}

const possessionChallenge = (binding: PossessionBinding, publicKey: Uint8Array, commitment: Uint8Array): bigint =>
  reduceDigest(
    keccak_256(
      concatBytes(
        utf8(possessionTag),
        uintBE(binding.chainId, 32),
        addressBytes(binding.contract),
        addressBytes(binding.account),
        publicKey,
        commitment
      )
    )
  )

/**
 * Proves possession of the secret key: picks k, R = k·PK,
 * c = keccak256("PPS/v1/key-pop" ‖ uint256 chainId ‖ contract ‖ account ‖ PK ‖ R) mod n,
 * z = k + c·s mod n; returns R ‖ z (96 bytes).
 *
 * @since 0.1.0
 * @category constructors
 */
export const proveOwnership = (
  keyPair: KeyPair,
  binding: PossessionBinding,
  random: RandomSource = secure
): Uint8Array => {
  const secret = secretScalar(keyPair.secretKey)
  const nonce = randomScalar(random)
  const commitment = encode(current().multiplySecret(element(keyPair.publicKey), nonce))
  const challenge = possessionChallenge(binding, keyPair.publicKey, commitment)
  return concatBytes(commitment, scalarBytes(multiplyAdd(nonce, challenge, secret)))
}

/**
 * Verifies a proof of possession the way the registry contract does: z < n, PK on the
 * curve and not the identity, R on the curve, z·PK == R + c·H.
 *
 * @since 0.1.0
 * @category validation
 */
export const verifyOwnership = (
  publicKey: Uint8Array,
  proof: Uint8Array,
  binding: PossessionBinding
): Result<PublicKey, PossessionError> => {
  const key = parsePublicKey(publicKey)
  if (!key.ok) return key
  if (proof.length !== possessionProofLength) return fail("proof_length_invalid")
  const commitment = Point.parse(proof.subarray(0, 64), { allowIdentity: true })
  if (!commitment.ok) return fail("proof_commitment_invalid")
  const response = parseScalar(proof.subarray(64, 96))
  if (response === undefined) return fail("proof_scalar_out_of_range")
  const challenge = possessionChallenge(binding, key.value, commitment.value)
  const backend = current()
  const left = backend.multiplyPublic(element(key.value), response)
  const right = backend.add(element(commitment.value), backend.multiplyPublic(backend.generatorH, challenge))
  return backend.equals(left, right) ? succeed(key.value) : fail("proof_mismatch")
}
