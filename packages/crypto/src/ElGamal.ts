/**
 * Twisted ElGamal with grouped decryption handles, on BN254 G1 (as in Solana's
 * confidential transfers).
 *
 * An amount a (base units, 0 ≤ a < 2^64) is encrypted once for several keys with one
 * random r: the commitment C = a·G + r·H and one handle D_k = r·PK_k per key. The holder
 * of s_k (PK_k = s_k⁻¹·H) computes C − s_k·D_k = a·G. Recovering a from a·G needs a
 * discrete log, so clients learn a from a sealed box and confirm it with `matches`.
 *
 * Ciphertexts add and subtract component-wise, which is how the token contract keeps
 * encrypted balances (ΣC, ΣD_owner, ΣD_guardian) with the ecAdd precompile.
 *
 * @since 0.1.0
 */
import { bytesToHex } from "@noble/hashes/utils.js"
import { keccak_256 } from "@noble/hashes/sha3.js"
import type { Hex } from "viem"
import { concatBytes } from "./internal/bytes.ts"
import { current, type GroupElement, multiplyAmount } from "./internal/backend.ts"
import { secretScalar } from "./internal/keys.ts"
import { element, encode } from "./internal/points.ts"
import { randomScalar } from "./internal/scalars.ts"
import type { PublicKey } from "./EncryptionKey.ts"
import * as Point from "./Point.ts"
import { type RandomSource, secure } from "./Random.ts"
import { fail, type Result, succeed } from "./Result.ts"

/**
 * A commitment and its decryption handles, in the order of the keys it was encrypted to.
 * A transfer's ciphertext has three handles: sender (or, for an agent, its owner),
 * recipient, guardian. An on-chain balance has two: owner, guardian.
 *
 * @since 0.1.0
 * @category models
 */
export interface Ciphertext {
  readonly commitment: Point.Point
  readonly handles: ReadonlyArray<Point.Point>
}

/**
 * What opens a ciphertext: the amount and the randomness r. The server holds it for one
 * request and seals it to the guardian; nobody stores it in plaintext.
 *
 * @since 0.1.0
 * @category models
 */
export interface Opening {
  readonly amount: bigint
  readonly randomness: bigint
}

/**
 * Why an opening does not match a ciphertext.
 *
 * @since 0.1.0
 * @category errors
 */
export type OpeningError = "handle_count_mismatch" | "commitment_mismatch" | "handle_mismatch"

/**
 * Why bytes were refused as a ciphertext.
 *
 * @since 0.1.0
 * @category errors
 */
export type CiphertextError = Point.PointError

/**
 * Amounts are integers in [0, amountLimit) = [0, 2^64).
 *
 * @since 0.1.0
 * @category constants
 */
export const amountLimit: bigint = 1n << 64n

/**
 * Throws unless 0 ≤ amount < 2^64: an amount outside that range is a programmer error
 * (the API validates amounts long before they reach here). The message names the rule,
 * never the value.
 *
 * @since 0.1.0
 * @category validation
 */
export const assertAmount = (amount: bigint): void => {
  if (typeof amount !== "bigint" || amount < 0n || amount >= amountLimit) {
    throw new RangeError("amount must be a bigint in [0, 2^64)")
  }
}

const amountTimesG = (amount: bigint): GroupElement => multiplyAmount(current(), amount)

/**
 * Encrypts `amount` to every key in `publicKeys` with one fresh r. Returns the ciphertext
 * and its opening (the r is needed for the guardian's sealed copy).
 *
 * @since 0.1.0
 * @category constructors
 */
export const encrypt = (
  amount: bigint,
  publicKeys: ReadonlyArray<PublicKey>,
  random: RandomSource = secure
): { readonly ciphertext: Ciphertext; readonly opening: Opening } => {
  assertAmount(amount)
  const randomness = randomScalar(random)
  return { ciphertext: encryptWith({ amount, randomness }, publicKeys), opening: { amount, randomness } }
}

/**
 * A fresh opening {amount, r} without computing its ciphertext: for the server,
 * which seals the opening to the guardian and lets the guardian compute C and
 * the handles (one computation instead of two).
 *
 * @since 0.1.0
 * @category constructors
 */
export const newOpening = (amount: bigint, random: RandomSource = secure): Opening => {
  assertAmount(amount)
  return { amount, randomness: randomScalar(random) }
}

/**
 * The ciphertext that an opening determines for the given keys: C = a·G + r·H,
 * D_k = r·PK_k. All multiplications are constant time (a and r are secret).
 *
 * @since 0.1.0
 * @category constructors
 */
export const encryptWith = (opening: Opening, publicKeys: ReadonlyArray<PublicKey>): Ciphertext => {
  assertAmount(opening.amount)
  const backend = current()
  const commitment = backend.add(amountTimesG(opening.amount), backend.multiplySecret(backend.generatorH, opening.randomness))
  return {
    commitment: encode(commitment),
    handles: publicKeys.map((publicKey) => encode(backend.multiplySecret(element(publicKey), opening.randomness)))
  }
}

/**
 * The ciphertext of a public amount with no randomness: (a·G, identity, …), what the
 * contract credits on a shield. Anyone can read the amount from it, which is fine because
 * a shield's amount is public anyway.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromPublicAmount = (amount: bigint, handleCount: number): Ciphertext => {
  assertAmount(amount)
  const backend = current()
  return {
    commitment: encode(backend.multiplyPublic(backend.generatorG, amount)),
    handles: Array.from({ length: handleCount }, () => Point.identity)
  }
}

/**
 * Checks an opening against a ciphertext and its keys: C == a·G + r·H and every
 * D_k == r·PK_k. This is the guardian's consistency check on a transfer.
 *
 * @since 0.1.0
 * @category validation
 */
