/**
 * The server's per-key lanes (`@pps/platform/KeyedLanes`, the module the guardian's account lane
 * is built on too), as a service: the sender's lane (the card's per-account and per-agent actor),
 * and one-at-a-time work by id (a faucet grant, a prepared transfer's creates).
 *
 * - A sender's (an agent's) new transfers are decided in its actor's turns (D63,
 *   `transfers/turn.ts`): the transfers that arrive while a turn runs are drained, in arrival
 *   order, into the next one, which asks the guardian about all of them in one ordered call and
 *   records them together. Balance and policy checks are serialized by the actor and still
 *   batched; the guardian decides a turn's transfers in its order, each seeing the reservations
 *   of those before it.
 * - What must not interleave with them runs `alone`: an owner's decision on a held transaction
 *   (D27), which reads and changes the held row, a rejection, and the agent's expiry sweep.
 *
 * A prepared transfer's create takes its id's lane first and its sender's inside it; nothing takes
 * them the other way round (work must not wait for its own key's lane again).
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
  static readonly layer = Layer.effect(Lanes, KeyedLanes.make)
}
