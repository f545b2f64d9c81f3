/**
 * Conversion between 64-byte EVM encodings and backend group elements. Parsing checks
 * length, coordinate range (< p) and curve membership; the branded `Point` type marks
 * bytes that passed those checks.
 *
 * @internal
 */
import { bytesToNumberBE } from "@noble/curves/utils.js"
import type { Point } from "../Point.ts"
import { current, type GroupBackend, type GroupElement } from "./backend.ts"
import { fieldOrder } from "./curve.ts"

/** Why bytes are not an acceptable point. */
export type PointError =
  | "point_length_invalid"
  | "point_encoding_invalid"
  | "point_coordinate_out_of_range" | "point_not_on_curve" | "point_is_identity"

/** Parses an EVM encoding into a group element of the active backend. */
export const parseElement = (bytes: Uint8Array): GroupElement | PointError => {
  if (bytes.length !== 64) return "point_length_invalid"
  const x = bytesToNumberBE(bytes.subarray(0, 32))
  const y = bytesToNumberBE(bytes.subarray(32, 64))
  const backend = current()
  if (x === 0n && y === 0n) return backend.identity
  if (x >= fieldOrder || y >= fieldOrder) return "point_coordinate_out_of_range"
  return backend.fromAffine(x, y) ?? "point_not_on_curve"
}

/**
 * Elements already computed for point objects, so that a key or a ciphertext used several
 * times in one transfer is parsed (and checked against the curve) once. An entry is used
 * only for the same backend and only while the bytes still equal the snapshot taken when
 * it was stored, so a caller mutating a `Uint8Array` can never get a stale element.
 */
interface CachedElement {
  readonly backend: GroupBackend
  readonly bytes: Uint8Array
  readonly element: GroupElement
}

const cache = new WeakMap<Uint8Array, CachedElement>()

const sameBytes = (left: Uint8Array, right: Uint8Array): boolean => {
  for (let index = 0; index < 64; index++) if (left[index] !== right[index]) return false
  return true
}

/**
 * The element behind a `Point` that was validated when it was branded. Failing here means
 * the brand was forged with a cast: an invariant violation, so it throws.
 */
export const element = (point: Point): GroupElement => {
  const backend = current()
  const cached = cache.get(point)
  if (cached !== undefined && cached.backend === backend && sameBytes(cached.bytes, point)) return cached.element
  const parsed = parseElement(point)
  if (typeof parsed === "string") throw new Error(`invariant violated: branded point is invalid (${parsed})`)
  cache.set(point, { backend, bytes: Uint8Array.from(point), element: parsed })
  return parsed
}

/** The EVM encoding of an element, branded as a valid point. */
export const encode = (value: GroupElement): Point => {
  const backend = current()
  const bytes = backend.toEvm(value)
  cache.set(bytes, { backend, bytes: Uint8Array.from(bytes), element: value })
  return bytes as Point
}
