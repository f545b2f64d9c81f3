/**
 * Turns per key: the per-account (and per-agent) actor of a node, and one-at-a-time
 * work by id (a faucet grant, a prepared transfer's creates).
 *
 * - `withKey` runs alone for its key: no other work of the key runs beside it.
 * - `alongside` runs beside other `alongside` work of its key, `placesPerKey` at most in
 *   all (`SENDER_CONCURRENCY`, default 8), never beside `withKey` work.
 *
 * Work starts in arrival order, whichever kind: work that arrives after a `withKey` waits
 * behind it even where a place beside the running work is free, so a stream of `alongside`
 * work never starves `withKey` work. Different keys run in parallel. A key's turns are
 * dropped after a minute idle.
 *
 * What a sender's new transfers need from it, and why `alongside`: every
 * balance-sensitive decision is taken where its state lives, one at a time, whatever the
 * node's actor does: the guardian decides a sender's amounts under the sender's balance
 * lock (in its group commit, each decision seeing the ones before it), the database hands
 * out each replay nonce once, and the contract refuses a reused nonce. On several api
 * nodes a sender's transfers already reach the guardian from several actors at once. So a
 * sender's new transfers go to the guardian several at a time, starting in the order they
 * arrived; with one in flight at a time a busy sender's rate was one guardian round trip
 * plus one record per transfer: ~45 confirmed transfers a second for one sender on two
 * cores, ~75 with eight (docs/benchmarks.md, "A busy sender"). What must not
 * interleave with them runs alone: an owner's decision on a held transaction (D27), which
 * reads and changes the held row, and the agent's expiry sweep.
 *
 * Work must not wait for its own key's turn again (it would wait for itself). A prepared
 * transfer's create takes its id's turn first and its sender's inside it; nothing takes
 * them the other way round.
 *
 * Why not cluster entities: the same reason, and without cluster's SQL message storage on
 * every transfer (and its PGlite shutdown hang, notes/effect4.md).
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, RcMap, Semaphore } from "effect"
import { AppConfig } from "../config/AppConfig.ts"

/** A key's turns: the gate keeps arrival order; the places are what runs. */
interface Turns {
  readonly gate: Semaphore.Semaphore
  readonly places: Semaphore.Semaphore
}

/**
 * @since 0.1.0
 * @category services
 */
export class KeyedSerializer extends Context.Service<KeyedSerializer, {
  /** Runs `effect` alone for `key`, after the work of the key that arrived before it. */
  readonly withKey: <A, E, R>(key: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Runs `effect` beside other `alongside` work of `key` (up to `placesPerKey` in all), never beside `withKey` work. */
  readonly alongside: <A, E, R>(key: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}>()("server/platform/KeyedSerializer") {
  /** Turns with `placesPerKey` places a key for `alongside` work (at least 1). */
  static readonly make = (placesPerKey: number) =>
    Effect.gen(function*() {
      const turns = yield* RcMap.make({
        lookup: (_key: string) =>
          Effect.all({ gate: Semaphore.make(1), places: Semaphore.make(placesPerKey) }) satisfies Effect.Effect<Turns>,
        idleTimeToLive: "1 minute"
      })
      return KeyedSerializer.of({
        // Holds the gate until it ends: whatever arrives after it waits at the gate. Every place,
        // so it starts once the work beside which it may not run has ended.
        withKey: (key, effect) =>
          Effect.scoped(Effect.flatMap(
            RcMap.get(turns, key),
            (turn) => turn.gate.withPermit(turn.places.withPermits(placesPerKey)(effect))
          )),
        // Passes the gate in turn, takes one place and leaves the gate to the next arrival. The
        // place is the scope's (given back when the work ends, however it ends); only the waits
        // can be interrupted.
        alongside: (key, effect) =>
          Effect.scoped(Effect.gen(function*() {
            const turn = yield* RcMap.get(turns, key)
            yield* turn.gate.withPermit(turn.places.takeScoped(1))
            return yield* effect
          }))
      })
    })

  /** `SENDER_CONCURRENCY` places a key. */
  static readonly layer = Layer.effect(
    KeyedSerializer,
    Effect.gen(function*() {
      const config = yield* AppConfig
      return yield* KeyedSerializer.make(config.senderConcurrency)
    })
  )
}
