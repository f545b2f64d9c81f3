/**
 * Per-key actors (D73): each key's mail is handled in turns, one turn at a time per key, and a turn
 * takes all the mail that waited for it (up to `turnMax`), in arrival order. Different keys run in
 * parallel. The api server's sender actor is one (`packages/server/src/transfers/senderTurn.ts`):
 * a sender's transfers that arrive while its turn runs are decided together in its next turn, in
 * one ordered call to the guardian, so the actor serializes the sender's balance and policy
 * checks without deciding one transfer per round trip.
 *
 * - A turn runs in the actor's own fiber, with the context `make` was called in (not a caller's):
 *   a turn that needs a caller's context provides it itself.
 * - A caller that stops waiting before its mail is taken is dropped unread. One that stops
 *   waiting once its mail is taken still waits (uninterruptibly) for the turn's answer: what the
 *   turn does for it has happened when the caller's own finalizers run.
 * - A turn answers each mail on its own (an `Exit` each): one mail's failure is not another's. A
 *   turn that dies answers every mail of it with that defect, and the actor goes on.
 * - An actor exists while it has mail: the map holds the keys with work, not every key seen. Its
 *   fiber ending in any way (a defect, an interruption) answers the mail left in its mailbox.
 * - When the scope closes, a turn under way ends as its effect allows (an uninterruptible turn
 *   finishes and answers), and every caller still waiting is answered with an interruption; a send
 *   after that is interrupted at once.
 *
 * Work must not send to its own key's actor from inside a turn (it would wait for itself).
 * Actors are per process: across processes, what must be serialized is serialized where its state
 * lives (the guardian's group commit, the database, the contract's nonces).
 *
 * @since 0.11.0
 */
import { type Context, Deferred, Effect, Exit, type Scope } from "effect"

/**
 * The actors of every key.
 *
 * @since 0.11.0
 * @category models
 */
export interface KeyedActors<I, A, E> {
  /** Leaves `item` in `key`'s mailbox and waits for the turn that handles it. */
  readonly send: (key: string, item: I) => Effect.Effect<A, E>
}

/**
 * What a turn does with its mail: one exit per item, in the same order.
 *
 * @since 0.11.0
 * @category models
 */
export type Turn<I, A, E> = (key: string, items: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<Exit.Exit<A, E>>>

/**
 * One item and the caller's answer. `taken`: a turn has it; `left`: the caller stopped waiting
 * before that.
 */
interface Mail<I, A, E> {
  readonly item: I
  readonly answer: Deferred.Deferred<A, E>
  taken: boolean
  left: boolean
}

/** The actors' shared state: each working key's mailbox, and whether the scope closed. */
interface Actors<I, A, E> {
  readonly mailboxes: Map<string, Array<Mail<I, A, E>>>
  readonly turn: Turn<I, A, E>
  readonly turnMax: number
  /** The context turns run in: `make`'s. */
  readonly base: Context.Context<never>
  readonly scope: Scope.Scope
  stopped: boolean
}

/**
 * Actors whose turns run `turn` on at most `turnMax` items, for the scope's life.
 *
 * @since 0.11.0
 * @category constructors
 */
export const make = <I, A, E>(turn: Turn<I, A, E>, turnMax: number): Effect.Effect<KeyedActors<I, A, E>, never, Scope.Scope> =>
  Effect.gen(function*() {
    if (!Number.isInteger(turnMax) || turnMax < 1) {
      return yield* Effect.die(new RangeError(`a turn takes at least one item (got ${turnMax})`))
    }
    const actors: Actors<I, A, E> = {
      mailboxes: new Map(),
      turn,
      turnMax,
      base: yield* Effect.context<never>(),
      scope: yield* Effect.scope,
      stopped: false
    }
    // Added before any actor's fiber: runs after their finalizers, when no turn is left running.
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        actors.stopped = true
        for (const [key, mailbox] of actors.mailboxes) abandon(actors, key, mailbox)
      })
    )
    return { send: (key, item) => send(actors, key, item) } satisfies KeyedActors<I, A, E>
  })

/**
 * Leaves the mail and, for a key without an actor, starts one, in one uninterruptible step (an
 * interruption between the two would leave a mailbox no actor reads); then waits.
 */
