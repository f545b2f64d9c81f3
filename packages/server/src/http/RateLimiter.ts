/**
 * D7: a token bucket per API key, in process memory.
 *
 * Each key may make `RATE_LIMIT_PER_SECOND` requests a second on average with
 * bursts up to `RATE_LIMIT_BURST`. With several api nodes each node keeps its
 * own buckets, so the effective limit is at most nodes x the configured one;
 * operators divide accordingly (docs/operations.md).
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer } from "effect"
import { AppConfig } from "../config/AppConfig.ts"

interface Bucket {
  tokens: number
  refilledAtMs: number
}

/** Buckets idle this long are full again anyway: dropping them bounds memory. */
const idleBucketMs = 60_000
/** The bucket map is swept for idle entries at most this often. */
const sweepEveryMs = 30_000

/**
 * @since 0.1.0
 * @category services
 */
export class RateLimiter extends Context.Service<RateLimiter, {
  /** Takes one token: `{ allowed: true }`, or the whole seconds to wait before retrying. */
  readonly take: (keyId: string) => Effect.Effect<{ readonly allowed: true } | { readonly allowed: false; readonly retryAfterSeconds: number }>
}>()("server/http/RateLimiter") {
  static readonly layer = Layer.effect(
    RateLimiter,
    Effect.gen(function*() {
      const { rateLimitBurst: burst, rateLimitPerSecond: perSecond } = yield* AppConfig
      const buckets = new Map<string, Bucket>()
      let sweptAtMs = 0
      return RateLimiter.of({
        take: (keyId) =>
          Effect.map(Clock.currentTimeMillis, (nowMs) => {
            if (nowMs - sweptAtMs > sweepEveryMs) {
              for (const [id, b] of buckets) if (nowMs - b.refilledAtMs > idleBucketMs) buckets.delete(id)
              sweptAtMs = nowMs
            }
            const bucket = buckets.get(keyId) ?? { tokens: burst, refilledAtMs: nowMs }
            bucket.tokens = Math.min(burst, bucket.tokens + ((nowMs - bucket.refilledAtMs) / 1000) * perSecond)
            bucket.refilledAtMs = nowMs
            buckets.set(keyId, bucket)
            if (bucket.tokens >= 1) {
              bucket.tokens -= 1
              return { allowed: true } as const
            }
            return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / perSecond)) } as const
          })
      })
    })
  )
}
