/**
 * API keys: issue, verify, list, revoke, and count their use.
 *
 * Verification hashes the presented key with HMAC-SHA256 under the server
 * pepper and looks the hash up; the stored and computed hashes are compared
 * again in constant time. Verified keys may be served from an in-process cache
 * for at most `API_KEY_CACHE_TTL_MS` (0 turns the cache off).
 *
 * - Embedded mode: every revocation passes through this process and evicts the
 *   entry before it returns: a revoked key is refused on the very next request.
 * - Several nodes (PostgreSQL with `NATS_URL`): a revocation evicts locally,
 *   then broadcasts the key id on the event bus's control channel and, before
 *   answering, waits (up to 2 s) until every other live node that hears
 *   revocations (a fresh heartbeat whose row says so, NodeLiveness) has answered
 *   that it evicted it: when the revocation answers, every node that answered
 *   refuses the key. A node records that it hears them before it caches, and
 *   turns its cache off before it records that it stopped: one starting, cut
 *   from NATS or stopping caches nothing and is not waited for. A node that does not answer in
 *   time is named in a warning; the revocation stands (it is committed).
 *   A node caches only while its subscription is known to be live: on a NATS
 *   disconnect, stale connection, dropped message or subscription error it
 *   clears the cache and stops caching until it has reconnected and its
 *   subscription is registered again (a revocation it missed meanwhile is then
 *   read from the database). The TTL stays as the backstop for a node that did
 *   not answer in time and whose loss of NATS no status has reported yet.
 * - PostgreSQL without NATS: no cache; the database is asked on every request.
 *
 * In both cached modes a revocation epoch, bumped by every revocation seen
 * (local or received) and every loss of the channel, closes the read-then-revoke
 * race: a verification whose database read overlapped one does not cache its
 * result.
 *
 * Usage (`request_count`, `last_used_at`) is counted in memory and written every
 * `API_KEY_USAGE_FLUSH_MS`, and once more at shutdown: a crash loses at most
 * that interval of counts.
 *
 * @since 0.1.0
 */
import { createHmac, createSecretKey, type KeyObject, randomBytes, timingSafeEqual } from "node:crypto"
import { Clock, Context, DateTime, Duration, Effect, Layer, Option, Redacted, Schedule, Semaphore } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { AppConfig } from "../config/AppConfig.ts"
import { makeId } from "../platform/Ids.ts"
import { Secrets } from "../platform/Secrets.ts"
import { EventBus } from "../events/EventBus.ts"
import { NodeLiveness } from "../platform/NodeLiveness.ts"
import { type KeyHolder, ApiKeyStore } from "./ApiKeyStore.ts"
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
 * D60: the key is valid, but its account (or its agent's owner) is suspended: 403
 * `account_suspended`, not 401, so its holder learns why.
 *
 * @since 0.11.0
 * @category errors
 */
export class SuspendedAccountKey extends Error {
  override readonly name = "SuspendedAccountKey"
  readonly _tag = "SuspendedAccountKey" as const
  readonly accountId: string
  constructor(accountId: string) {
    super(`API key of suspended account ${accountId}`)
    this.accountId = accountId
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

/** Control-channel topic carrying a revoked key id. */
const revocationTopic = "apikey_revoked"
/** How long a revocation waits for NATS and the other live nodes before answering anyway. */
const revocationBroadcastWaitMs = 2_000
/** How often a node tries again to record that it hears revocations (its cache stays off meanwhile). */
const hearsControlRetryMs = 1_000

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
  readonly verify: (
    presented: string,
    options?: { readonly countUse?: boolean }
  ) => Effect.Effect<Principal, InvalidApiKey | SuspendedAccountKey | SqlError.SqlError>
  readonly list: (accountId: string) => Effect.Effect<ReadonlyArray<ApiKeyRecord>, SqlError.SqlError>
  /**
   * Some(account id) when an active key was revoked; None when unknown, already revoked, or
   * (given `holder`) not that account's key of that mode.
   */
  readonly revoke: (keyId: string, holder?: KeyHolder) => Effect.Effect<Option.Option<string>, SqlError.SqlError>
  /**
   * D56: replaces an active key of `holder` by a new one named `name`. The new key's row, the old
   * key's revocation and whatever `alongside` writes (an Idempotency-Key's link) commit in one
   * transaction, so there is never a moment with both keys active or neither; the old key is then
   * evicted and its revocation broadcast exactly as `revoke` does. None when `keyId` is not an
   * active key of the holder (nothing is written).
   */
  readonly replace: (
    keyId: string,
    holder: KeyHolder,
    name: string,
    alongside: (issued: IssuedApiKey) => Effect.Effect<void, SqlError.SqlError>
  ) => Effect.Effect<Option.Option<IssuedApiKey>, SqlError.SqlError>
  readonly exists: (keyId: string) => Effect.Effect<boolean, SqlError.SqlError>
  /**
   * D60: forgets every cached verification of the account's keys and of its agents' keys, here
   * and (like a revocation) on every other live node before answering; called once a suspension
   * is committed, so the next request with any of those keys reads the suspension.
   */
  readonly evictAccount: (accountId: string) => Effect.Effect<void>
  /** Writes the counted usage now (also runs on its own schedule and at shutdown). */
  readonly flushUsage: Effect.Effect<void>
}>()("server/apikeys/ApiKeys") {
  static readonly layer = Layer.effect(
    ApiKeys,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const control = (yield* EventBus).control
      const distributed = Option.isSome(config.databaseUrl)
      const context: ApiKeysContext = {
        store: yield* ApiKeyStore,
        sql: yield* SqlClient.SqlClient,
        pepper: createSecretKey(Redacted.value((yield* Secrets).apiKeyPepper)),
        control,
        liveness: yield* NodeLiveness,
        cacheTtlMs: !distributed || Option.isSome(control) ? config.apiKeyCacheTtlMs : 0,
        cache: new Map(),
        flushing: yield* Semaphore.make(1),
        usage: new Map(),
        revocationEpoch: 0,
        cacheLive: !distributed
      }
      yield* subscribeRevocations(context)
      const flush = flushUsage(context)
      yield* Effect.forkScoped(flush.pipe(Effect.repeat(Schedule.spaced(Duration.millis(config.apiKeyUsageFlushMs)))))
      yield* Effect.addFinalizer(() => flush)
      return ApiKeys.of({
        issue: (accountId, name, mode) => issue(context, accountId, name, mode),
        verify: (presented, options) => verify(context, presented, options),
        list: context.store.listByAccount,
        revoke: (keyId, holder) => revoke(context, keyId, holder),
        replace: (keyId, holder, name, alongside) => replace(context, keyId, holder, name, alongside),
        exists: context.store.exists,
        evictAccount: (accountId) => evictAccount(context, accountId),
        flushUsage: flush
      })
    })
  ).pipe(Layer.provide(ApiKeyStore.layer))
}

