/**
 * The mcl-wasm backend: BN254 G1 arithmetic in WebAssembly (herumi/mcl, curve
 * BN_SNARK1, which is alt_bn128; mcl's curve id `BN254` is a different curve). Measured
 * about twelve times faster than noble for an arbitrary-point multiplication.
 *
 * Pitfalls handled here (see shared notes/chain.md):
 * - mcl's public `mul` is not constant time; secret scalars go through
 *   `mclBnG1_mulCT`, which mcl-wasm exposes only on its module object (`mcl.mod`).
 * - mcl serialises field elements little-endian per 32-byte word, so coordinates are
 *   reversed into the EVM big-endian layout.
 * - `getBasePointG1()` throws on this curve; G is built from (1, 2).
 *
 * @internal
 */
import { bytesToNumberBE, numberToBytesLE } from "@noble/curves/utils.js"
import mcl from "mcl-wasm"
import type { GroupBackend, GroupElement } from "./backend.ts"
import { generatorGAffine, generatorHAffine } from "./curve.ts"

/** The parts of mcl-wasm's module object that its type declarations leave out. */
interface MclModule {
  readonly _mclBnG1_mulCT: (out: number, point: number, scalar: number) => void
  readonly callOp2: (func: (out: number, x: number, y: number) => void, out: Uint32Array, x: Uint32Array, y: Uint32Array) => void
}

/** mcl values keep their limbs in a public-at-runtime `a_` array the declarations do not show. */
interface WithLimbs {
  readonly a_: Uint32Array
}

const limbs = (value: mcl.G1 | mcl.Fr): Uint32Array => (value as unknown as WithLimbs).a_

const toElement = (point: mcl.G1): GroupElement => point as unknown as GroupElement
const toPoint = (element: GroupElement): mcl.G1 => element as unknown as mcl.G1

const fieldElement = (value: bigint): mcl.Fp => {
  const out = new mcl.Fp()
  out.deserialize(numberToBytesLE(value, 32))
  return out
}

const scalarElement = (value: bigint): mcl.Fr => {
  const out = new mcl.Fr()
  out.deserialize(numberToBytesLE(value, 32))
  return out
}

const reverseWord = (littleEndian: Uint8Array): Uint8Array => {
  const out = new Uint8Array(32)
  for (let i = 0; i < 32; i++) out[i] = littleEndian[31 - i] ?? 0
  return out
}

const fromAffine = (x: bigint, y: bigint): GroupElement | undefined => {
  const point = new mcl.G1()
  point.setX(fieldElement(x))
  point.setY(fieldElement(y))
  point.setZ(fieldElement(1n))
  return point.isValid() ? toElement(point) : undefined
}

const toEvm = (element: GroupElement): Uint8Array => {
  const point = toPoint(element)
  const out = new Uint8Array(64)
  if (point.isZero()) return out
  const affine = mcl.normalize(point)
  out.set(reverseWord(affine.getX().serialize()), 0)
  out.set(reverseWord(affine.getY().serialize()), 32)
  return out
}

const build = (): GroupBackend => {
  const module = (mcl as unknown as { readonly mod: MclModule }).mod
  const generatorG = fromAffine(generatorGAffine.x, generatorGAffine.y)
  const generatorH = fromAffine(generatorHAffine.x, generatorHAffine.y)
  if (generatorG === undefined || generatorH === undefined) {
    throw new Error("mcl-wasm was not initialised on curve BN_SNARK1")
  }
  const multiplySecret = (element: GroupElement, scalar: bigint): GroupElement => {
    const out = new mcl.G1()
    module.callOp2(module._mclBnG1_mulCT, limbs(out), limbs(toPoint(element)), limbs(scalarElement(scalar)))
    return toElement(out)
  }
  const backend: GroupBackend = {
    name: "mcl",
    identity: toElement(new mcl.G1()),
    generatorG,
    generatorH,
    fromAffine,
    toEvm,
    add: (left, right) => toElement(mcl.add(toPoint(left), toPoint(right))),
    subtract: (left, right) => toElement(mcl.sub(toPoint(left), toPoint(right))),
    negate: (element) => toElement(mcl.neg(toPoint(element))),
    equals: (left, right) => toPoint(left).isEqual(toPoint(right)),
    isIdentity: (element) => toPoint(element).isZero(),
    multiplySecret,
    multiplyPublic: (element, scalar) => toElement(mcl.mul(toPoint(element), scalarElement(scalar)))
  }
  // A self-check at load time: the pitfalls above (wrong curve, word order) would
  // otherwise surface as silently wrong ciphertexts.
  const check = backend.toEvm(multiplySecret(generatorG, 2n))
  const expectedX = 0x030644e72e131a029b85045b68181585d97816a916871ca8d3c208c16d87cfd3n
  if (bytesToNumberBE(check.subarray(0, 32)) !== expectedX) {
    throw new Error("mcl-wasm self-check failed: 2·G does not match alt_bn128")
  }
  return backend
}

let loading: Promise<GroupBackend> | undefined

/** Loads and initialises mcl-wasm once; later calls share the same promise. */
export const loadMclBackend = (): Promise<GroupBackend> => {
  loading ??= mcl.init(mcl.BN_SNARK1).then(build)
  return loading
}
