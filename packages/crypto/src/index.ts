/**
 * @pps/crypto: the confidential cryptography of the Private Payments Service, pure
 * TypeScript with no I/O, the same code in Node and in browsers. Formats are specified
 * byte by byte in docs/crypto.md.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as Attestation from "./Attestation.ts"

/** @since 0.1.0 */
export * as Backend from "./Backend.ts"

/** @since 0.1.0 */
export * as DecryptionProof from "./DecryptionProof.ts"

/** @since 0.1.0 */
export * as ElGamal from "./ElGamal.ts"

/** @since 0.1.0 */
export * as EncryptionKey from "./EncryptionKey.ts"

/** @since 0.1.0 */
export * as Note from "./Note.ts"

/** @since 0.1.0 */
export * as Point from "./Point.ts"

/** @since 0.1.0 */
export * as Random from "./Random.ts"

/** @since 0.1.0 */
export * as Result from "./Result.ts"

/** @since 0.1.0 */
export * as SealedBox from "./SealedBox.ts"