/** What the steps share: the store, the revocation channel, and the cache and counts this node keeps. */
interface ApiKeysContext {
  readonly store: ApiKeyStore["Service"]
  readonly sql: SqlClient.SqlClient
  /** A KeyObject: Node checks and copies raw key bytes on every `createHmac` (webhooks/Signature.ts). */
  readonly pepper: KeyObject
  readonly control: EventBus["Service"]["control"]
  readonly liveness: NodeLiveness["Service"]
  readonly cacheTtlMs: number
  readonly cache: Map<string, CacheEntry>
  /** One flush at a time (see `flushUsage`). */
  readonly flushing: Semaphore.Semaphore
  /** Counted since the last flush; replaced by a new map at each flush. */
  usage: Map<string, Usage>
  /**
   * Bumped by every revocation (made here or received) and every loss of the revocation
   * channel: a verification that read the database before one of those must not put its
   * (possibly stale) result in the cache.
   */
  revocationEpoch: number
  /** Distributed: off until the revocation subscription is registered, and again whenever it may have missed a message. */
  cacheLive: boolean
}

/**
 * Forgets the cached verifications of a key (`key_…`), or of every key of an account and of its
 * agents (`acct_…`, D60): the revocation channel carries either, told apart by their prefix.
 */
const evict = (context: ApiKeysContext, id: string) => {
  context.revocationEpoch += 1
  const matches = (principal: Principal) =>
    principal.keyId === id || principal.accountId === id || principal.ownerAccountId === id
  for (const [cacheKey, entry] of context.cache) if (matches(entry.principal)) context.cache.delete(cacheKey)
}

/**
 * Every node on the control channel subscribes, its cache on or not (API_KEY_CACHE_TTL_MS
 * 0), because a revoking node waits for every live node's answer.
 * The heartbeat row says whether this node hears revocations (NodeLiveness.hearsControl),
 * and a revoking node waits only for nodes that do: so the row says so before this node
 * caches, and the cache is off before the row says otherwise (a write that fails then
 * leaves the row saying "hears": revocations wait for this node in vain, never skip it).
 */
