/**
 * D32's retry schedule, as a pure function.
 *
 * After the first attempt, a failed delivery is retried after about 5 s, 1 min,
 * 5 min, 30 min, 2 h, 6 h and 12 h: eight attempts in all, then `failed`. Each
 * delay gets a jitter of up to 20 % either way, so receivers recovering from an
 * outage are not hit by every delivery at once. A `Retry-After` from the
 * receiver is honoured within the schedule: it may lengthen a delay up to 20 %
 * over its slot, never shorten it below the jittered delay. Whatever the
 * jitter and Retry-After, no attempt is scheduled later than 24 h after the
 * delivery was created (SPEC.md: retried "for up to 24 hours"): a delay that
 * would cross that bound is cut to end at it.
 *
 * @since 0.1.0
 */

/**
 * The delays after attempts 1..7, in milliseconds.
 *
 * @since 0.1.0
 * @category constants
 */
export const retryDelaysMs: ReadonlyArray<number> = [
  5_000,
  60_000,
  5 * 60_000,
  30 * 60_000,
  2 * 60 * 60_000,
  6 * 60 * 60_000,
  12 * 60 * 60_000
]

/**
 * Attempts a delivery gets before it is `failed`.
 *
 * @since 0.1.0
 * @category constants
 */
export const deliveryAttemptsMax = retryDelaysMs.length + 1

/**
 * Largest relative jitter of a delay.
 *
 * @since 0.1.0
 * @category constants
 */
export const jitterFraction = 0.2

/**
 * No attempt later than this after the delivery was created.
 *
 * @since 0.1.0
 * @category constants
 */
export const retryWindowMs = 24 * 60 * 60_000

/**
 * The delay before the next attempt, or undefined when the delivery has had
 * its last attempt.
 *
 * @since 0.1.0
 * @category constructors
 */
export const nextRetryDelayMs = (options: {
  /** Attempts made so far, including the one that just failed (>= 1). */
  readonly attemptsMade: number
  /** A uniform number in [0, 1) choosing the jitter. */
  readonly jitterUnit: number
  /** The receiver's Retry-After, in milliseconds, when it sent one. */
  readonly retryAfterMs: number | undefined
  /** Time from the delivery's creation to now. */
  readonly elapsedMs: number
}): number | undefined => {
  const base = retryDelaysMs[options.attemptsMade - 1]
  if (base === undefined) return undefined
  const jittered = base * (1 - jitterFraction + 2 * jitterFraction * options.jitterUnit)
  const upper = base * (1 + jitterFraction)
  const withRetryAfter = options.retryAfterMs === undefined
    ? jittered
    : Math.min(Math.max(jittered, options.retryAfterMs), upper)
  const remaining = retryWindowMs - options.elapsedMs
  if (remaining <= 0) return undefined
  return Math.round(Math.min(withRetryAfter, remaining))
}

/**
 * Reads a `Retry-After` header (seconds, or an HTTP date) as milliseconds from `nowMs`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const parseRetryAfterMs = (value: string | undefined, nowMs: number): number | undefined => {
  if (value === undefined) return undefined
  const trimmed = value.trim()
  if (/^\d{1,9}$/.test(trimmed)) return Number(trimmed) * 1_000
  const dateMs = Date.parse(trimmed)
  return Number.isNaN(dateMs) ? undefined : Math.max(0, dateMs - nowMs)
}
