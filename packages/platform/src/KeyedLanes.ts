/**
 * The per-key lane: the one way the server and the guardian make work of one key (an account, an
 * agent, a faucet grant, a prepared transfer) take turns, while different keys run in parallel.
 *
 * - `alone` runs by itself in its key's lane: nothing else of the key runs beside it.
 * - `turns` makes an actor's turns (D63): the items queued for a key while it is busy are drained,
 *   in arrival order, into one turn (up to `maxItems`), which runs alone in the key's lane and
 *   answers each item with its own outcome. The card's per-account actor: a sender's transfers
 *   are decided one turn at a time, and a turn's transfers in one ordered call.
 *
 * Work starts in arrival order, whichever kind: an item that arrives after `alone` work joins no
 * turn queued before that work (the turn then closes), so nothing overtakes `alone` work and a
 * stream of items never starves it. A key's lane is dropped after a minute idle: the map holds the
 * keys active lately, not every key ever seen.
 *
 * A turn runs on a fiber of its own (the lanes' scope's), not its first caller's: a caller that
 * hangs up while its turn waits leaves the turn (its item is not run); once its turn has started
 * it waits for its outcome without interruption, as the work of a started turn runs to its end.
 *
 * Who uses it, and for what (docs/architecture.md, "Where each invariant is serialized"):
 * - the api server's sender lane (`packages/server/src/platform/Lanes.ts`): a sender's (an
 *   agent's) new transfers in turns (`transfers/turn.ts`); an owner's decision on a held
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
import { Deferred, Effect, Exit, RcMap, Scope, Semaphore } from "effect"

/**
 * Turns per key.
 *
 * @since 0.5.0
 * @category models
 */
export interface KeyedLanes {
  /** Runs `effect` alone in `key`'s lane, after the work of the key that arrived before it. */
  readonly alone: <A, E, R>(key: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /**
   * An actor's turns: `submit(key, item)` queues `item` for `key`'s next turn and answers its
   * outcome. A turn is `run(key, items)` over the items queued (arrival order, at most
   * `maxItems`), alone in the key's lane; it answers one outcome per item, in their order.
   */
  readonly turns: <I, A, E>(
    run: (key: string, items: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<Exit.Exit<A, E>>>,
    maxItems: number
  ) => (key: string, item: I) => Effect.Effect<A, E>
}

/** An idle key's lane is forgotten after this long (made again on next use). */
const laneIdleTimeToLive = "1 minute"

/** One caller's item in a turn. */
interface Entry<I, A, E> {
  readonly item: I
  readonly done: Deferred.Deferred<A, E>
  /** Its caller hung up before the turn started: not run. */
  withdrawn: boolean
}

/** A turn being filled: it takes items until it starts, is full, or `alone` work arrives. */
interface Turn<I, A, E> {
  readonly owner: unknown
  readonly entries: Array<Entry<I, A, E>>
  readonly started: Deferred.Deferred<void>
  running: boolean
}

/**
 * Lanes for the scope's life.
 *
 * @since 0.5.0
 * @category constructors
 */
export const make: Effect.Effect<KeyedLanes, never, Scope.Scope> = Effect.gen(function*() {
  const scope = yield* Effect.scope
  const lanes = yield* RcMap.make({ lookup: (_key: string) => Semaphore.make(1), idleTimeToLive: laneIdleTimeToLive })
  /** The turn of each key still taking items (at most one a key, of whichever `turns` made it). */
  const filling = new Map<string, { readonly owner: unknown }>()
  const alone = <A, E, R>(key: string, effect: Effect.Effect<A, E, R>) =>
    Effect.scoped(Effect.flatMap(RcMap.get(lanes, key), (gate) => gate.withPermit(effect)))
  const turns = <I, A, E>(
    run: (key: string, items: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<Exit.Exit<A, E>>>,
    maxItems: number
  ) => {
    const owner = {}
    const runTurn = (key: string, turn: Turn<I, A, E>) =>
      Effect.suspend(() => {
        if (filling.get(key) === turn) filling.delete(key)
        turn.running = true
        Deferred.doneUnsafe(turn.started, Exit.void)
        const entries = turn.entries.filter((entry) => !entry.withdrawn)
        if (entries.length === 0) return Effect.void
        return Effect.map(Effect.exit(run(key, entries.map((entry) => entry.item))), (exit) => {
          entries.forEach((entry, index) =>
            Deferred.doneUnsafe(entry.done, Exit.isSuccess(exit) ? exit.value[index]! : Exit.failCause(exit.cause)))
        })
      })
    /** Waits for the turn to start (leaving it if the caller hangs up first), then for the item's outcome. */
    const outcome = (turn: Turn<I, A, E>, entry: Entry<I, A, E>) =>
      Effect.uninterruptibleMask((restore) =>
        restore(Deferred.await(turn.started)).pipe(
          Effect.onInterrupt(() =>
            Effect.sync(() => {
              if (!turn.running) entry.withdrawn = true
            })
          ),
          Effect.catchCause((cause) => (turn.running && !entry.withdrawn ? Effect.void : Effect.failCause(cause))),
          Effect.andThen(Deferred.await(entry.done))
        )
      )
    return (key: string, item: I): Effect.Effect<A, E> =>
      Effect.suspend(() => {
        const open = filling.get(key)
        const entry: Entry<I, A, E> = { item, done: Deferred.makeUnsafe<A, E>(), withdrawn: false }
        if (open !== undefined && open.owner === owner) {
          const turn = open as Turn<I, A, E>
          turn.entries.push(entry)
          if (turn.entries.length >= maxItems) filling.delete(key)
          return outcome(turn, entry)
        }
        const turn: Turn<I, A, E> = { owner, entries: [entry], started: Deferred.makeUnsafe<void>(), running: false }
        if (maxItems > 1) filling.set(key, turn)
        return Effect.forkIn(alone(key, runTurn(key, turn)).pipe(Effect.onExit(() => endTurn(turn))), scope).pipe(
          Effect.andThen(outcome(turn, entry))
        )
      })
  }
  return {
    // Whatever is still filling for the key closes: items after this work form a turn after it.
    alone: (key, effect) =>
      Effect.suspend(() => {
        filling.delete(key)
        return alone(key, effect)
      }),
    turns
  } satisfies KeyedLanes
})

/** Answers whatever a turn that ended (or never ran: the lanes' scope closed) left unanswered. */
const endTurn = <I, A, E>(turn: Turn<I, A, E>) =>
  Effect.sync(() => {
    Deferred.doneUnsafe(turn.started, Exit.void)
    for (const entry of turn.entries) Deferred.doneUnsafe(entry.done, Exit.interrupt())
  })
