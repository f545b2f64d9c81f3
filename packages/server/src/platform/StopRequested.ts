/**
 * The process has been asked to stop: an effect that completes then, so work that never ends by
 * itself (an event stream) can end at once and let the listeners' drain finish (docs/operations.md,
 * "Stopping").
 *
 * @since 0.13.0
 */
import { Context, Deferred, Effect, Layer } from "effect"

/**
 * Completes when a stop is requested. By default never: a server built inside a test is stopped
 * by closing its scope, and no signal listener is registered for it (a listener on SIGTERM would
 * turn off Node's own exit in a test worker).
 *
 * @since 0.13.0
 * @category references
 */
export const StopRequested = Context.Reference<Effect.Effect<void>>("server/platform/StopRequested", {
  defaultValue: () => Effect.never
})

const stopSignals = ["SIGTERM", "SIGINT"] as const

/**
 * `StopRequested` completed by the process's SIGTERM or SIGINT, for `pnpm start` (main.ts). The
 * runtime's own listeners interrupt the main fiber on the same signal; these only say so early,
 * before the listeners close, and are removed when the layer closes.
 *
 * @since 0.13.0
 * @category layers
 */
export const StopRequestedFromSignals: Layer.Layer<never> = Layer.effect(
  StopRequested,
  Effect.gen(function*() {
    const requested = yield* Deferred.make<void>()
    const onSignal = () => {
      Deferred.doneUnsafe(requested, Effect.void)
    }
    yield* Effect.acquireRelease(
      Effect.sync(() => stopSignals.forEach((signal) => process.once(signal, onSignal))),
      () => Effect.sync(() => stopSignals.forEach((signal) => process.removeListener(signal, onSignal)))
    )
    return Deferred.await(requested)
  })
)
