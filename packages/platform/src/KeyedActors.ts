/**
 * Per-key actors (D73): each key's mail is handled in turns, one turn at a time per key, and a turn
 * takes all the mail that waited for it (up to `turnMax`), in arrival order. Different keys run in
 * parallel. The api server's sender actor is one (`packages/server/src/transfers/senderTurn.ts`):
 * a sender's transfers that arrive while its turn runs are decided together in its next turn, in
 * one ordered call to the guardian, so the actor serializes the sender's balance and policy
 * checks without deciding one transfer per round trip.
 *
 * - A turn runs in the actor's own fiber, not the sender's: a caller that stops waiting does not
 *   cut a turn under way (its mail is decided and recorded all the same). Mail whose caller left
 *   before its turn began is dropped unread.
 * - A turn answers each mail on its own (an `Exit` each): one mail's failure is not another's. A
 *   turn that dies answers every mail of it with that defect, and the actor goes on.
 * - An actor exists while it has mail: the map holds the keys with work, not every key seen.
 * - When the scope closes, the turn under way is interrupted at its next interruptible point and
 *   every caller still waiting is answered with an interruption.
 *
 * Work must not send to its own key's actor from inside a turn (it would wait for itself).
 * Actors are per process: across processes, what must be serialized is serialized where its state
 * lives (the guardian's group commit, the database, the contract's nonces).
 *
 * @since 0.11.0
 */
import { Cause, Deferred, Effect, Exit, type Scope } from "effect"

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

/** One item and the caller's answer. `left`: the caller stopped waiting before its turn. */
interface Mail<I, A, E> {
  readonly item: I
  readonly answer: Deferred.Deferred<A, E>
  left: boolean
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
    const scope = yield* Effect.scope
    // A key is here while its actor runs: mail waiting for its next turn.
    const mailboxes = new Map<string, Array<Mail<I, A, E>>>()
    const send = (key: string, item: I): Effect.Effect<A, E> =>
      Effect.suspend(() => {
        const mail: Mail<I, A, E> = { item, answer: Deferred.makeUnsafe<A, E>(), left: false }
        const mailbox = mailboxes.get(key)
        if (mailbox !== undefined) mailbox.push(mail)
        else mailboxes.set(key, [mail])
        const start = mailbox === undefined ? Effect.forkIn(run(mailboxes, key, turn, turnMax), scope) : Effect.void
        return start.pipe(
          Effect.andThen(Deferred.await(mail.answer)),
          Effect.onInterrupt(() => Effect.sync(() => { mail.left = true }))
        )
      })
    return { send } satisfies KeyedActors<I, A, E>
  })

/** A key's actor: turns until its mailbox is empty, then it is gone (the next mail starts another). */
const run = <I, A, E>(mailboxes: Map<string, Array<Mail<I, A, E>>>, key: string, turn: Turn<I, A, E>, turnMax: number) =>
  Effect.gen(function*() {
    while (true) {
      const mailbox = mailboxes.get(key)!
      // Read and emptied in one synchronous step: a send after it finds no mailbox and starts an actor.
      if (mailbox.length === 0) {
        mailboxes.delete(key)
        return
      }
      const taken = mailbox.splice(0, turnMax).filter((mail) => !mail.left)
      if (taken.length > 0) yield* takeTurn(key, taken, turn)
    }
  }).pipe(Effect.onInterrupt(() => Effect.sync(() => abandon(mailboxes, key))))

/** One turn over `taken`; each mail answered with its own exit (all with the defect if the turn died). */
const takeTurn = <I, A, E>(key: string, taken: ReadonlyArray<Mail<I, A, E>>, turn: Turn<I, A, E>) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(turn(key, taken.map((mail) => mail.item)))
    const answers: ReadonlyArray<Exit.Exit<A, E>> = Exit.isFailure(exit)
      ? taken.map(() => Exit.failCause(exit.cause as Cause.Cause<E>))
      : exit.value.length === taken.length
      ? exit.value
      : taken.map(() => Exit.die(new Error(`an actor's turn answered ${exit.value.length} of ${taken.length} items`)))
    taken.forEach((mail, index) => Deferred.doneUnsafe(mail.answer, answers[index]!))
  }).pipe(Effect.onInterrupt(() => Effect.sync(() => taken.forEach((mail) => Deferred.doneUnsafe(mail.answer, Exit.interrupt())))))

/** The scope closed: every caller still waiting on `key` is answered with an interruption. */
const abandon = <I, A, E>(mailboxes: Map<string, Array<Mail<I, A, E>>>, key: string) => {
  for (const mail of mailboxes.get(key) ?? []) Deferred.doneUnsafe(mail.answer, Exit.interrupt())
  mailboxes.delete(key)
}
