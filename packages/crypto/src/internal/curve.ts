/**
 * BN254 (alt_bn128) parameters shared by both backends: the field and group orders, the
 * noble field objects used for scalar arithmetic, and the affine coordinates of the two
 * generators G and H.
 *
 * @internal
 */
import { bn254 } from "@noble/curves/bn254.js"

/** The noble point class of BN254 G1 (the curve y² = x³ + 3 over F_p). */
export const NoblePoint = bn254.G1.Point

/** The base field F_p. */
export const Fp = NoblePoint.Fp

/** The scalar field F_n (n is the order of G1). */
export const Fn = NoblePoint.Fn

/** p, the base-field modulus. */
export const fieldOrder: bigint = Fp.ORDER

/** n, the order of G1. */
export const groupOrder: bigint = Fn.ORDER

/** The standard generator G = (1, 2), the one the EVM precompiles use. */
export const generatorGAffine = { x: 1n, y: 2n } as const

/**
 * H, derived from the tag "PPS/v1/generator/H" by try-and-increment (counter 2 is the
 * first that lands on the curve); `Curve.deriveGeneratorH` recomputes it and a test
 * checks that both agree.
 */
export const generatorHAffine = {
  x: 0x2ed763c0ab0b46b7ee62866787ec3a8fb38390065436982cda5d1691085246fbn,
  y: 0x003193607c15a0df207e5f5a1e026e6dd9321fc9592facc48b9e8f32b69065b2n
} as const
