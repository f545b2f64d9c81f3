/**
 * The live stream's wake-ups (D58): tells each open stream of an account, on every node, that
 * the account has new events, so a stream reads them at once instead of at its next poll.
 *
 * A commit that recorded events announces their accounts here (Outbox, after the commit). The
 * node wakes its own streams of those accounts at once, and on PostgreSQL sends one `NOTIFY`
 * per burst of commits (the accounts' ids, no more) on a connection of its own; every node
 * `LISTEN`s on another and wakes its streams of the accounts named. A wake says only "look
 * now": what a stream hands out is still decided by its own read (the visibility watermark,
 * EventStore), so a lost or repeated wake changes when, never what. Streams also poll, which
 * covers a notification lost with a dropped connection or a crash between commit and notify.
 *
 * The notify is sent after the commit, outside the recording transaction: a `NOTIFY` inside
 * it would take PostgreSQL's notification lock at every commit that records events.
 *
 * @since 0.9.0
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, Layer, Option, Queue, type Redacted, type Scope } from "effect"
import { Reactivity } from "effect/reactivity"
import { AppConfig } from "../config/AppConfig.ts"
import { makeWakeup, type Wakeup } from "./Wakeup.ts"

/** The PostgreSQL channel the nodes announce on. */
export const eventFeedChannel = "pps_events"

/**
 * PostgreSQL refuses a payload of 8000 bytes or more; past this many bytes of account ids a
 * notification says "everyone" (`*`) instead, and every stream looks once.
 */
const notifyPayloadBytesMax = 7_000

/** After the listening connection fails, wait this long before connecting again. */
const relistenBackoffMs = 1_000

/** The wake-ups of this node's open streams, by account. */
interface Watchers {
  readonly byAccount: Map<string, Set<Wakeup>>
}

const wakeAccounts = (watchers: Watchers, accountIds: ReadonlyArray<string> | "all") => {
  if (accountIds === "all") {
    for (const set of watchers.byAccount.values()) for (const wakeup of set) wakeup.wakeUnsafe()
    return
  }
  for (const accountId of accountIds) {
    for (const wakeup of watchers.byAccount.get(accountId) ?? []) wakeup.wakeUnsafe()
  }
}

const watch = (watchers: Watchers, accountId: string) =>
  Effect.acquireRelease(
    Effect.map(makeWakeup, (wakeup) => {
      const set = watchers.byAccount.get(accountId) ?? new Set<Wakeup>()
      set.add(wakeup)
      watchers.byAccount.set(accountId, set)
      return wakeup
    }),
    (wakeup) =>
      Effect.sync(() => {
        const set = watchers.byAccount.get(accountId)
        set?.delete(wakeup)
        if (set?.size === 0) watchers.byAccount.delete(accountId)
      })
  )

/** The `NOTIFY` payload for a set of account ids: the ids, or `*` when they would not fit. */
export const notifyPayload = (accountIds: ReadonlySet<string>): string => {
  const joined = [...accountIds].join(",")
  return Buffer.byteLength(joined, "utf8") < notifyPayloadBytesMax ? joined : "*"
}

/** The accounts a received payload names. */
export const payloadAccounts = (payload: string): ReadonlyArray<string> | "all" =>
  payload === "*" ? "all" : payload.split(",").filter((id) => id.length > 0)

/** Sends the accounts announced since the last send, one `NOTIFY` per burst, for ever. */
const notifyLoop = (client: PgClient.PgClient, pending: Set<string>, signal: Wakeup) =>
  Effect.gen(function*() {
    yield* signal.wait(Duration.toMillis(Duration.hours(1)))
    if (pending.size === 0) return
    const payload = notifyPayload(pending)
    pending.clear()
    yield* client.notify(eventFeedChannel, payload).pipe(
      Effect.catch((error) => Effect.logWarning("event feed notify failed; other nodes' streams find the events at their next poll", error))
    )
  }).pipe(Effect.forever)

/**
 * One session of the feed's own connection (not the pool's): sends this node's announcements
 * and wakes this node's streams on the others'. Ends when the connection fails.
 */
const feedSession = (url: Redacted.Redacted<string>, watchers: Watchers, pending: Set<string>, signal: Wakeup) =>
  Effect.gen(function*() {
    const client = yield* PgClient.makeClient({ url, applicationName: "pps-server-event-feed", acquireForStream: true }).pipe(
      Effect.provide(Reactivity.layer)
    )
    yield* Effect.forkScoped(notifyLoop(client, pending, signal))
    const notifications = yield* client.listen(eventFeedChannel)
    // Announcements made while no connection listened were lost: every stream looks once.
    wakeAccounts(watchers, "all")
    for (;;) {
      const notification = yield* Queue.take(notifications)
      wakeAccounts(watchers, payloadAccounts(notification.payload))
    }
  }).pipe(Effect.scoped)

/** Sessions for ever: a failed one (database down, connection dropped) is logged and started again. */
const feedLoop = (url: Redacted.Redacted<string>, watchers: Watchers, pending: Set<string>, signal: Wakeup) =>
  feedSession(url, watchers, pending, signal).pipe(
    Effect.catch((error) => Effect.logWarning("event feed connection failed; streams poll until it is back", error)),
    Effect.andThen(Effect.sleep(relistenBackoffMs)),
    Effect.forever
  )

/**
 * @since 0.9.0
 * @category services
 */
export class EventFeed extends Context.Service<EventFeed, {
  /**
   * After a commit that recorded events for these accounts: wakes this node's streams of them
   * at once and (PostgreSQL) the other nodes' through one notification per burst.
   */
  readonly announce: (accountIds: ReadonlyArray<string>) => Effect.Effect<void>
  /** A wake-up for one stream of an account, for the life of the scope. */
  readonly watch: (accountId: string) => Effect.Effect<Wakeup, never, Scope.Scope>
}>()("server/events/EventFeed") {
  static readonly layer = Layer.effect(
    EventFeed,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const watchers: Watchers = { byAccount: new Map() }
      const pending = new Set<string>()
      const signal = yield* makeWakeup
      // In the background: a database not up yet delays wake-ups, not the start.
      if (Option.isSome(config.databaseUrl)) yield* Effect.forkScoped(feedLoop(config.databaseUrl.value, watchers, pending, signal))
      return EventFeed.of({
        announce: (accountIds) =>
          Effect.sync(() => {
            wakeAccounts(watchers, accountIds)
            if (Option.isNone(config.databaseUrl)) return
            for (const accountId of accountIds) pending.add(accountId)
            signal.wakeUnsafe()
          }),
        watch: (accountId) => watch(watchers, accountId)
      })
    })
  )
}
