/**
 * One-at-a-time execution per key: the per-account (and per-agent) actor of a
 * node. Work for one key runs in arrival order, never two at once; different keys
 * run in parallel. A key's mailbox is dropped after a minute idle.
 *
 * Why this and not cluster entities: every decision that must be serialized
 * across nodes is already serialized where its state lives — the guardian's
 * per-account lock and row lock decide balances and limits, the database hands
 * out each replay nonce once, and the contract refuses a reused nonce. The
 * per-node actor adds the ordering a single client sees (its transfers are
 * authorized in the order it sent them) without cluster's SQL message storage on
 * every transfer (and without its PGlite shutdown hang, notes/effect4.md).
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, RcMap, Semaphore } from "effect"

/**
 * @since 0.1.0
 * @category services
 */
export class KeyedSerializer extends Context.Service<KeyedSerializer, {
  readonly withKey: <A, E, R>(key: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}>()("server/platform/KeyedSerializer") {
  static readonly layer = Layer.effect(
    KeyedSerializer,
    Effect.gen(function*() {
      const locks = yield* RcMap.make({ lookup: (_key: string) => Semaphore.make(1), idleTimeToLive: "1 minute" })
      return KeyedSerializer.of({
        withKey: (key, effect) =>
          Effect.scoped(Effect.flatMap(RcMap.get(locks, key), (semaphore) => semaphore.withPermit(effect)))
      })
    })
  )
}
