/**
 * Scalars of BN254 (integers mod n): uniform sampling, parsing and the constant-sequence
 * inversion used for secret keys.
 *
 * @internal
 */
import { mapHashToField } from "@noble/curves/abstract/modular.js"
import { bytesToNumberBE, numberToBytesBE } from "@noble/curves/utils.js"
import type { RandomSource } from "../Random.ts"
import { Fn, groupOrder } from "./curve.ts"

/**
 * A uniform scalar in [1, n): 48 random bytes reduced mod n − 1, plus one (the FIPS 186-5
 * method noble uses for its own keys; the bias is below 2^-128).
 */
export const randomScalar = (random: RandomSource): bigint =>
  bytesToNumberBE(mapHashToField(random(48), groupOrder))

/** Parses 32 big-endian bytes as a scalar in [1, n), else `undefined`. */
export const parseNonZeroScalar = (bytes: Uint8Array): bigint | undefined => {
  if (bytes.length !== 32) return undefined
  const value = bytesToNumberBE(bytes)
  return value >= 1n && value < groupOrder ? value : undefined
}

/** Parses 32 big-endian bytes as a scalar in [0, n), else `undefined`. */
export const parseScalar = (bytes: Uint8Array): bigint | undefined => {
  if (bytes.length !== 32) return undefined
  const value = bytesToNumberBE(bytes)
  return value < groupOrder ? value : undefined
}

/** A scalar as 32 big-endian bytes. */
export const scalarBytes = (value: bigint): Uint8Array => numberToBytesBE(value, 32)

/**
 * s⁻¹ mod n as s^(n−2) (Fermat). The exponent is public, so the sequence of operations
 * does not depend on s, unlike the extended-Euclid inversion.
 */
export const invertSecret = (secret: bigint): bigint => Fn.pow(secret, groupOrder - 2n)

/** (a + b·c) mod n, the Schnorr response. */
export const multiplyAdd = (a: bigint, b: bigint, c: bigint): bigint => Fn.add(a, Fn.mul(b, c))

/** Reduces a big-endian digest mod n (Fiat–Shamir challenges). */
export const reduceDigest = (digest: Uint8Array): bigint => Fn.create(bytesToNumberBE(digest))
