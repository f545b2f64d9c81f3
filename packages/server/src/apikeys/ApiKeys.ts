/**
 * API keys: issue, verify, list, revoke, and count their use.
 *
 * Verification hashes the presented key with HMAC-SHA256 under the server
 * pepper and looks the hash up; the stored and computed hashes are compared
 * again in constant time. Verified keys may be served from an in-process cache
 * for `API_KEY_CACHE_TTL_MS`, but only in the embedded mode, where every
 * revocation passes through this process and evicts the entry before it
 * returns: a revoked key is refused on the very next request. With several
 * nodes (PostgreSQL) a revocation on one node could not evict the others'
 * caches, so there the database is asked on every request.
 *
 * Usage (`request_count`, `last_used_at`) is counted in memory and written every
 * `API_KEY_USAGE_FLUSH_MS`, and once more at shutdown: a crash loses at most
 * that interval of counts.
 *
 * @since 0.1.0
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto"
import { Clock, Context, DateTime, Duration, Effect, Layer, Option, Redacted, Schedule } from "effect"
import type { SqlError } from "effect/sql"
import { AppConfig } from "../config/AppConfig.ts"
import { makeId } from "../platform/Ids.ts"
import { Secrets } from "../platform/Secrets.ts"
import { ApiKeyStore } from "./ApiKeyStore.ts"
import { type ApiKeyRecord, apiKeyRandomBytes, type Mode, modeOfApiKey, type Principal } from "@pps/api/ApiKeys"

/**
 * Why a presented key was refused (all answer 401 `unauthorized`, D8; the reason
 * is for logs and tests only).
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidApiKey extends Error {
  override readonly name = "InvalidApiKey"
  readonly _tag = "InvalidApiKey" as const
  readonly reason: "malformed" | "unknown" | "revoked"
  constructor(reason: "malformed" | "unknown" | "revoked") {
    super(`API key refused: ${reason}`)
    this.reason = reason
  }
}

/**
 * @since 0.1.0
 * @category models
 */
export interface IssuedApiKey {
  readonly keyId: string
  readonly name: string
  readonly mode: Mode
  /** Shown once, at creation. */
  readonly apiKey: Redacted.Redacted<string>
}

interface CacheEntry {
  readonly principal: Principal
  readonly keyHash: Uint8Array
  readonly expiresAtMs: number
}

interface Usage {
  requests: number
  lastUsedAtMs: number
}

/**
 * @since 0.1.0
 * @category services
 */
