/**
 * The server's per-key lanes (`@pps/platform/KeyedLanes`, the module the guardian's account lane
 * is built on too), as a service: one piece of work at a time per key, in arrival order.
 *
 * - The sender's lane: a sender's (an agent's) turn of new transfers (`transfers/senderTurn.ts`,
 *   the sender's actor, D73), an owner's decision on a held transaction (D27), a rejection and the
 *   agent's expiry sweep each run alone in it, so none interleaves with another.
 * - One-at-a-time work by id: a faucet grant, and the creates of one prepared transfer
 *   (`prepared:<id>`).
 *
 * A prepared transfer's create takes its id's lane first and its sender's inside it (in the
 * sender's turn); nothing takes them the other way round (work must not wait for its own key's
 * lane again).
 *
 * @since 0.5.0
 */
import * as KeyedLanes from "@pps/platform/KeyedLanes"
import { Context, Layer } from "effect"

/**
 * @since 0.5.0
 * @category services
 */
export class Lanes extends Context.Service<Lanes, KeyedLanes.KeyedLanes>()("server/platform/Lanes") {
  /** One place a key: everything of a key runs alone. */
  static readonly layer = Layer.effect(Lanes, KeyedLanes.make)
}
