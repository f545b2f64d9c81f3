/**
 * The noble backend: BN254 G1 arithmetic from @noble/curves, pure JavaScript, usable in
 * every environment without initialisation. `multiply` is noble's constant-time ladder;
 * `multiplyUnsafe` its variable-time one, used only for public scalars.
 *
 * @internal
 */
import { numberToBytesBE } from "@noble/curves/utils.js"
import type { GroupBackend, GroupElement } from "./backend.ts"
import { generatorGAffine, generatorHAffine, NoblePoint } from "./curve.ts"

type Point = InstanceType<typeof NoblePoint>

const toElement = (point: Point): GroupElement => point as unknown as GroupElement
const toPoint = (element: GroupElement): Point => element as unknown as Point

const fromAffine = (x: bigint, y: bigint): GroupElement | undefined => {
  try {
    const point = NoblePoint.fromAffine({ x, y })
    point.assertValidity()
    return toElement(point)
  } catch {
    return undefined
  }
}

const generatorH = NoblePoint.fromAffine(generatorHAffine)
// Tables for the two fixed generators make a·G and r·H (every encryption) several times
// cheaper; noble keeps them in a WeakMap keyed by the point object.
const generatorG = NoblePoint.fromAffine(generatorGAffine)
generatorG.precompute(8)
generatorH.precompute(8)

export const nobleBackend: GroupBackend = {
  name: "noble",
  identity: toElement(NoblePoint.ZERO),
  generatorG: toElement(generatorG),
  generatorH: toElement(generatorH),
  fromAffine,
  toEvm: (element) => {
    const point = toPoint(element)
    if (point.is0()) return new Uint8Array(64)
    const { x, y } = point.toAffine()
    const out = new Uint8Array(64)
    out.set(numberToBytesBE(x, 32), 0)
    out.set(numberToBytesBE(y, 32), 32)
    return out
  },
  add: (left, right) => toElement(toPoint(left).add(toPoint(right))),
  subtract: (left, right) => toElement(toPoint(left).subtract(toPoint(right))),
  negate: (element) => toElement(toPoint(element).negate()),
  equals: (left, right) => toPoint(left).equals(toPoint(right)),
  isIdentity: (element) => toPoint(element).is0(),
  // noble's constant-time `multiply` refuses 0; the only caller that can pass 0 is an
  // amount of 0, which is then the one value whose timing differs (documented).
  multiplySecret: (element, scalar) =>
    scalar === 0n ? toElement(NoblePoint.ZERO) : toElement(toPoint(element).multiply(scalar)),
  multiplyPublic: (element, scalar) => toElement(toPoint(element).multiplyUnsafe(scalar))
}