export const verifyOpening = (
  ciphertext: Ciphertext,
  publicKeys: ReadonlyArray<PublicKey>,
  opening: Opening
): Result<void, OpeningError> => {
  if (ciphertext.handles.length !== publicKeys.length) return fail("handle_count_mismatch")
  const backend = current()
  const expectedCommitment = backend.add(
    amountTimesG(opening.amount),
    backend.multiplySecret(backend.generatorH, opening.randomness)
  )
  if (!backend.equals(expectedCommitment, element(ciphertext.commitment))) return fail("commitment_mismatch")
  for (let index = 0; index < publicKeys.length; index++) {
    const publicKey = publicKeys[index]
    const handle = ciphertext.handles[index]
    if (publicKey === undefined || handle === undefined) return fail("handle_count_mismatch")
    const expectedHandle = backend.multiplySecret(element(publicKey), opening.randomness)
    if (!backend.equals(expectedHandle, element(handle))) return fail("handle_mismatch")
  }
  return succeed(undefined)
}

/**
 * Validates a ciphertext read from outside (chain, database, request): every point on the
 * curve; the identity is allowed (an empty balance is all identity).
 *
 * @since 0.1.0
 * @category validation
 */
export const parse = (
  commitment: Uint8Array,
  handles: ReadonlyArray<Uint8Array>
): Result<Ciphertext, CiphertextError> => {
  const parsedCommitment = Point.parse(commitment, { allowIdentity: true })
  if (!parsedCommitment.ok) return parsedCommitment
  const parsedHandles: Array<Point.Point> = []
  for (const handle of handles) {
    const parsed = Point.parse(handle, { allowIdentity: true })
    if (!parsed.ok) return parsed
    parsedHandles.push(parsed.value)
  }
  return succeed({ commitment: parsedCommitment.value, handles: parsedHandles })
}

const combine = (
  left: Ciphertext,
  right: Ciphertext,
  operation: (x: GroupElement, y: GroupElement) => GroupElement
): Ciphertext => {
  if (left.handles.length !== right.handles.length) {
    throw new RangeError("ciphertexts have different numbers of handles")
  }
  return {
    commitment: encode(operation(element(left.commitment), element(right.commitment))),
    handles: left.handles.map((handle, index) =>
      encode(operation(element(handle), element(right.handles[index] ?? Point.identity)))
    )
  }
}

/**
 * Component-wise sum: encrypts a₁ + a₂ under r₁ + r₂ (a credit).
 *
 * @since 0.1.0
 * @category combinators
 */
export const add = (left: Ciphertext, right: Ciphertext): Ciphertext =>
  combine(left, right, (x, y) => current().add(x, y))

/**
 * Component-wise difference: encrypts a₁ − a₂ under r₁ − r₂ (a debit).
 *
 * @since 0.1.0
 * @category combinators
 */
export const subtract = (left: Ciphertext, right: Ciphertext): Ciphertext =>
  combine(left, right, (x, y) => current().subtract(x, y))

/**
 * Keeps only the handles at the given positions, e.g. the (C, D_to, D_guardian) that a
 * transfer credits to the recipient.
 *
 * @since 0.1.0
 * @category combinators
 */
export const select = (ciphertext: Ciphertext, positions: ReadonlyArray<number>): Ciphertext => ({
  commitment: ciphertext.commitment,
  handles: positions.map((position) => {
    const handle = ciphertext.handles[position]
    if (handle === undefined) throw new RangeError("handle position out of range")
    return handle
  })
})

/**
 * C − s·D = a·G, the amount "in the exponent". One constant-time multiplication.
 *
 * @since 0.1.0
 * @category destructors
 */
export const decryptToPoint = (secretKey: Uint8Array, commitment: Point.Point, handle: Point.Point): Point.Point => {
  const backend = current()
  return encode(backend.subtract(element(commitment), backend.multiplySecret(element(handle), secretScalar(secretKey))))
}

/**
 * Whether (C, D) encrypts `amount` for the holder of `secretKey`: s·D == C − a·G. One
 * multiplication by the secret key plus one by the fixed base G, both constant time. The
 * guardian uses it on its books (s_g·ΣD_g == ΣC − b·G), clients on their balances and on
 * the amounts of their sealed boxes.
 *
 * @since 0.1.0
 * @category predicates
 */
export const matches = (
  secretKey: Uint8Array,
  commitment: Point.Point,
  handle: Point.Point,
  amount: bigint
): boolean => {
  assertAmount(amount)
  const backend = current()
  const blinding = backend.multiplySecret(element(handle), secretScalar(secretKey))
  return backend.equals(blinding, backend.subtract(element(commitment), amountTimesG(amount)))
}

/**
 * keccak256(C ‖ D₁ ‖ … ‖ D_k) over the EVM encodings, as a 0x-prefixed hex string. For a
 * confidential transfer the handles are (from, to, guardian), 256 bytes in all; for a
 * public transfer (from, guardian), 192 bytes.
 *
 * @since 0.1.0
 * @category digests
 */
export const digest = (ciphertext: Ciphertext): Hex =>
  `0x${bytesToHex(keccak_256(concatBytes(ciphertext.commitment, ...ciphertext.handles)))}`
