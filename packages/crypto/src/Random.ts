/**
 * The source of randomness for keys, encryption randomness, proof nonces and box nonces.
 * Every randomised function takes an optional `RandomSource`; the default draws from the
 * platform CSPRNG (`crypto.getRandomValues`, through noble's `randomBytes`). Two reasons to
 * pass another source: reproducing the published test vectors, and sealing one request
 * identically again (`deterministic`) so an idempotent retry sends the same bytes.
 *
 * @since 0.1.0
 */
import { hmac } from "@noble/hashes/hmac.js"
import { sha256 } from "@noble/hashes/sha2.js"
import { concatBytes, randomBytes, utf8ToBytes } from "@noble/hashes/utils.js"

/**
 * A function returning `length` fresh random bytes.
 *
 * @since 0.1.0
 * @category models
 */
export type RandomSource = (length: number) => Uint8Array

/**
 * The platform's cryptographically secure generator.
 *
 * @since 0.1.0
 * @category constructors
 */
export const secure: RandomSource = (length) => randomBytes(length)

/**
 * A deterministic source: the blocks HMAC-SHA256(seed, counter) in order. The same seed
 * gives the same bytes, so a client can seal a request again byte for byte (a retry under
 * the same idempotency key). The seed must be secret to the client: derive it with
 * `sealingSeed` from the account's secret key, never from anything the server sees,
 * which could then recompute the encryption randomness.
 *
 * @since 0.3.0
 * @category constructors
 */
export const deterministic = (seed: Uint8Array): RandomSource => {
  let counter = 0
  let pool = new Uint8Array(0)
  return (length) => {
    while (pool.length < length) {
      const block = new Uint8Array(4)
      new DataView(block.buffer).setUint32(0, counter++)
      pool = concatBytes(pool, hmac(sha256, seed, block))
    }
    const out = pool.slice(0, length)
    pool = pool.slice(length)
    return out
  }
}

/**
 * The seed of `deterministic` for one request: HMAC-SHA256 under a client secret (the
 * account's secret key) of a label and every part that defines the request, each
 * length-prefixed, so two different requests never share randomness.
 *
 * @since 0.3.0
 * @category constructors
 */
export const sealingSeed = (secret: Uint8Array, parts: ReadonlyArray<string>): Uint8Array => {
  const encoded = parts.map((part) => {
    const bytes = utf8ToBytes(part)
    const length = new Uint8Array(4)
    new DataView(length.buffer).setUint32(0, bytes.length)
    return concatBytes(length, bytes)
  })
  return hmac(sha256, secret, concatBytes(utf8ToBytes("pps/sealing-seed/v1"), ...encoded))
}
