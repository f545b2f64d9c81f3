/**
 * The group-arithmetic backend: the only place where BN254 G1 points are added and
 * multiplied. Two implementations exist, noble (pure JavaScript, available at once) and
 * mcl-wasm (WebAssembly, about twelve times faster, loaded asynchronously). Every public
 * function of the package goes through the backend that is active when it is called;
 * because both produce byte-identical encodings (checked by tests), switching backends
 * never changes a result, only its speed.
 *
 * @internal
 */
import { nobleBackend } from "./nobleBackend.ts"

/**
 * An element of BN254 G1 in the active backend's own representation. Opaque on purpose:
 * elements never leave the package; callers see only 64-byte EVM encodings.
 */
export interface GroupElement {
  readonly GroupElement: unique symbol
}

/** The operations every backend provides. */
export interface GroupBackend {
  readonly name: "noble" | "mcl"
  readonly identity: GroupElement
  readonly generatorG: GroupElement
  readonly generatorH: GroupElement
  /**
   * Builds an element from affine coordinates already checked to be < p and not both 0;
   * `undefined` when (x, y) is not on the curve. BN254 G1 has cofactor 1, so on the curve
   * means in the group.
   */
  readonly fromAffine: (x: bigint, y: bigint) => GroupElement | undefined
  /** The 64-byte EVM encoding x || y; the identity is 64 zero bytes. */
  readonly toEvm: (element: GroupElement) => Uint8Array
  readonly add: (left: GroupElement, right: GroupElement) => GroupElement
  readonly subtract: (left: GroupElement, right: GroupElement) => GroupElement
  readonly negate: (element: GroupElement) => GroupElement
  readonly equals: (left: GroupElement, right: GroupElement) => boolean
  readonly isIdentity: (element: GroupElement) => boolean
  /** scalar · element in constant time; for any scalar that is or depends on a secret. scalar in [0, n). */
  readonly multiplySecret: (element: GroupElement, scalar: bigint) => GroupElement
  /** scalar · element in variable time; only for public scalars (proof verification). scalar in [0, n). */
  readonly multiplyPublic: (element: GroupElement, scalar: bigint) => GroupElement
}

let active: GroupBackend = nobleBackend

/** The backend every operation uses now. */
export const current = (): GroupBackend => active

/** Makes `backend` the active one. */
export const activate = (backend: GroupBackend): void => {
  active = backend
}

/**
 * 2^253: added to every amount before multiplying. Amounts are below 2^64, and both
 * backends' multiplication time grows with the scalar's bit length (mcl's `mulCT`
 * measured 23 µs for 1, 88 µs for 2^64 − 1, 183 µs for 254-bit scalars), which would leak
 * the size of the amount. a + 2^253 is always a 254-bit scalar below n, so every amount
 * takes the same time; the constant 2^253·G is subtracted afterwards.
 */
const amountOffset = 1n << 253n

const offsetPoints = new WeakMap<GroupBackend, GroupElement>()

/** a·G for a secret amount a in [0, 2^64), in time independent of a. */
export const multiplyAmount = (backend: GroupBackend, amount: bigint): GroupElement => {
  let offsetPoint = offsetPoints.get(backend)
  if (offsetPoint === undefined) {
    offsetPoint = backend.multiplyPublic(backend.generatorG, amountOffset)
    offsetPoints.set(backend, offsetPoint)
  }
  return backend.subtract(backend.multiplySecret(backend.generatorG, amount + amountOffset), offsetPoint)
}
