/**
 * Sealed boxes: ECIES to an account's encryption key on BN254 G1.
 *
 * Sealing picks an ephemeral scalar e and publishes E = e·H. The shared point for a
 * recipient with public key PK = s⁻¹·H is e·PK, which the recipient recomputes as s⁻¹·E.
 * Several boxes sealed together (the three boxes of a transfer) share one E and cost one
 * multiplication each plus one for E; each recipient still gets its own key, because
 * e·PK_k differs per k and computing it from E and PK_k is the Diffie–Hellman problem.
 *
 * key = HKDF-SHA256(ikm = EVM(e·PK), salt = "PPS/v1/sealed-box",
 *                   info = version ‖ E ‖ PK ‖ binding, 32 bytes)
 * box = version (0x01) ‖ E (64) ‖ nonce (24) ‖ XChaCha20-Poly1305(key, nonce, plaintext, aad = binding)
 *
 * The binding (purpose, chain id, contract, subject id) is both the associated data and
 * part of the key derivation, so a box cannot be replayed under another transfer, contract,
 * chain or purpose (a recipient box passed off as a sender box fails to open).
 *
 * Why BN254 ECDH rather than X25519: the box is sealed to the key the account already
 * registered on chain with a proof of possession; an X25519 key would be a second key to
 * register and prove. With the mcl backend a BN254 multiplication (~0.2 ms) is also
 * cheaper than noble's X25519 (~0.9 ms), which decided the question on speed too.
 *
 * @since 0.1.0
 */
import { xchacha20poly1305 } from "@noble/ciphers/chacha.js"
import { hkdf } from "@noble/hashes/hkdf.js"
import { sha256 } from "@noble/hashes/sha2.js"
import type { Address } from "viem"
import { addressBytes, concatBytes, LengthPrefixedWriter, uintBE, utf8 } from "./internal/bytes.ts"
import { current } from "./internal/backend.ts"
import { inverseSecretScalar } from "./internal/keys.ts"
import { element, encode } from "./internal/points.ts"
import { randomScalar } from "./internal/scalars.ts"
import type { KeyPair, PublicKey } from "./EncryptionKey.ts"
import * as Point from "./Point.ts"
import { type RandomSource, secure } from "./Random.ts"
import { fail, type Result, succeed } from "./Result.ts"

/**
 * What a box is for. Part of the binding, so boxes cannot be swapped between roles.
 *
 * @since 0.1.0
 * @category models
 */
export type Purpose = "transfer-sender" | "transfer-recipient" | "transfer-guardian" | "balance-statement" | "key-total" | "held-amount"

/**
 * What a box is bound to. `subjectId` is 32 bytes: the transfer id for transfer boxes,
 * the account address left-padded with zeros for balance statements.
 *
 * @since 0.1.0
 * @category models
 */
export interface Binding {
  readonly purpose: Purpose
  readonly chainId: bigint
  readonly contract: Address
  readonly subjectId: Uint8Array
}

/**
 * One box to seal.
 *
 * @since 0.1.0
 * @category models
 */
export interface Recipient {
  readonly publicKey: PublicKey
  readonly plaintext: Uint8Array
  readonly binding: Binding
}

/**
 * Why a box did not open.
 *
 * @since 0.1.0
 * @category errors
 */
export type SealedBoxError =
  | "box_too_short"
  | "box_version_unsupported"
  | "box_ephemeral_invalid"
  | "box_authentication_failed"

/**
 * The format version written as the first byte of every box.
 *
 * @since 0.1.0
 * @category constants
 */
export const boxVersion = 0x01

/**
 * Bytes a box adds to its plaintext: version (1) + E (64) + nonce (24) + tag (16).
 *
 * @since 0.1.0
 * @category constants
 */
export const boxOverhead = 1 + 64 + 24 + 16

const keySalt = utf8("PPS/v1/sealed-box")
const nonceLength = 24

/**
 * The binding's bytes: length-prefixed purpose (UTF-8), chain id (32 bytes), contract
 * (20 bytes), subject id (32 bytes).
 *
 * @since 0.1.0
 * @category encoding
 */
export const bindingBytes = (binding: Binding): Uint8Array => {
  if (binding.subjectId.length !== 32) throw new RangeError("subjectId must be 32 bytes")
  return new LengthPrefixedWriter()
    .append(utf8(binding.purpose))
    .append(uintBE(binding.chainId, 32))
    .append(addressBytes(binding.contract))
    .append(binding.subjectId)
    .toBytes()
}

const deriveKey = (shared: Uint8Array, ephemeral: Uint8Array, publicKey: Uint8Array, binding: Uint8Array) =>
  hkdf(sha256, shared, keySalt, concatBytes(Uint8Array.of(boxVersion), ephemeral, publicKey, binding), 32)

/**
 * Seals each plaintext to its recipient, all boxes sharing one ephemeral point.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sealAll = (recipients: ReadonlyArray<Recipient>, random: RandomSource = secure): Array<Uint8Array> => {
  const backend = current()
  const ephemeralScalar = randomScalar(random)
  const ephemeral = encode(backend.multiplySecret(backend.generatorH, ephemeralScalar))
  return recipients.map((recipient) => {
    const shared = encode(backend.multiplySecret(element(recipient.publicKey), ephemeralScalar))
    const binding = bindingBytes(recipient.binding)
    const key = deriveKey(shared, ephemeral, recipient.publicKey, binding)
    const nonce = random(nonceLength)
    const sealed = xchacha20poly1305(key, nonce, binding).encrypt(recipient.plaintext)
    return concatBytes(Uint8Array.of(boxVersion), ephemeral, nonce, sealed)
  })
}

/**
 * Seals one plaintext to one recipient.
 *
 * @since 0.1.0
 * @category constructors
 */
export const seal = (recipient: Recipient, random: RandomSource = secure): Uint8Array => {
  const [box] = sealAll([recipient], random)
  if (box === undefined) throw new Error("invariant violated: sealAll returned no box")
  return box
}

/**
 * Opens a box with the recipient's key pair, checking it was sealed for `binding`.
 *
 * @since 0.1.0
 * @category destructors
 */
export const open = (keyPair: KeyPair, box: Uint8Array, binding: Binding): Result<Uint8Array, SealedBoxError> => {
  if (box.length < boxOverhead) return fail("box_too_short")
  if (box[0] !== boxVersion) return fail("box_version_unsupported")
  const ephemeral = Point.parse(box.subarray(1, 65))
  if (!ephemeral.ok) return fail("box_ephemeral_invalid")
  const backend = current()
  const shared = encode(backend.multiplySecret(element(ephemeral.value), inverseSecretScalar(keyPair.secretKey)))
  const boundBytes = bindingBytes(binding)
  const key = deriveKey(shared, ephemeral.value, keyPair.publicKey, boundBytes)
  const nonce = box.subarray(65, 65 + nonceLength)
  try {
    return succeed(xchacha20poly1305(key, nonce, boundBytes).decrypt(box.subarray(65 + nonceLength)))
  } catch {
    return fail("box_authentication_failed")
  }
}
