/**
 * Points of BN254 (alt_bn128) G1, the group of the EVM precompiles ecAdd (0x06) and
 * ecMul (0x07), in the encodings the system exchanges:
 *
 * - EVM encoding, 64 bytes: x ‖ y, each a 32-byte big-endian integer below p; the identity
 *   is 64 zero bytes. Used on chain, in digests, in every API of this package.
 * - Compressed, 33 bytes: 0x02 (y even) or 0x03 (y odd) ‖ x; the identity is 33 zero
 *   bytes. Offered for text APIs where size matters.
 *
 * A `Point` is a `Uint8Array` that was checked: right length, coordinates below p, on the
 * curve (BN254 G1 has cofactor 1, so that also means in the prime-order group).
 *
 * @since 0.1.0
 */
import { bytesToNumberBE, numberToBytesBE } from "@noble/curves/utils.js"
import { keccak_256 } from "@noble/hashes/sha3.js"
import { concatBytes, utf8 } from "./internal/bytes.ts"
import { current } from "./internal/backend.ts"
import { Fp, fieldOrder, generatorGAffine, generatorHAffine, groupOrder } from "./internal/curve.ts"
import { element, encode, parseElement, type PointError } from "./internal/points.ts"
import { fail, type Result, succeed } from "./Result.ts"

/**
 * A validated 64-byte EVM encoding of a G1 point (possibly the identity).
 *
 * @since 0.1.0
 * @category models
 */
export type Point = Uint8Array & { readonly Point: unique symbol }

/**
 * Why bytes were refused as a point.
 *
 * @since 0.1.0
 * @category errors
 */
export type { PointError }

/**
 * p, the modulus of the base field.
 *
 * @since 0.1.0
 * @category constants
 */
export const fieldModulus: bigint = fieldOrder

/**
 * n, the order of G1 and the modulus of every scalar.
 *
 * @since 0.1.0
 * @category constants
 */
export const order: bigint = groupOrder

const fromCoordinates = (x: bigint, y: bigint): Point =>
  concatBytes(numberToBytesBE(x, 32), numberToBytesBE(y, 32)) as Point

/**
 * G = (1, 2), the standard generator; amounts are multiples of G.
 *
 * @since 0.1.0
 * @category constants
 */
export const G: Point = fromCoordinates(generatorGAffine.x, generatorGAffine.y)

/**
 * H, the nothing-up-my-sleeve generator that blinds commitments and to which account keys
 * are related (PK = s⁻¹·H). Its derivation is `deriveGeneratorH`.
 *
 * @since 0.1.0
 * @category constants
 */
export const H: Point = fromCoordinates(generatorHAffine.x, generatorHAffine.y)

/**
 * The identity (point at infinity): 64 zero bytes.
 *
 * @since 0.1.0
 * @category constants
 */
export const identity: Point = new Uint8Array(64) as Point

/**
 * The tag hashed to derive H.
 *
 * @since 0.1.0
 * @category constants
 */
export const generatorHTag = "PPS/v1/generator/H"

/**
 * Recomputes H by try-and-increment: for ctr = 0, 1, 2, …,
 * x = keccak256("PPS/v1/generator/H" ‖ uint32_be(ctr)) mod p; the first x for which
 * x³ + 3 is a square gives H = (x, y) with y the even square root. Nobody knows log_G(H).
 *
 * @since 0.1.0
 * @category constructors
 */
export const deriveGeneratorH = (): { readonly point: Point; readonly counter: number } => {
  const tag = utf8(generatorHTag)
  for (let counter = 0; counter < 256; counter++) {
    const x = Fp.create(bytesToNumberBE(keccak_256(concatBytes(tag, numberToBytesBE(BigInt(counter), 4)))))
    const rightHandSide = Fp.add(Fp.mul(Fp.sqr(x), x), 3n)
    if (!Fp.eql(Fp.pow(rightHandSide, (fieldOrder - 1n) / 2n), Fp.ONE)) continue
    const root = Fp.sqrt(rightHandSide)
    const y = root % 2n === 0n ? root : Fp.neg(root)
    return { point: fromCoordinates(x, y), counter }
  }
  throw new Error("no square found in 256 counters")
}

/**
 * Checks bytes as an EVM-encoded point. The identity is refused unless `allowIdentity`
 * (ciphertexts and balances may legitimately be the identity; keys never are).
 *
 * @since 0.1.0
 * @category validation
 */
export const parse = (bytes: Uint8Array, options?: { readonly allowIdentity?: boolean }): Result<Point, PointError> => {
  const parsed = parseElement(bytes)
  if (typeof parsed === "string") return fail(parsed)
  if (options?.allowIdentity !== true && current().isIdentity(parsed)) return fail("point_is_identity")
  return succeed(Uint8Array.from(bytes) as Point)
}

/**
 * Whether a point is the identity.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isIdentity = (point: Point): boolean => point.every((byte) => byte === 0)

/**
 * left + right.
 *
 * @since 0.1.0
 * @category combinators
 */
export const add = (left: Point, right: Point): Point => encode(current().add(element(left), element(right)))

/**
 * left − right.
 *
 * @since 0.1.0
 * @category combinators
 */
export const subtract = (left: Point, right: Point): Point =>
  encode(current().subtract(element(left), element(right)))

/**
 * −point, which on the EVM is (x, p − y), the identity staying (0, 0).
 *
 * @since 0.1.0
 * @category combinators
 */
export const negate = (point: Point): Point => encode(current().negate(element(point)))

/**
 * The 33-byte compressed form: 0x02 or 0x03 (parity of y) followed by x; the identity is
 * 33 zero bytes.
 *
 * @since 0.1.0
 * @category encoding
 */
export const compress = (point: Point): Uint8Array => {
  const out = new Uint8Array(33)
  if (isIdentity(point)) return out
  out[0] = (point[63] ?? 0) % 2 === 0 ? 0x02 : 0x03
  out.set(point.subarray(0, 32), 1)
  return out
}

/**
 * Parses the 33-byte compressed form back into a point, with the same checks as `parse`.
 *
 * @since 0.1.0
 * @category encoding
 */
export const decompress = (
  bytes: Uint8Array,
  options?: { readonly allowIdentity?: boolean }
): Result<Point, PointError> => {
  if (bytes.length !== 33) return fail("point_length_invalid")
  const prefix = bytes[0]
  const x = bytesToNumberBE(bytes.subarray(1))
  if (prefix === 0x00 && x === 0n) {
    return options?.allowIdentity === true ? succeed(identity) : fail("point_is_identity")
  }
  if (prefix !== 0x02 && prefix !== 0x03) return fail("point_encoding_invalid")
  if (x >= fieldOrder) return fail("point_coordinate_out_of_range")
  const rightHandSide = Fp.add(Fp.mul(Fp.sqr(x), x), 3n)
  if (!Fp.eql(Fp.pow(rightHandSide, (fieldOrder - 1n) / 2n), Fp.ONE)) return fail("point_not_on_curve")
  const root = Fp.sqrt(rightHandSide)
  const wantOdd = prefix === 0x03
  const y = (root % 2n === 1n) === wantOdd ? root : Fp.neg(root)
  return parse(fromCoordinates(x, y), options)
}
