/**
 * The guardian's keys, all derived from one 32-byte secret (GUARDIAN_SECRET) with
 * HKDF-SHA256 (salt "PPS/v1/guardian", one info label per key):
 *
 * - `at-rest-aead`: the XChaCha20-Poly1305 key that seals every stored amount;
 * - `attestation-signer`: the secp256k1 key that signs EIP-712 attestations (the
 *   ConfidentialToken's `guardianSigner` is its address);
 * - `encryption-key`: the BN254 scalar s_g of the guardian's ElGamal key
 *   PK_g = s_g⁻¹·H (the contract's `guardianEncryptionKey`), which opens the
 *   guardian's sealed notes and checks the books against the chain.
 *
 * Scalars are drawn as 48 bytes reduced into [1, n), so their bias is below 2⁻¹²⁸.
 * One secret to back up and to move into an enclave; the three keys stay independent
 * because HKDF outputs for distinct labels are.
 *
 * @since 0.1.0
 */
import { hkdf } from "@noble/hashes/hkdf.js"
import { sha256 } from "@noble/hashes/sha2.js"
import { utf8ToBytes } from "@noble/hashes/utils.js"
import { Attestation, EncryptionKey, Point } from "@pps/crypto"
import * as libsecp256k1 from "tiny-secp256k1"
import { type Address, bytesToBigInt, bytesToHex, type Hex, numberToBytes } from "viem"
import * as Invariant from "./internal/Invariant.ts"

/**
 * The guardian's keys. `secret` material never leaves the guardian; `info` is public.
 *
 * @since 0.1.0
 * @category models
 */
export interface GuardianKeys {
  readonly atRestKey: Uint8Array
  readonly signerPrivateKey: Uint8Array
  /**
   * Signs attestation digests with `signerPrivateKey`: libsecp256k1 in WebAssembly, the same
   * bytes as the pure-TypeScript signer at a third of its cost (one signature per transfer).
   */
  readonly signer: Attestation.DigestSigner
  readonly encryption: EncryptionKey.KeyPair
  readonly info: GuardianInfo
}

/**
 * What the contracts and clients need to know about the guardian.
 *
 * @since 0.1.0
 * @category models
 */
export interface GuardianInfo {
  /** Address of the attestation key: the ConfidentialToken's `guardianSigner`. */
  readonly signer: Address
  /** The BN254 encryption key, EVM encoding (64 bytes x ‖ y) as hex. */
  readonly encryptionKey: Hex
  /** The same key as affine coordinates, the form `Deploy.deploy` takes. */
  readonly encryptionKeyCoordinates: { readonly x: bigint; readonly y: bigint }
}

/**
 * Length of the guardian secret.
 *
 * @since 0.1.0
 * @category constants
 */
export const secretBytes = 32

const salt = utf8ToBytes("PPS/v1/guardian")
const secp256k1Order = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n

const derive = (secret: Uint8Array, label: string, length: number): Uint8Array =>
  hkdf(sha256, secret, salt, utf8ToBytes(label), length)

const scalarIn = (secret: Uint8Array, label: string, order: bigint): Uint8Array =>
  numberToBytes((bytesToBigInt(derive(secret, label, 48)) % (order - 1n)) + 1n, { size: 32 })

/**
 * A digest signer over libsecp256k1 in WebAssembly: the same signatures as
 * `Attestation.nobleDigestSigner` (RFC 6979, low-s) at about a third of its cost. The
 * guardian's attestations use it, and the throughput benchmark's cryptographic floor.
 *
 * @since 0.7.0
 * @category constructors
 */
export const libsecp256k1Signer = (privateKey: Uint8Array): Attestation.DigestSigner => (digest) =>
  libsecp256k1.signRecoverable(digest, privateKey)

/**
 * Derives every key from the guardian secret (exactly 32 bytes). Throws on a wrong
 * length: configuration is validated before this is called.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromSecret = (secret: Uint8Array): GuardianKeys => {
  if (secret.length !== secretBytes) throw new RangeError(`the guardian secret must be ${secretBytes} bytes`)
  const signerPrivateKey = scalarIn(secret, "attestation-signer", secp256k1Order)
  const encryption = EncryptionKey.fromSecretKey(scalarIn(secret, "encryption-key", Point.order))
  if (!encryption.ok) throw new Invariant.InvariantViolation({ invariant: "a scalar in [1, n) is a valid encryption secret key" })
  const publicKey = encryption.value.publicKey
  return {
    atRestKey: derive(secret, "at-rest-aead", 32),
    signerPrivateKey,
    signer: libsecp256k1Signer(signerPrivateKey),
    encryption: encryption.value,
    info: {
      signer: Attestation.signerAddress(signerPrivateKey),
      encryptionKey: bytesToHex(publicKey),
      encryptionKeyCoordinates: {
        x: bytesToBigInt(publicKey.subarray(0, 32)),
        y: bytesToBigInt(publicKey.subarray(32, 64))
      }
    }
  }
}