const send = <I, A, E>(actors: Actors<I, A, E>, key: string, item: I): Effect.Effect<A, E> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.suspend(() => {
      // A send after the scope closed is answered as one cut by it, instead of waiting for ever.
      if (actors.stopped) return Effect.interrupt
      const mail: Mail<I, A, E> = { item, answer: Deferred.makeUnsafe<A, E>(), taken: false, left: false }
      const mailbox = actors.mailboxes.get(key)
      if (mailbox !== undefined) mailbox.push(mail)
      else actors.mailboxes.set(key, [mail])
      return (mailbox === undefined ? start(actors, key) : Effect.void).pipe(
        Effect.andThen(restore(Deferred.await(mail.answer))),
        Effect.onInterrupt(() =>
          mail.taken ? Effect.ignore(Deferred.await(mail.answer)) : Effect.sync(() => {
            mail.left = true
          })
        )
      )
    })
  )

/** Starts `key`'s actor in the actors' scope and context; whatever ends it answers the mail it left. */
const start = <I, A, E>(actors: Actors<I, A, E>, key: string) => {
  const mailbox = actors.mailboxes.get(key)!
  return Effect.forkIn(Effect.updateContext(run(actors, key, mailbox), (_: Context.Context<never>) => actors.base), actors.scope).pipe(
    Effect.tap((fiber) => Effect.sync(() => fiber.addObserver(() => abandon(actors, key, mailbox))))
  )
}

/** A key's actor: turns until its mailbox is empty, then it is gone (the next mail starts another). */
const run = <I, A, E>(actors: Actors<I, A, E>, key: string, mailbox: Array<Mail<I, A, E>>) =>
  Effect.gen(function*() {
    while (yield* nextTurn(actors, key, mailbox)) {
      // One turn at a time, until the mailbox is empty.
    }
  })

/**
 * Takes the mail waiting and runs its turn, in one uninterruptible step (the turn itself as
 * interruptible as it is): mail is never taken without its turn answering it. False once the
 * mailbox is empty: read and emptied in one synchronous step, so a send after it finds no mailbox
 * and starts an actor.
 */
const nextTurn = <I, A, E>(actors: Actors<I, A, E>, key: string, mailbox: Array<Mail<I, A, E>>) =>
  Effect.uninterruptibleMask((restore) =>
    Effect.suspend(() => {
      if (mailbox.length === 0) {
        actors.mailboxes.delete(key)
        return Effect.succeed(false)
      }
      const taken = mailbox.splice(0, actors.turnMax).filter((mail) => !mail.left)
      for (const mail of taken) mail.taken = true
      if (taken.length === 0) return Effect.succeed(true)
      return Effect.as(takeTurn(restore, key, taken, actors.turn), true)
    })
  )

/**
 * One turn over `taken`, as interruptible as the turn itself (`restore`); the answers are delivered
 * once it ended (all with its defect or interruption if it did not answer).
 */
const takeTurn = <I, A, E>(
  restore: <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>,
  key: string,
  taken: ReadonlyArray<Mail<I, A, E>>,
  turn: Turn<I, A, E>
) =>
  Effect.map(Effect.exit(restore(turn(key, taken.map((mail) => mail.item)))), (exit) => {
    const answers: ReadonlyArray<Exit.Exit<A, E>> = Exit.isFailure(exit)
      ? taken.map(() => Exit.failCause(exit.cause))
      : exit.value.length === taken.length
      ? exit.value
      : taken.map(() => Exit.die(new Error(`an actor's turn answered ${exit.value.length} of ${taken.length} items`)))
    taken.forEach((mail, index) => Deferred.doneUnsafe(mail.answer, answers[index]!))
  })

/**
 * `key`'s actor ended (or the scope closed): the mail left in its mailbox is answered with an
 * interruption, and the mailbox forgotten unless another actor of the key owns the key now.
 */
const abandon = <I, A, E>(actors: Actors<I, A, E>, key: string, mailbox: Array<Mail<I, A, E>>) => {
  for (const mail of mailbox.splice(0)) Deferred.doneUnsafe(mail.answer, Exit.interrupt())
  if (actors.mailboxes.get(key) === mailbox) actors.mailboxes.delete(key)
}
