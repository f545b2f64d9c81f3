/**
 * A wake-up signal for a polling worker: `wake` never blocks and coalesces
 * (many wakes before the worker looks count once); `wait` returns at the first
 * wake (true) or after the poll interval (false), whichever comes first.
 *
 * Workers poll as well as listen because a wake can be lost (a commit on
 * another node, a crash between commit and wake); the signal only shortens the
 * wait. The wait runs on Effect's Clock, so TestClock drives it in tests.
 *
 * @since 0.1.0
 */
import { Effect, Option, Queue } from "effect"

/**
 * @since 0.1.0
 * @category models
 */
export interface Wakeup {
  readonly wake: Effect.Effect<void>
  /** Synchronous form, for callbacks outside Effect. */
  readonly wakeUnsafe: () => void
  /** Whether a wake ended the wait (true) or the poll interval did (false). */
  readonly wait: (pollMs: number) => Effect.Effect<boolean>
  /**
   * Drops a pending wake: for a worker about to read everything a wake it has not yet taken
   * could stand for (the wake follows the commit it announces, so that read sees the commit).
   */
  readonly discard: Effect.Effect<void>
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const makeWakeup: Effect.Effect<Wakeup> = Effect.gen(function*() {
  // Capacity 1 with sliding: a burst of wakes leaves one pending signal.
  const signal = yield* Queue.sliding<true>(1)
  const wakeUnsafe = () => {
    Queue.offerUnsafe(signal, true)
  }
  return {
    wake: Effect.sync(wakeUnsafe),
    wakeUnsafe,
    wait: (pollMs) => Queue.take(signal).pipe(Effect.timeoutOption(pollMs), Effect.map(Option.isSome)),
    discard: Queue.poll(signal).pipe(Effect.asVoid)
  }
})
