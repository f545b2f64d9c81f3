/**
 * What ties a payment to one request (D57). The resource server issues, per 402 answer, a
 * random nonce and an expiry and authenticates them, with the requirement's own fields and the
 * resource, under a secret only it holds (`tag`, HMAC-SHA256). The payer's memo repeats the
 * resource, nonce and expiry, sealed to payer and payee only, so the payee's opened copy says
 * which request the money was sent for; the Idempotency-Key is derived from the nonce, so a
 * retried request never pays twice.
 *
 * @since 0.1.0
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto"

/**
 * The requirement's fields a tag covers.
 *
 * @since 0.1.0
 * @category models
 */
export interface Bound {
  readonly scheme: string
  readonly network: string
  readonly asset: string
  readonly amount: string
  readonly payTo: string
  readonly resource: string
  readonly nonce: string
  /** ISO 8601 UTC. */
  readonly expiresAt: string
}

/** The nonce's size: 128 bits drawn from the platform's CSPRNG, so none repeats. */
const nonceBytes = 16

/** One line per field, so no value can be shifted into its neighbour. */
const canonical = (bound: Bound): string =>
  ["pps-x402/v1", bound.scheme, bound.network, bound.asset, bound.amount, bound.payTo, bound.resource, bound.nonce, bound.expiresAt].join("\n")

/**
 * The tag of a binding under the resource server's secret (base64url).
 *
 * @since 0.1.0
 * @category constructors
 */
export const tagOf = (secret: Uint8Array, bound: Bound): string =>
  createHmac("sha256", secret).update(canonical(bound)).digest("base64url")

/**
 * A fresh nonce (base64url).
 *
 * @since 0.1.0
 * @category constructors
 */
export const newNonce = (): string => randomBytes(nonceBytes).toString("base64url")

/**
 * Whether a tag is the one for this binding (compared in constant time).
 *
 * @since 0.1.0
 * @category predicates
 */
export const tagMatches = (secret: Uint8Array, bound: Bound, tag: string): boolean => {
  const expected = Buffer.from(tagOf(secret, bound), "base64url")
  const given = Buffer.from(tag, "base64url")
  return given.length === expected.length && timingSafeEqual(given, expected)
}

/**
 * The memo a payment carries: the resource (as a SHA-256, so a long URL fits the 512-byte memo),
 * the nonce and the expiry. Sealed to payer and payee: nobody else reads it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const memoOf = (resource: string, nonce: string, expiresAt: string): string =>
  `x402 pps-sealed v1 resource=${createHash("sha256").update(resource).digest("base64url")} nonce=${nonce} expires=${expiresAt}`

/**
 * The Idempotency-Key of the payment for a nonce: every retry of the request sends this key, so
 * the API answers the first payment instead of making a second (D6).
 *
 * @since 0.1.0
 * @category constructors
 */
export const idempotencyKeyOf = (network: string, nonce: string): string => `x402_${network}_${nonce}`
