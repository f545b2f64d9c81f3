/**
 * The Idempotency-Key a POST carries when its caller chose none: one rule for the facade's
 * transport and `ApiClient`'s.
 *
 * @since 0.4.0
 */

/** A random idempotency key: 128 bits from the platform's CSPRNG (never `Math.random`). */
export const newIdempotencyKey = (): string => `pps_${globalThis.crypto.randomUUID()}`
