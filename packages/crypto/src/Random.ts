/**
 * The source of randomness for keys, encryption randomness, proof nonces and box nonces.
 * Every randomised function takes an optional `RandomSource`; the default draws from the
 * platform CSPRNG (`crypto.getRandomValues`, through noble's `randomBytes`). The only
 * reason to pass another source is to reproduce the published test vectors.
 *
 * @since 0.1.0
 */
import { randomBytes } from "@noble/hashes/utils.js"

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