const subscribeRevocations = (context: ApiKeysContext) =>
  Effect.gen(function*() {
    const { control, liveness } = context
    if (Option.isNone(control)) return
    // The channel calls back outside Effect; log with this layer's logger.
    const runFork = Effect.runForkWith(yield* Effect.context<never>())
    // Bumped by every change of the subscription's state: a write of "hears" that finishes
    // after the subscription was lost again must not turn the cache on.
    let channelState = 0
    // At the layer's end a write still being retried gives up (the database is closing).
    yield* Effect.addFinalizer(() => Effect.sync(() => channelState += 1))
    yield* control.value.subscribe(revocationTopic, liveness.nodeId, {
      onMessage: (keyId) => evict(context, keyId),
      onUnreliable: (why) => {
        channelState += 1
        context.revocationEpoch += 1
        context.cacheLive = false
        context.cache.clear()
        // hearsControl takes the value at once (the fiber starts synchronously), its write after.
        runFork(liveness.hearsControl(false).pipe(
          Effect.catch((error) => Effect.logWarning("api key revocations: cannot record that this node stopped hearing them", error)),
          Effect.andThen(Effect.logWarning(`api key cache off until NATS is back (${why})`))
        ))
      },
      onReliable: () => {
        const state = ++channelState
        const current = () => state === channelState
        // Each try first checks that the subscription is still the one that asked: a retry
        // due after the channel was lost again must not record "hears" over "stopped".
        runFork(Effect.suspend(() => current() ? liveness.hearsControl(true) : Effect.interrupt).pipe(
          Effect.tapError((error) => Effect.logWarning("api key revocations: cannot record that this node hears them; retrying", error)),
          Effect.retry({ schedule: Schedule.spaced(hearsControlRetryMs), while: current }),
          Effect.andThen(Effect.sync(() => {
            if (!current()) return false
            context.revocationEpoch += 1
            const turnedOn = !context.cacheLive && context.cacheTtlMs > 0
            context.cacheLive = true
            return turnedOn
          })),
          Effect.flatMap((turnedOn) => turnedOn ? Effect.logInfo("api key cache on: revocations arrive over NATS") : Effect.void),
          Effect.ignore
        ))
      }
    })
  })

const hashOf = (context: ApiKeysContext, key: string) =>
  new Uint8Array(createHmac("sha256", context.pepper).update(key, "utf8").digest())
const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex")

const addUsage = (usage: Map<string, Usage>, keyId: string, requests: number, lastUsedAtMs: number) => {
  const entry = usage.get(keyId)
  if (entry === undefined) usage.set(keyId, { requests, lastUsedAtMs })
  else {
    entry.requests += requests
    entry.lastUsedAtMs = Math.max(entry.lastUsedAtMs, lastUsedAtMs)
  }
}

/**
 * One flush at a time: a flush asked for while another is writing waits for it, so
 * "flushed" means every count taken so far is in the table (a listing reads them next).
 */
const flushUsage = (context: ApiKeysContext) =>
  Effect.gen(function*() {
    if (context.usage.size === 0) return
    const batch = context.usage
    context.usage = new Map()
    // Every key used since the last flush in one statement, not one UPDATE per key.
    const entries = [...batch].map(([keyId, { lastUsedAtMs, requests }]) => ({
      keyId,
      requests,
      lastUsedAt: DateTime.formatIso(DateTime.makeUnsafe(lastUsedAtMs))
    }))
    yield* context.store.addUsage(entries).pipe(
      Effect.catch((error) =>
        // Put the counts back so the next flush retries them.
        Effect.sync(() => {
          for (const [keyId, { lastUsedAtMs, requests }] of batch) addUsage(context.usage, keyId, requests, lastUsedAtMs)
        }).pipe(Effect.andThen(Effect.logWarning("api key usage flush failed", error)))
      )
    )
  }).pipe((flush) => context.flushing.withPermit(flush), Effect.withSpan("ApiKeys.flushUsage"))

const verify = Effect.fn("ApiKeys.verify")(function*(
  context: ApiKeysContext,
  presented: string,
  options?: { readonly countUse?: boolean }
) {
  const counted = options?.countUse ?? true
  if (modeOfApiKey(presented) === undefined) return yield* Effect.fail(new InvalidApiKey("malformed"))
  const keyHash = hashOf(context, presented)
  const cacheKey = hex(keyHash)
  const nowMs = yield* Clock.currentTimeMillis
  const cached = context.cache.get(cacheKey)
  if (context.cacheLive && cached !== undefined && cached.expiresAtMs > nowMs && timingSafeEqual(cached.keyHash, keyHash)) {
    if (counted) addUsage(context.usage, cached.principal.keyId, 1, nowMs)
    return cached.principal
  }
  const epochBeforeRead = context.revocationEpoch
  const found = yield* context.store.findByHash(keyHash)
  if (Option.isNone(found) || !timingSafeEqual(found.value.key_hash, keyHash)) {
    return yield* Effect.fail(new InvalidApiKey("unknown"))
  }
  const row = found.value
  if (row.revoked) return yield* Effect.fail(new InvalidApiKey("revoked"))
  // Never cached: a reactivation then needs no eviction.
  if (row.suspended) return yield* Effect.fail(new SuspendedAccountKey(row.account_id))
  const principal: Principal = {
    keyId: row.key_id,
    accountId: row.account_id,
    accountType: row.account_type,
    ownerAccountId: row.owner_account_id,
    mode: row.mode
  }
  if (context.cacheTtlMs > 0 && context.cacheLive && epochBeforeRead === context.revocationEpoch) {
    context.cache.set(cacheKey, { principal, keyHash, expiresAtMs: nowMs + context.cacheTtlMs })
  }
  if (counted) addUsage(context.usage, principal.keyId, 1, nowMs)
  return principal
})

