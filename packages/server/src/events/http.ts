/**
 * `GET /v1/events/stream` (ext): the account's events as server-sent events, for clients
 * that cannot receive webhooks (a laptop: `pps listen`).
 *
 * The stream reads the events table (the outbox, written in the same SQL transaction as
 * what the event reports), so any api node serves it and it survives restarts: a client
 * that reconnects with `Last-Event-ID` gets every event after that one, once. Events are
 * read in id order a settle window after they are recorded: ids are time-ordered ULIDs
 * from several nodes and transactions, and an event committed late with a smaller id than
 * one already streamed would otherwise be skipped. The window bounds that reordering
 * (commit delay and clock skew between nodes); docs/api.md says so.
 *
 * A stream holds resources a request does not (a socket, SQL polls twice a second), so it
 * is bounded: a few per key and a thousand per node (the one over is 429 `rate_limited`
 * with `Retry-After`), an hour at most (then it ends and the client resumes), a heartbeat
 * comment every 15 s (a dead peer's socket errors on a write instead of lingering idle),
 * and its credentials are checked again every 2 s, so a revoked key's stream ends as
 * its next request would be refused (SPEC Authentication 5).
 *
 * @since 0.3.0
 */
import { Clock, DateTime, Duration, Effect, Option, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import type { Principal } from "@pps/api/ApiKeys"
import { CurrentPrincipal, PublicApi } from "@pps/api/Api"
import { InvalidRequest, NotAgentOwner } from "@pps/api/Errors"
import { AppConfig } from "../config/AppConfig.ts"
import { rateLimitedResponse, RequestAuthentication } from "../http/Authorization.ts"
import { makeId } from "../platform/Ids.ts"
import { database } from "../platform/Unavailable.ts"
import { EventStore } from "./EventStore.ts"

/** How long after it is recorded an event is streamed (see above). */
export const streamSettleMs = 2_000
const pollEveryMs = 500
const pageSize = 100
/**
 * Heartbeat comments: an idle stream still writes, so a peer that vanished without a FIN
 * is found by the failing write (and proxies do not close a quiet connection).
 */
const keepAliveEvery = Duration.seconds(15)

/**
 * Streams one API key may hold open on a node: `pps listen` needs one, the rest covers a
 * reconnection overlapping its old connection and a second terminal. Each stream polls SQL
 * twice a second, so without a cap one key could open hundreds within D7's rate limit and
 * take the database pool from every tenant.
 *
 * @since 0.5.0
 * @category constants
 */
export const streamsPerKeyMax = 5

/**
 * Streams one node serves at once: bounds the polling (two SQL reads a second each) and the
 * sockets a node holds whatever the number of keys; past it, clients go to another node.
 *
 * @since 0.5.0
 * @category constants
 */
export const streamsPerNodeMax = 1_000

/**
 * How often an open stream checks its credentials again: a revoked key (or an ended
 * dashboard session) stops its stream within this, not at its next reconnection. Cheap: the
 * same verification as a request's, from the key cache in the embedded mode.
 *
 * @since 0.5.0
 * @category constants
 */
export const streamReauthorizeEveryMs = 2_000

/**
 * `Retry-After` of a refused stream: streams end when their clients leave, at no time the
 * server can predict; a few seconds lets a reconnection's old connection close first.
 *
 * @since 0.5.0
 * @category constants
 */
export const streamRefusedRetryAfterSeconds = 5

/**
 * Counts open streams per key and per node. Plain in-memory counts: a stream lives on one
 * node, and the caps protect that node's database pool.
 *
 * @since 0.5.0
 * @category constructors
 */
export const makeStreamSlots = (limits: { readonly perKey: number; readonly perNode: number }) => {
  const perKey = new Map<string, number>()
  let total = 0
  return {
    /** Takes a slot for the key, or says which cap is reached. */
    take: (keyId: string): "taken" | "key_full" | "node_full" => {
      const held = perKey.get(keyId) ?? 0
      if (held >= limits.perKey) return "key_full"
      if (total >= limits.perNode) return "node_full"
      perKey.set(keyId, held + 1)
      total += 1
      return "taken"
    },
    release: (keyId: string): void => {
      const held = perKey.get(keyId) ?? 0
      if (held <= 1) perKey.delete(keyId)
      else perKey.set(keyId, held - 1)
      total = Math.max(0, total - 1)
    },
    open: (): number => total
  }
}

const eventIdPattern = /^evt_[0-9A-HJKMNP-TV-Z]{26}$/

/** The smallest event id of an instant: every event recorded at or after it sorts above. */
const cursorAt = (timeMs: number): string => `${makeId("evt", timeMs).slice(0, 14)}${"0".repeat(16)}`

const iso = (ms: number) => DateTime.formatIso(DateTime.makeUnsafe(ms))

// Built once: a page's store failure is typed here, then logged and retried at the next poll.
const storeUnavailable = database("EventsHttp.listAfter")

/**
 * The account's events after `start`, a page at a time, polling when none is settled yet. A
 * database that does not answer mid-stream is logged and tried again at the next poll: the
 * response has begun, and the client keeps its stream.
 */
const eventPages = (store: EventStore["Service"], principal: Principal, start: string) =>
  Stream.paginate(start, (cursor: string) =>
    Effect.gen(function*() {
      const nowMs = yield* Clock.currentTimeMillis
      const rows = yield* store.listAfter({
        accountId: principal.accountId,
        mode: principal.mode,
        afterEventId: cursor,
        createdBefore: iso(nowMs - streamSettleMs),
        limit: pageSize
      }).pipe(
        storeUnavailable,
        Effect.catch((error) => Effect.logWarning("event stream page failed; polling again", error).pipe(Effect.as([])))
      )
      const last = rows.at(-1)
      if (last === undefined) {
        yield* Effect.sleep(Duration.millis(pollEveryMs))
        return [[], Option.some(cursor)] as const
      }
      // The payload is one line of JSON: one `data:` line.
      return [rows.map((event) => `id: ${event.eventId}\nevent: ${event.type}\ndata: ${event.payload}\n\n`), Option.some(last.eventId)] as const
    }))

/**
 * What ends a stream: its lifetime, or its credentials no longer valid (a failed check ends it
 * too: a client resumes, and its next request is checked afresh).
 */
const streamEnd = (stillAuthorized: Effect.Effect<boolean, unknown>, lifetimeMs: number) => {
  const revoked = Effect.gen(function*() {
    for (;;) {
      yield* Effect.sleep(Duration.millis(streamReauthorizeEveryMs))
      const valid = yield* stillAuthorized.pipe(
        Effect.catch((error) => Effect.logWarning("event stream credential check failed", error).pipe(Effect.as(false)))
      )
      if (!valid) return "the credentials are no longer valid" as const
    }
  })
  return Effect.raceFirst(
    Effect.sleep(Duration.millis(lifetimeMs)).pipe(
      Effect.as("the stream reached its maximum lifetime; resume with Last-Event-ID" as const)
    ),
    revoked
  ).pipe(Effect.tap((reason) => Effect.logInfo("event stream ended by the server").pipe(Effect.annotateLogs({ reason }))))
}

/** The stream's cursor from `Last-Event-ID` or `after`; undefined when neither is given. */
const resumeCursor = (request: HttpServerRequest.HttpServerRequest, after: string | undefined) => {
  const resumeFrom = request.headers["last-event-id"] ?? after
  if (resumeFrom !== undefined && !eventIdPattern.test(resumeFrom)) {
    return Effect.fail(InvalidRequest.of(
      "`Last-Event-ID` (or `after`) must be an event id (evt_...).",
      { param: request.headers["last-event-id"] === undefined ? "after" : "Last-Event-ID" }
    ))
  }
  return Effect.succeed(resumeFrom)
}

/** The 429 of a stream over its key's or its node's cap. */
const refusedStream = (slot: "key_full" | "node_full") =>
  Effect.logInfo("event stream refused").pipe(
    Effect.annotateLogs({ reason: slot }),
    Effect.as(rateLimitedResponse(
      streamRefusedRetryAfterSeconds,
      slot === "key_full"
        ? `This API key already has ${streamsPerKeyMax} event streams open on this node; close one, or retry after the number of seconds in Retry-After.`
        : "This node serves as many event streams as it can; retry after the number of seconds in Retry-After."
    ))
  )

/** The streaming response: the opening block, then events, heartbeats and the closing comment. */
const streamResponse = (
  principal: Principal,
  resumeFrom: string | undefined,
  start: string,
  events: Stream.Stream<string>,
  end: Effect.Effect<string>
) => {
  const keepAlive = Stream.tick(keepAliveEvery).pipe(Stream.map(() => ": keep-alive\n\n"))
  const ending = Stream.fromEffect(end).pipe(Stream.map((reason) => `: closed: ${reason}\n\n`))
  // Without a cursor the stream's first block is its starting cursor (`id:` alone
  // dispatches no event but sets the client's last event id), so a client whose first
  // connection drops before any event resumes from when it opened, not from its retry.
  const opening = Stream.make(
    `: streaming ${principal.mode} events${resumeFrom === undefined ? " from now" : ` after ${resumeFrom}`}\n` +
      (resumeFrom === undefined ? `id: ${start}\n\n` : "\n")
  )
  return HttpServerResponse.stream(
    Stream.concat(opening, Stream.merge(Stream.merge(events, keepAlive), ending, { haltStrategy: "right" })).pipe(Stream.encodeText),
    {
      contentType: "text/event-stream",
      headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
    }
  )
}

/**
 * @since 0.3.0
 * @category layers
 */
export const EventsHttpLive = HttpApiBuilder.group(PublicApi, "events", (handlers) =>
  Effect.gen(function*() {
    const store = yield* EventStore
    const authentication = yield* RequestAuthentication
    const { eventStreamMaxLifetimeMs } = yield* AppConfig
    const slots = makeStreamSlots({ perKey: streamsPerKeyMax, perNode: streamsPerNodeMax })
    return handlers.handle("stream", ({ query }) =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        if (principal.ownerAccountId !== null) {
          return yield* Effect.fail(NotAgentOwner.of("An agent's events go to its owner's stream (D30)."))
        }
        const resumeFrom = yield* resumeCursor(yield* HttpServerRequest.HttpServerRequest, query.after)
        // Held for the request's scope, which closes when the response stream ends or the
        // client goes away (the server interrupts the request on a closed socket).
        const slot = yield* Effect.acquireRelease(
          Effect.sync(() => slots.take(principal.keyId)),
          (taken) => taken === "taken" ? Effect.sync(() => slots.release(principal.keyId)) : Effect.void
        )
        if (slot !== "taken") return yield* refusedStream(slot)
        const stillAuthorized = yield* authentication.recheck(principal)
        // Without a cursor, from now: an event recorded before the request is not this stream's.
        const start = resumeFrom ?? cursorAt(yield* Clock.currentTimeMillis)
        const events = eventPages(store, principal, start)
        return streamResponse(principal, resumeFrom, start, events, streamEnd(stillAuthorized, eventStreamMaxLifetimeMs))
      }))
  }))
