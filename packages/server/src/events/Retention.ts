/**
 * The retention sweep (D35): events older than `EVENT_RETENTION_DAYS` (at
 * least 30) are deleted with their deliveries and attempt logs, once an hour.
 * An event a pending delivery still needs is kept until the delivery ends.
 *
 * @since 0.1.0
 */
import { Clock, DateTime, Effect, Layer } from "effect"
import { AppConfig, runsWorkers } from "../config/AppConfig.ts"
import { database } from "../platform/Unavailable.ts"
import { EventStore } from "./EventStore.ts"

/** How often the sweep runs. */
const sweepEveryMs = 60 * 60_000
const dayMs = 24 * 60 * 60_000

/**
 * Deletes what is past retention now; returns how many events went. A database that does not
 * answer fails it typed; the sweep loop logs that and tries again at its next run.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sweepEvents = Effect.gen(function*() {
  const config = yield* AppConfig
  const store = yield* EventStore
  const nowMs = yield* Clock.currentTimeMillis
  return yield* store.deleteOlderThan(DateTime.formatIso(DateTime.makeUnsafe(nowMs - config.eventRetentionDays * dayMs)))
}).pipe(database("Retention.sweepEvents"), Effect.withSpan("Retention.sweepEvents"))

/**
 * @since 0.1.0
 * @category layers
 */
export const RetentionLive = Layer.effectDiscard(
  Effect.gen(function*() {
    const context = yield* Effect.context<AppConfig | EventStore>()
    if (!runsWorkers(yield* AppConfig)) return
    yield* sweepEvents.pipe(
      Effect.provideContext(context),
      Effect.catchCause((cause) => Effect.logWarning("event retention sweep failed", cause)),
      Effect.andThen(Effect.sleep(sweepEveryMs)),
      Effect.forever,
      Effect.forkScoped
    )
  })
)
