/**
 * Reading secret keys inside the package.
 *
 * @internal
 */
import { invertSecret, parseNonZeroScalar } from "./scalars.ts"

/**
 * The scalar of a secret key; throws on a malformed key, a programmer error because keys
 * come from `EncryptionKey.generate` or `EncryptionKey.fromSecretKey`. The message never
 * contains the key.
 */
export const secretScalar = (secretKey: Uint8Array): bigint => {
  const scalar = parseNonZeroScalar(secretKey)
  if (scalar === undefined) throw new TypeError("secret key must be 32 bytes encoding a scalar in [1, n)")
  return scalar
}

// Opening a box needs s⁻¹ (79 µs by exponentiation); a guardian opens one box per
// transfer with the same key, so the inverse is kept for as long as the key's bytes live.
const inverses = new WeakMap<Uint8Array, bigint>()

/** s⁻¹ mod n for a secret key: the key's discrete log of PK with respect to H. */
export const inverseSecretScalar = (secretKey: Uint8Array): bigint => {
  const cached = inverses.get(secretKey)
  if (cached !== undefined) return cached
  const inverse = invertSecret(secretScalar(secretKey))
  inverses.set(secretKey, inverse)
  return inverse
}
