/**
 * The outcome of validating untrusted input: a value, or the reason it was refused.
 * Validation failures (a bad point, an expired proof, a tampered box) are ordinary
 * outcomes, not exceptions; only programmer errors throw. Reasons are short snake_case
 * codes that name what is wrong and never carry the secret values involved.
 *
 * @since 0.1.0
 */

/**
 * @since 0.1.0
 * @category models
 */
export type Result<A, Reason extends string> =
  | { readonly ok: true; readonly value: A }
  | { readonly ok: false; readonly reason: Reason }

/**
 * @since 0.1.0
 * @category constructors
 */
export const succeed = <A>(value: A): Result<A, never> => ({ ok: true, value })

/**
 * @since 0.1.0
 * @category constructors
 */
export const fail = <Reason extends string>(reason: Reason): Result<never, Reason> => ({ ok: false, reason })
