/**
 * The server's per-key lanes (`@pps/platform/KeyedLanes`, the module the guardian's account lane
 * is built on too), as a service: the sender's lane (the card's per-account and per-agent actor),
 * and one-at-a-time work by id (a faucet grant, a prepared transfer's creates).
 *
 * - A sender's (an agent's) new transfers run `alongside` each other, up to `SENDER_CONCURRENCY`
 *   (default 8): the nonce, the guardian's decision and the record. Every balance-sensitive
 *   decision is still taken one at a time where its state lives: the guardian decides a sender's
 *   amounts under its balance lock (its group commit runs them in sequence, each seeing those
 *   before it), the database hands out each replay nonce once, and the contract refuses a reused
 *   nonce; on several api nodes a sender's transfers already reach the guardian from several lanes.
 * - What must not interleave with them runs `alone`: an owner's decision on a held transaction
 *   (D27), which reads and changes the held row, a rejection, and the agent's expiry sweep.
 *
 * A prepared transfer's create takes its id's lane first and its sender's inside it; nothing takes
 * them the other way round (work must not wait for its own key's lane again).
 *
 * @since 0.5.0
 */
import * as KeyedLanes from "@pps/platform/KeyedLanes"
import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../config/AppConfig.ts"

/**
 * @since 0.5.0
 * @category services
 */
export class Lanes extends Context.Service<Lanes, KeyedLanes.KeyedLanes>()("server/platform/Lanes") {
  /** `SENDER_CONCURRENCY` places a key. */
  static readonly layer = Layer.effect(
    Lanes,
    Effect.gen(function*() {
      const config = yield* AppConfig
      return yield* KeyedLanes.make(config.senderConcurrency)
    })
  )
}
