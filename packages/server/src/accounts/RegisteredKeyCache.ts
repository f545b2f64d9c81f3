/**
 * The registered encryption keys an api node remembers (EncryptionKeys.keyOfAccount), and how a
 * key replaced by a rotation (D55) is forgotten on every node, not only the one that rotated.
 *
 * A registered key changes only by a rotation, so every transfer need not read its parties' keys
 * again (two statements fewer per transfer). The node that records a rotation forgets the key
 * at once and tells the others on the event bus's control channel (events/ControlChannel.ts, the
 * channel API-key revocations and D60's suspensions use), waiting, bounded, until every other live
 * node that hears the channel has forgotten it; so when the rotation answers, those nodes seal
 * their next transfer to the new key. Core NATS delivers only to nodes connected now: a node
 * caches only while its subscription is registered, and forgets everything when it may have
 * missed a message. An eviction, here or heard, also stops a read that started before it from
 * remembering what it read (the epoch). Embedded mode is one process: nothing to tell.
 *
 * @since 0.13.0
 */
import { Effect, Option, type Scope } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { EventBus } from "../events/EventBus.ts"
import { NodeLiveness } from "../platform/NodeLiveness.ts"

/** The control channel's topic: the payload is the cache key (`mode:account_id`), nothing secret. */
const replacedTopic = "encryption_key_replaced"

/** How long a rotation waits for the other nodes' answers (the revocation's bound, for the same reason). */
const replacedBroadcastWaitMs = 2_000

/** Keys remembered at most; emptied when full (a key is read again at the next transfer). */
const registeredMax = 50_000

/**
 * @since 0.13.0
 * @category models
 */
export interface RegisteredKeyCache {
  /**
   * The remembered key of `cacheKey`, or `read`'s answer, remembered unless caching is off or an
   * eviction (here or heard from another node) happened while it read.
   */
  readonly readThrough: <E>(
    cacheKey: string,
    read: Effect.Effect<Option.Option<Uint8Array>, E>
  ) => Effect.Effect<Option.Option<Uint8Array>, E>
  /** Forgets the key on this node, then on every other live node (waits for their answers, bounded). */
  readonly forgetEverywhere: (cacheKey: string) => Effect.Effect<void>
}

/** The cache's state, shared by reads, evictions and the channel's callbacks. */
interface CacheState {
  readonly keys: Map<string, Uint8Array>
  /** Bumped by every eviction and every change of the channel's state. */
  epoch: number
  /** Off in distributed mode until the subscription is registered, and whenever it may have missed a message. */
  live: boolean
}

const evict = (state: CacheState, cacheKey: string) => {
  state.epoch += 1
  state.keys.delete(cacheKey)
}

const readThrough = <E>(state: CacheState, cacheKey: string, read: Effect.Effect<Option.Option<Uint8Array>, E>) =>
  Effect.suspend(() => {
    const known = state.live ? state.keys.get(cacheKey) : undefined
    if (known !== undefined) return Effect.succeed(Option.some(known))
    const epoch = state.epoch
    return Effect.tap(read, (key) =>
      Effect.sync(() => {
        if (Option.isNone(key) || !state.live || state.epoch !== epoch) return
        if (state.keys.size >= registeredMax) state.keys.clear()
        state.keys.set(cacheKey, key.value)
      }))
  })

/** Every node on the control channel subscribes, so that a rotating node's wait for it is answered. */
const subscribeReplacements = (state: CacheState, control: Option.Option.Value<EventBus["Service"]["control"]>, nodeId: string) =>
  Effect.gen(function*() {
    const runFork = Effect.runForkWith(yield* Effect.context<never>())
    yield* control.subscribe(replacedTopic, nodeId, {
      onMessage: (cacheKey) => evict(state, cacheKey),
      onUnreliable: (why) => {
        state.epoch += 1
        state.live = false
        state.keys.clear()
        runFork(Effect.logWarning(`encryption key cache off until NATS is back (${why})`))
      },
      onReliable: () => {
        state.epoch += 1
        const turnedOn = !state.live
        state.live = true
        if (turnedOn) runFork(Effect.logInfo("encryption key cache on: replacements arrive over NATS"))
      }
    })
  })

/**
 * The cache for the scope's life: in distributed mode subscribed to the control channel, and off
 * altogether without one (no node could tell this one of a rotation).
 *
 * @since 0.13.0
 * @category constructors
 */
export const make: Effect.Effect<RegisteredKeyCache, never, AppConfig | EventBus | NodeLiveness | Scope.Scope> = Effect.gen(function*() {
  const distributed = Option.isSome((yield* AppConfig).databaseUrl)
  const control = (yield* EventBus).control
  const liveness = yield* NodeLiveness
  const state: CacheState = { keys: new Map(), epoch: 0, live: !distributed }
  if (Option.isSome(control)) yield* subscribeReplacements(state, control.value, liveness.nodeId)
  const tellOthers = (cacheKey: string) =>
    Option.isNone(control) ? Effect.void : liveness.otherNodesHearingControl.pipe(
      // Without the list, still tell every node; just wait for none by name.
      Effect.catch((error) => Effect.logWarning("encryption key replaced: cannot read the live nodes", error).pipe(Effect.as([]))),
      Effect.flatMap((awaiting) => control.value.broadcast(replacedTopic, cacheKey, { awaiting, waitMs: replacedBroadcastWaitMs })),
      Effect.flatMap(({ unanswered }) =>
        unanswered.length === 0 ? Effect.void : Effect.logWarning(
          `encryption key replacement not acknowledged within ${replacedBroadcastWaitMs} ms by ${unanswered.join(", ")}`
        )
      ),
      Effect.catch((error) => Effect.logWarning("encryption key replacement not confirmed by NATS", error))
    )
  return {
    readThrough: (cacheKey, read) => readThrough(state, cacheKey, read),
    forgetEverywhere: (cacheKey) =>
      Effect.sync(() => evict(state, cacheKey)).pipe(Effect.andThen(tellOthers(cacheKey)), Effect.withSpan("RegisteredKeyCache.forgetEverywhere"))
  }
})
