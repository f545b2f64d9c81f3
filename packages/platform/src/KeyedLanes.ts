/**
 * The per-key lane: the one way the server and the guardian make work of one key (an account, an
 * agent, a faucet grant, a prepared transfer) take turns, while different keys run in parallel.
 *
 * - `alone` runs by itself in its key's lane: nothing else of the key runs beside it.
 * - `alongside` runs beside other `alongside` work of its key, `placesPerKey` at most in all,
 *   never beside `alone` work. With one place a key, `alongside` is `alone`.
 *
 * Work starts in arrival order, whichever kind: work that arrives after an `alone` waits behind it
 * even where a place beside the running work is free, so a stream of `alongside` work never starves
 * `alone` work. A key's lane is dropped after a minute idle: the map holds the keys active lately,
 * not every key ever seen.
 *
 * Who uses it, and for what (docs/architecture.md, "Where each invariant is serialized"):
 * - the api server's sender lane (`packages/server/src/platform/Lanes.ts`): a sender's (an
 *   agent's) new transfers `alongside`, up to `SENDER_CONCURRENCY`; an owner's decision on a held
 *   transaction, a rejection and the expiry sweep `alone`; a faucet grant and the creates of one
 *   prepared transfer `alone` by their own ids;
 * - the guardian's account lane (`packages/guardian/src/internal/accountLane.ts`): the writers
 *   that run outside its group committer (reported credits, the expiry sweeper) change an
 *   account's books `alone`.
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
  /** Runs `effect` beside other `alongside` work of `key` (up to `placesPerKey` in all), never beside `alone` work. */
  readonly alongside: <A, E, R>(key: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/** A key's lane: the gate keeps arrival order; the places are what runs. */
interface Lane {
  readonly gate: Semaphore.Semaphore
  readonly places: Semaphore.Semaphore
}

/** An idle key's lane is forgotten after this long (made again on next use). */
const laneIdleTimeToLive = "1 minute"

/**
 * Lanes with `placesPerKey` places a key for `alongside` work, for the scope's life.
 *
 * @since 0.5.0
 * @category constructors
 */
export const make = (placesPerKey: number): Effect.Effect<KeyedLanes, never, Scope.Scope> =>
  Effect.gen(function*() {
    if (!Number.isInteger(placesPerKey) || placesPerKey < 1) {
      return yield* Effect.die(new RangeError(`a lane has at least one place (got ${placesPerKey})`))
    }
    const lanes = yield* RcMap.make({
      lookup: (_key: string) =>
        Effect.all({ gate: Semaphore.make(1), places: Semaphore.make(placesPerKey) }) satisfies Effect.Effect<Lane>,
      idleTimeToLive: laneIdleTimeToLive
    })
    return {
      // Holds the gate until it ends: whatever arrives after it waits at the gate. Every place,
      // so it starts once the work beside which it may not run has ended.
      alone: (key, effect) =>
        Effect.scoped(Effect.flatMap(
          RcMap.get(lanes, key),
          (lane) => lane.gate.withPermit(lane.places.withPermits(placesPerKey)(effect))
        )),
      // Passes the gate in turn, takes one place and leaves the gate to the next arrival. The
      // place is the scope's (given back when the work ends, however it ends); only the waits
      // can be interrupted.
      alongside: (key, effect) =>
        Effect.scoped(Effect.gen(function*() {
          const lane = yield* RcMap.get(lanes, key)
          yield* lane.gate.withPermit(lane.places.takeScoped(1))
          return yield* effect
        }))
    } satisfies KeyedLanes
  })
