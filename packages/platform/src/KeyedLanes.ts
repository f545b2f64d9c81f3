/**
 * The per-key lane: the one way the server and the guardian make work of one key (an account, an
 * agent, a faucet grant, a prepared transfer) take turns, while different keys run in parallel.
 * Work of a key runs alone, in arrival order. A key's lane is dropped after a minute idle: the map
 * holds the keys active lately, not every key ever seen.
 *
 * Who uses it, and for what (docs/architecture.md, "Where each invariant is serialized"):
 * - the api server's sender lane (`packages/server/src/platform/Lanes.ts`): a sender's actor's
 *   turn of new transfers (D73), an owner's decision on a held transaction, a rejection and the
 *   expiry sweep; a faucet grant and the creates of one prepared transfer by their own ids;
 * - the guardian's account lane (`packages/guardian/src/internal/accountLane.ts`): the writers
 *   that run outside its group committer (reported credits, the expiry sweeper) change an
 *   account's books.
 *
 * Work must not wait for its own key's lane again (it would wait for itself). Lanes are per
 * process: across processes, what must be serialized is serialized where its state lives (the
 * guardian's group commit and row locks, the database, the contract's nonces).
 *
 * Why not Effect's cluster entities: one process needs no message storage on every transfer (and
 * cluster's SQL runner storage hangs PGlite's shutdown).
 *
 * @since 0.5.0
 */
import { Effect, RcMap, type Scope, Semaphore } from "effect"

/**
 * Turns per key.
 *
 * @since 0.5.0
 * @category models
 */
export interface KeyedLanes {
  /** Runs `effect` alone in `key`'s lane, after the work of the key that arrived before it. */
  readonly alone: <A, E, R>(key: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/** An idle key's lane is forgotten after this long (made again on next use). */
const laneIdleTimeToLive = "1 minute"

/**
 * Lanes for the scope's life.
 *
 * @since 0.5.0
 * @category constructors
 */
export const make: Effect.Effect<KeyedLanes, never, Scope.Scope> = Effect.gen(function*() {
  const lanes = yield* RcMap.make({
    lookup: (_key: string) => Semaphore.make(1),
    idleTimeToLive: laneIdleTimeToLive
  })
  return {
    // A semaphore's waiters are served in arrival order; only the wait can be interrupted.
    alone: (key, effect) => Effect.scoped(Effect.flatMap(RcMap.get(lanes, key), (lane) => lane.withPermit(effect)))
  } satisfies KeyedLanes
})
