/**
 * The guardian's account lane: the per-key lane (`@pps/platform/KeyedLanes`, the same module as
 * the api server's sender lane) with one place an account, so the writers that run outside the
 * group committer (reported credits, the expiry sweeper) change an account's books one at a time
 * in this process. The group committer serializes decisions, settlements and the chain follower's
 * bookings by itself; across guardian processes on one PostgreSQL database the balance row's
 * `SELECT … FOR UPDATE` does (docs/architecture.md, "Where each invariant is serialized").
 *
 * @since 0.5.0
 */
import * as KeyedLanes from "@pps/platform/KeyedLanes"
import { Effect, type Scope } from "effect"
import type { AccountRef } from "./store.ts"

/**
 * Runs effects one at a time per account.
 *
 * @since 0.5.0
 * @category models
 */
export interface AccountLane {
  /** Runs `effect` alone in `account`'s lane, after what arrived before it. */
  readonly alone: <A, E, R>(account: AccountRef, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/**
 * The account lanes for the scope's life.
 *
 * @since 0.5.0
 * @category constructors
 */
export const make: Effect.Effect<AccountLane, never, Scope.Scope> = Effect.map(
  KeyedLanes.make,
  (lanes): AccountLane => ({
    alone: (account, effect) => lanes.alone(`${account.chainId}/${account.contract}/${account.account}`, effect)
  })
)