const issue = Effect.fn("ApiKeys.issue")(function*(context: ApiKeysContext, accountId: string, name: string, mode: Mode) {
  const nowMs = yield* Clock.currentTimeMillis
  const keyId = makeId("key", nowMs)
  const value = `hc_${mode}_${randomBytes(apiKeyRandomBytes).toString("base64url")}`
  yield* context.store.insert({
    keyId,
    accountId,
    name,
    mode,
    keyHash: hashOf(context, value),
    keyHint: value.slice(-4),
    createdAt: DateTime.formatIso(DateTime.makeUnsafe(nowMs))
  })
  return { keyId, name, mode, apiKey: Redacted.make(value) }
})

/**
 * Tells the other nodes, before answering: each live node answers once it has
 * evicted the key, so when this answers, every node that answered refuses it. One
 * that does not answer in time (cut from NATS, busy, just dead) is named; the
 * revocation still stands (it is committed), and that node's own loss of NATS, or
 * at worst its cache TTL, bounds how long it may still accept the key.
 */
const broadcastRevocation = (context: ApiKeysContext, control: Option.Option.Value<ApiKeysContext["control"]>, keyId: string) =>
  context.liveness.otherNodesHearingControl.pipe(
    // Without the list, still tell every node; just wait for none by name.
    Effect.catch((error) =>
      Effect.logWarning("api key revocation: cannot read the live nodes", error).pipe(Effect.as([]))
    ),
    Effect.flatMap((awaiting) =>
      control.broadcast(revocationTopic, keyId, { awaiting, waitMs: revocationBroadcastWaitMs })
    ),
    Effect.flatMap(({ unanswered }) =>
      unanswered.length === 0 ? Effect.void : Effect.logWarning(
        `api key revocation not acknowledged within ${revocationBroadcastWaitMs} ms by ${unanswered.join(", ")}`
      )
    ),
    Effect.catch((error) => Effect.logWarning("api key revocation not confirmed by NATS", error))
  )

const evictAccount = (context: ApiKeysContext, accountId: string) =>
  Effect.suspend(() => {
    evict(context, accountId)
    return Option.isSome(context.control) ? broadcastRevocation(context, context.control.value, accountId) : Effect.void
  }).pipe(Effect.withSpan("ApiKeys.evictAccount"))

const revoke = Effect.fn("ApiKeys.revoke")(function*(context: ApiKeysContext, keyId: string, holder?: KeyHolder) {
  const nowMs = yield* Clock.currentTimeMillis
  const revoked = yield* context.store.revoke(keyId, DateTime.formatIso(DateTime.makeUnsafe(nowMs)), holder)
  yield* announceRevocation(context, keyId, Option.isSome(revoked))
  return revoked
})

/**
 * After the revocation committed: evict before answering, so the very next request with the key
 * is refused (the epoch stops verifications that read the row before the update from caching it
 * afterwards), and tell the other nodes when it was an active key.
 */
const announceRevocation = (context: ApiKeysContext, keyId: string, wasActive: boolean) =>
  Effect.gen(function*() {
    evict(context, keyId)
    if (wasActive && Option.isSome(context.control)) {
      yield* broadcastRevocation(context, context.control.value, keyId)
    }
  })

const replace = Effect.fn("ApiKeys.replace")(function*(
  context: ApiKeysContext,
  keyId: string,
  holder: KeyHolder,
  name: string,
  alongside: (issued: IssuedApiKey) => Effect.Effect<void, SqlError.SqlError>
) {
  const nowMs = yield* Clock.currentTimeMillis
  const replaced = yield* context.sql.withTransaction(Effect.gen(function*() {
    const revoked = yield* context.store.revoke(keyId, DateTime.formatIso(DateTime.makeUnsafe(nowMs)), holder)
    if (Option.isNone(revoked)) return Option.none<IssuedApiKey>()
    const issued = yield* issue(context, holder.accountId, name, holder.mode)
    yield* alongside(issued)
    return Option.some(issued)
  }))
  // Only once committed: an eviction inside the transaction could be undone by a verification
  // reading the row before the commit and caching it under the new epoch.
  if (Option.isSome(replaced)) yield* announceRevocation(context, keyId, true)
  return replaced
})
