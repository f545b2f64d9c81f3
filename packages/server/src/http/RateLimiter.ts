/**
 * D7: a token bucket per API key.
 *
 * Each key may make `RATE_LIMIT_PER_SECOND` requests a second on average with
 * bursts up to `RATE_LIMIT_BURST`. The embedded mode (one process) keeps the
 * buckets in memory. The distributed mode keeps them in PostgreSQL, shared by
 * every api node: one row per key, refilled and taken from in one
 * atomic statement, so several nodes together allow the configured rate, not a
 * multiple of it. That costs one write per authenticated request, on the row of
 * the key, which serializes one key's requests across nodes for the statement's
 * length.
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer, Option, Schedule, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { AppConfig } from "../config/AppConfig.ts"

interface Bucket {
  tokens: number
  refilledAtMs: number
}

/** Buckets idle this long are full again anyway: dropping them bounds memory. */
const idleBucketMs = 60_000
/** The bucket map is swept for idle entries at most this often. */
const sweepEveryMs = 30_000

type Decision = { readonly allowed: true } | { readonly allowed: false; readonly retryAfterSeconds: number }

const retryAfter = (tokens: number, perSecond: number) => Math.max(1, Math.ceil((1 - tokens) / perSecond))

const BucketRow = Schema.Struct({ tokens: Schema.Number, last_allowed: Schema.Boolean })

/** The embedded mode's buckets: one process, in memory. */
const inMemory = (burst: number, perSecond: number) => {
  const buckets = new Map<string, Bucket>()
  let sweptAtMs = 0
  return (keyId: string): Effect.Effect<Decision> =>
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
      return { allowed: false, retryAfterSeconds: retryAfter(bucket.tokens, perSecond) } as const
    })
}

/**
 * The distributed mode's buckets: rows every node shares. The refill, the check and the
 * take are one statement under the row's lock (the SET expressions all read the row as it
 * was), so concurrent requests on different nodes never both take the last token.
 */
const shared = (sql: SqlClient.SqlClient, burst: number, perSecond: number) =>
  Effect.gen(function*() {
    // Idle rows are full again anyway: deleting them bounds the table. Every node sweeps; the
    // deletes are idempotent.
    yield* Effect.forkScoped(
      sql`DELETE FROM rate_limit_buckets WHERE refilled_at < now() - make_interval(secs => ${idleBucketMs / 1000})`.pipe(
        Effect.catch((error) => Effect.logWarning("sweeping idle rate limit buckets failed", error)),
        Effect.repeat(Schedule.spaced(sweepEveryMs)),
        Effect.delay(sweepEveryMs)
      )
    )
    const refilled = (alias: string) =>
      `LEAST(${burst}::double precision, ${alias}.tokens + EXTRACT(EPOCH FROM (now() - ${alias}.refilled_at)) * ${perSecond}::double precision)`
    const statement = `
      INSERT INTO rate_limit_buckets AS b (key_id, tokens, refilled_at, last_allowed)
      VALUES ($1, ${burst - 1}, now(), true)
      ON CONFLICT (key_id) DO UPDATE SET
        tokens = CASE WHEN ${refilled("b")} >= 1 THEN ${refilled("b")} - 1 ELSE ${refilled("b")} END,
        last_allowed = ${refilled("b")} >= 1,
        refilled_at = now()
      RETURNING tokens, last_allowed`
    return (keyId: string): Effect.Effect<Decision> =>
      sql.unsafe(statement, [keyId]).pipe(
        Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(BucketRow))),
        Effect.map((rows): Decision => {
          const row = rows[0]
          if (row === undefined || row.last_allowed) return { allowed: true }
          return { allowed: false, retryAfterSeconds: retryAfter(row.tokens, perSecond) }
        }),
        // The database is the node's lifeline: a request it cannot rate-limit fails at the key
        // lookup right after, so letting this one through changes nothing but the log.
        Effect.catch((error) =>
          Effect.logWarning("rate limit check failed; request let through", error).pipe(Effect.as({ allowed: true } as const))
        )
      )
  })

/**
 * @since 0.1.0
 * @category services
 */
export class RateLimiter extends Context.Service<RateLimiter, {
  /** Takes one token: `{ allowed: true }`, or the whole seconds to wait before retrying. */
  readonly take: (keyId: string) => Effect.Effect<Decision>
}>()("server/http/RateLimiter") {
  static readonly layer = Layer.effect(
    RateLimiter,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const { rateLimitBurst: burst, rateLimitPerSecond: perSecond } = config
      const take = Option.isSome(config.databaseUrl)
        ? yield* shared(yield* SqlClient.SqlClient, burst, perSecond)
        : inMemory(burst, perSecond)
      return RateLimiter.of({ take })
    })
  )
}
