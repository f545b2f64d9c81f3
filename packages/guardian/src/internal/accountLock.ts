/**
 * The guardian's per-account lock: one semaphore of one permit per account, so the writers that
 * run outside the group committer (reported credits, the expiry sweeper) change an account's
 * books one at a time in this process. The group committer serializes decisions, settlements
 * and the chain follower's bookings by itself; across guardian processes on one PostgreSQL
 * database the balance row's `SELECT … FOR UPDATE` does.
 *
 * It lives here, alone, so that one change can replace it with the per-key lane the server
 * shares (the server's `KeyedSerializer`): nothing else in the guardian knows how it is built.
 * An `RcMap` keeps a semaphore while it is in use and a minute after, then forgets it: the map
 * holds the accounts active lately, not every account ever seen.
 *
 * @since 0.5.0
 */
import { Effect, RcMap, type Scope, Semaphore } from "effect"
import type { AccountRef } from "./store.ts"

/**
 * Runs effects one at a time per account.
 *
 * @since 0.5.0
 * @category models
 */
export interface AccountLock {
  /** Runs `effect` once no other effect holds `account`'s lock, holding it meanwhile. */
  readonly withLock: <A, E, R>(account: AccountRef, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/** An idle account's semaphore is forgotten after this long (it is made again on next use). */
const idleTimeToLive = "1 minute"

/**
 * The lock for the scope's life.
 *
 * @since 0.5.0
 * @category constructors
 */
export const make: Effect.Effect<AccountLock, never, Scope.Scope> = Effect.map(
  RcMap.make({ lookup: (_key: string) => Semaphore.make(1), idleTimeToLive }),
  (locks): AccountLock => ({
    withLock: (account, effect) =>
      Effect.scoped(
        Effect.flatMap(
          RcMap.get(locks, `${account.chainId}/${account.contract}/${account.account}`),
          (semaphore) => Semaphore.withPermit(semaphore, effect)
        )
      )
  })
)
