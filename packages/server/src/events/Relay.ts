/**
 * The outbox relay: publishes committed, unpublished events to the bus, then
 * marks them published.
 *
 * It runs when a commit on this node wakes it, `EVENT_RELAY_LINGER_MS` later (D87: a
 * round costs the same statements for one event as for hundreds, the read, the mark, the
 * fan-out's read of subscriptions, and at a low rate every commit would otherwise make its
 * own), and every `EVENT_RELAY_POLL_MS` besides (a wake may be lost: another node's commit,
 * a crash). A crash between publish
 * and mark republishes on restart; the bus drops or the consumer ignores the
 * repeat (JetStream dedup by event id, idempotent fan-out).
 *
 * On several nodes (PostgreSQL) one relay publishes at a time: a round runs in
 * a transaction that first takes a transaction-level advisory lock without
 * waiting; a relay that does not get it skips the round (the holder publishes
 * those rows), so two workers do not publish every row twice and the stream
 * keeps the outbox's order. The lock goes with the transaction, so a relay that
 * dies mid-publish frees it at once and the next round republishes what it had
 * not marked (the stream drops what it had already taken).
 *
 * @since 0.1.0
 */
import { Clock, Context, DateTime, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { AppConfig, runsWorkers } from "../config/AppConfig.ts"
import { database, type DependencyUnavailable } from "../platform/Unavailable.ts"
import { EventBus, type EventBusError } from "./EventBus.ts"
import { EventStore } from "./EventStore.ts"
import { Outbox } from "./Outbox.ts"

/** Events published per round trip; a full batch is followed at once by the next. */
const publishBatchMax = 500
/** After a failed round (bus or database down), wait this long before the next. */
const failureBackoffMs = 1_000
/** The PostgreSQL advisory lock one relay holds while it publishes (deploy.ts uses 46_630_001). */
const relayLockKey = 46_630_002

/** What the relay's steps run over, built once by the layer. */
interface RelayContext {
  readonly config: AppConfig["Service"]
  readonly store: EventStore["Service"]
  readonly outbox: Outbox["Service"]
  readonly bus: EventBus["Service"]
  readonly sql: SqlClient.SqlClient
}

/** Publishes the oldest unpublished events, then marks them published. */
const publishRound = ({ bus, store }: RelayContext) =>
  Effect.gen(function*() {
    const events = yield* store.unpublished(publishBatchMax)
    if (events.length === 0) return 0
    yield* bus.publish(events)
    const nowMs = yield* Clock.currentTimeMillis
    yield* store.markPublished(events.map((event) => event.event_id), DateTime.formatIso(DateTime.makeUnsafe(nowMs)))
    return events.length
  })

/** One round, under the advisory lock when several nodes share the outbox (PostgreSQL). */
const runOnce = (context: RelayContext) => {
  const { config, sql } = context
  const round = publishRound(context)
  return (Option.isNone(config.databaseUrl)
    ? round
    : sql.withTransaction(Effect.gen(function*() {
      const [lock] = yield* sql<{ readonly held: boolean }>`SELECT pg_try_advisory_xact_lock(${relayLockKey}) AS held`
      return lock?.held === true ? yield* round : 0
    }))).pipe(database("Relay.runOnce"), Effect.withSpan("Relay.runOnce"))
}

/** Rounds for ever: a failed round (bus or database down) is logged and retried after a back-off. */
const relayLoop = ({ config, outbox }: RelayContext, round: Effect.Effect<number, unknown>): Effect.Effect<never> =>
  Effect.gen(function*() {
    const published = yield* round.pipe(
      Effect.catchCause((cause) =>
        Effect.logWarning("event relay round failed", cause).pipe(
          Effect.andThen(Effect.sleep(failureBackoffMs)),
          Effect.as(0)
        )
      )
    )
    if (published < publishBatchMax) {
      const woken = yield* outbox.committed.wait(config.eventRelayPollMs)
      // D87: the commits of the next few milliseconds join this round instead of each making one.
      // A poll that found nothing gains nothing by waiting longer.
      if (woken && config.eventRelayLingerMs > 0) {
        yield* Effect.sleep(config.eventRelayLingerMs)
        // The wakes of those commits: the read below sees them, so they must not start a round of their own.
        yield* outbox.committed.discard
      }
    }
  }).pipe(Effect.forever)

/**
 * @since 0.1.0
 * @category services
 */
export class Relay extends Context.Service<Relay, {
  /** Publishes what is pending now; returns how many events it published. */
  readonly runOnce: Effect.Effect<number, DependencyUnavailable | EventBusError>
}>()("server/events/Relay") {
  static readonly layer = Layer.effect(
    Relay,
    Effect.gen(function*() {
      const context: RelayContext = {
        config: yield* AppConfig,
        store: yield* EventStore,
        outbox: yield* Outbox,
        bus: yield* EventBus,
        sql: yield* SqlClient.SqlClient
      }
      const round = runOnce(context)
      // An api-only node leaves publishing to the workers (they poll the shared outbox).
      if (runsWorkers(context.config)) yield* Effect.forkScoped(relayLoop(context, round))
      return Relay.of({ runOnce: round })
    })
  )
}