export class ApiKeys extends Context.Service<ApiKeys, {
  readonly issue: (accountId: string, name: string, mode: Mode) => Effect.Effect<IssuedApiKey, SqlError.SqlError>
  /**
   * `countUse: false` for a re-check of a key already counted for its request (a long-lived
   * response asking whether its key was revoked meanwhile): usage counts requests, not checks.
   */
  readonly verify: (presented: string, options?: { readonly countUse?: boolean }) => Effect.Effect<Principal, InvalidApiKey | SqlError.SqlError>
  readonly list: (accountId: string) => Effect.Effect<ReadonlyArray<ApiKeyRecord>, SqlError.SqlError>
  /** Some(account id) when an active key was revoked; None when unknown or already revoked. */
  readonly revoke: (keyId: string) => Effect.Effect<Option.Option<string>, SqlError.SqlError>
  readonly exists: (keyId: string) => Effect.Effect<boolean, SqlError.SqlError>
  /** Writes the counted usage now (also runs on its own schedule and at shutdown). */
  readonly flushUsage: Effect.Effect<void>
}>()("server/apikeys/ApiKeys") {
  static readonly layer = Layer.effect(
    ApiKeys,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const secrets = yield* Secrets
      const store = yield* ApiKeyStore
      const pepper = Redacted.value(secrets.apiKeyPepper)
      const cacheTtlMs = Option.isNone(config.databaseUrl) ? config.apiKeyCacheTtlMs : 0
      const cache = new Map<string, CacheEntry>()
      let usage = new Map<string, Usage>()
      // Bumped by every revocation: a verification that read the database before
      // a revocation finished must not put its (now stale) result in the cache.
      let revocationEpoch = 0

      const hashOf = (key: string) => new Uint8Array(createHmac("sha256", pepper).update(key, "utf8").digest())
      const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex")

      const countUse = (keyId: string, nowMs: number) => {
        const entry = usage.get(keyId)
        if (entry === undefined) usage.set(keyId, { requests: 1, lastUsedAtMs: nowMs })
        else {
          entry.requests += 1
          entry.lastUsedAtMs = Math.max(entry.lastUsedAtMs, nowMs)
        }
      }

      const flushUsage = Effect.gen(function*() {
        if (usage.size === 0) return
        const batch = usage
        usage = new Map()
        for (const [keyId, { lastUsedAtMs, requests }] of batch) {
          yield* store.addUsage(keyId, requests, DateTime.formatIso(DateTime.makeUnsafe(lastUsedAtMs))).pipe(
            Effect.catch((error) =>
              // Put the counts back so the next flush retries them.
              Effect.sync(() => {
                const entry = usage.get(keyId)
                if (entry === undefined) usage.set(keyId, { requests, lastUsedAtMs })
                else {
                  entry.requests += requests
                  entry.lastUsedAtMs = Math.max(entry.lastUsedAtMs, lastUsedAtMs)
                }
              }).pipe(Effect.andThen(Effect.logWarning("api key usage flush failed", error)))
            )
          )
        }
      }).pipe(Effect.withSpan("ApiKeys.flushUsage"))

      yield* Effect.forkScoped(
        flushUsage.pipe(Effect.repeat(Schedule.spaced(Duration.millis(config.apiKeyUsageFlushMs))))
      )
      yield* Effect.addFinalizer(() => flushUsage)

      const verify = Effect.fn("ApiKeys.verify")(function*(presented: string, options?: { readonly countUse?: boolean }) {
        const counted = options?.countUse ?? true
        if (modeOfApiKey(presented) === undefined) return yield* Effect.fail(new InvalidApiKey("malformed"))
        const keyHash = hashOf(presented)
        const cacheKey = hex(keyHash)
        const nowMs = yield* Clock.currentTimeMillis
        const cached = cache.get(cacheKey)
        if (cached !== undefined && cached.expiresAtMs > nowMs && timingSafeEqual(cached.keyHash, keyHash)) {
          if (counted) countUse(cached.principal.keyId, nowMs)
          return cached.principal
        }
        const epochBeforeRead = revocationEpoch
        const found = yield* store.findByHash(keyHash)
        if (Option.isNone(found) || !timingSafeEqual(found.value.key_hash, keyHash)) {
          return yield* Effect.fail(new InvalidApiKey("unknown"))
        }
        const row = found.value
        if (row.revoked) return yield* Effect.fail(new InvalidApiKey("revoked"))
        const principal: Principal = {
          keyId: row.key_id,
          accountId: row.account_id,
          accountType: row.account_type,
          ownerAccountId: row.owner_account_id,
          mode: row.mode
        }
        if (cacheTtlMs > 0 && epochBeforeRead === revocationEpoch) cache.set(cacheKey, { principal, keyHash, expiresAtMs: nowMs + cacheTtlMs })
        if (counted) countUse(principal.keyId, nowMs)
        return principal
      })

      return ApiKeys.of({
        issue: Effect.fn("ApiKeys.issue")(function*(accountId, name, mode) {
          const nowMs = yield* Clock.currentTimeMillis
          const keyId = makeId("key", nowMs)
          const value = `hc_${mode}_${randomBytes(apiKeyRandomBytes).toString("base64url")}`
          yield* store.insert({
            keyId,
            accountId,
            name,
            mode,
            keyHash: hashOf(value),
            keyHint: value.slice(-4),
            createdAt: DateTime.formatIso(DateTime.makeUnsafe(nowMs))
          })
          return { keyId, name, mode, apiKey: Redacted.make(value) }
        }),
        verify,
        list: store.listByAccount,
        revoke: Effect.fn("ApiKeys.revoke")(function*(keyId) {
          const nowMs = yield* Clock.currentTimeMillis
          const revoked = yield* store.revoke(keyId, DateTime.formatIso(DateTime.makeUnsafe(nowMs)))
          // Evict before answering, so the very next request with the key is refused;
          // the epoch stops verifications that read the row before the update from
          // caching it afterwards.
          revocationEpoch += 1
          for (const [cacheKey, entry] of cache) if (entry.principal.keyId === keyId) cache.delete(cacheKey)
          return revoked
        }),
        exists: store.exists,
        flushUsage
      })
    })
  ).pipe(Layer.provide(ApiKeyStore.layer))
}
