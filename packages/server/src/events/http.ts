/**
 * `GET /v1/events/stream` (ext): the account's events as server-sent events, for clients
 * that cannot receive webhooks (a laptop: `pps listen`).
 *
 * The stream reads the events table (the outbox, written in the same SQL transaction as
 * what the event reports), so any api node serves it and it survives restarts: a client
 * that reconnects with `Last-Event-ID` gets every event after that one, once. D58: events
 * are read in their position order (recording transaction, then sequence) up to the
 * visibility watermark (the snapshot's xmin), so an event that commits late on another node
 * is never skipped and none waits for a settle window; a commit anywhere wakes the account's
 * streams at once (EventFeed), and each stream also polls.
 *
 * A stream holds resources a request does not (a socket, a SQL poll twice a second), so it
 * is bounded: a few per key and a thousand per node (the one over is 429 `rate_limited`
 * with `Retry-After`), an hour at most (then it ends and the client resumes), a heartbeat
 * comment every 15 s (a dead peer's socket errors on a write instead of lingering idle),
 * and its credentials are checked again every 2 s, so a revoked key's stream ends as
 * its next request would be refused (SPEC Authentication 5). A stream also ends as soon as the
 * process is asked to stop (StopRequested), saying so, so the listeners' drain does not wait
 * `SHUTDOWN_TIMEOUT_MS` for a stream that would never finish and the client resumes against
 * the next server with `Last-Event-ID`.
 *
 * @since 0.3.0
 */
import { Duration, Effect, Option, Schema, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import type { Principal } from "@pps/api/ApiKeys"
import { CurrentPrincipal, PublicApi } from "@pps/api/Api"
import { EventNotFound, InvalidRequest, NotAgentOwner } from "@pps/api/Errors"
import { EventPayload, type EventRecord, type StoredEvent } from "@pps/api/Events"
import { pageLimitDefault } from "@pps/api/Page"
import { parseEventTypes } from "@pps/api/Webhooks"
import { AppConfig } from "../config/AppConfig.ts"
import { rateLimitedResponse, RequestAuthentication } from "../http/Authorization.ts"
import * as Invariant from "../platform/Invariant.ts"
import { StopRequested } from "../platform/StopRequested.ts"
import { answerServiceUnavailable, database } from "../platform/Unavailable.ts"
import { EventFeed } from "./EventFeed.ts"
import { type EventPosition, EventStore } from "./EventStore.ts"
import type { Wakeup } from "./Wakeup.ts"

/**
 * A stream with nothing new reads again this often even without a wake-up: the wake-ups are
 * a shortcut (a notification can be lost with a connection), the poll the guarantee.
 */
const pollEveryMs = 500
/**
 * When rows wait behind a transaction still open (D58), the stream reads again after this,
 * doubling up to `pollEveryMs`: that transaction may record no event and so wake nobody.
 */
const heldBackFirstWaitMs = 10
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
const positionPattern = /^pos_([0-9]{1,20})_([0-9]{1,20})$/

/** A position as a stream cursor (the `id:` of the opening block, D58). */
export const positionCursor = (position: EventPosition): string => `pos_${position.txId}_${position.seq}`

// Built once: a page's store failure is typed here, then logged and retried at the next poll.
const storeUnavailable = database("EventsHttp.listAfterPosition")

/** Where the stream is, and how long to wait when the next read finds nothing. */
interface PageState {
  readonly after: EventPosition
  readonly heldBackWaitMs: number
}

/**
 * The account's events after `start`, a page at a time, waiting for a wake-up (or the poll)
 * when none is visible yet. A database that does not answer mid-stream is logged and tried
 * again at the next poll: the response has begun, and the client keeps its stream.
 */
const eventPages = (
  store: EventStore["Service"],
  principal: Principal,
  types: ReadonlyArray<string>,
  wakeup: Wakeup,
  start: EventPosition
) =>
  Stream.paginate({ after: start, heldBackWaitMs: heldBackFirstWaitMs } as PageState, (state: PageState) =>
    Effect.gen(function*() {
      const page = yield* store.listAfterPosition({
        accountId: principal.accountId,
        mode: principal.mode,
        after: state.after,
        types,
        limit: pageSize
      }).pipe(
        storeUnavailable,
        Effect.catch((error) => Effect.logWarning("event stream page failed; polling again", error).pipe(Effect.as({ events: [], heldBack: false })))
      )
      const last = page.events.at(-1)
      if (last === undefined) {
        yield* wakeup.wait(page.heldBack ? state.heldBackWaitMs : pollEveryMs)
        const heldBackWaitMs = page.heldBack ? Math.min(state.heldBackWaitMs * 2, pollEveryMs) : heldBackFirstWaitMs
        return [[], Option.some({ after: state.after, heldBackWaitMs })] as const
      }
      // The payload is one line of JSON: one `data:` line.
      return [
        page.events.map((event) => `id: ${event.eventId}\nevent: ${event.type}\ndata: ${event.payload}\n\n`),
        Option.some({ after: last.position, heldBackWaitMs: heldBackFirstWaitMs })
      ] as const
    }))

/**
 * What ends a stream: its lifetime, its credentials no longer valid (a failed check ends it
 * too: a client resumes, and its next request is checked afresh), or the process stopping (a
 * stream opened while it stops ends at once, like the open ones).
 */
const streamEnd = (stillAuthorized: Effect.Effect<boolean, unknown>, lifetimeMs: number, stopRequested: Effect.Effect<void>) => {
  const revoked = Effect.gen(function*() {
    for (;;) {
      yield* Effect.sleep(Duration.millis(streamReauthorizeEveryMs))
      const valid = yield* stillAuthorized.pipe(
        Effect.catch((error) => Effect.logWarning("event stream credential check failed", error).pipe(Effect.as(false)))
      )
      if (!valid) return "the credentials are no longer valid" as const
    }
  })
  return Effect.raceAllFirst([
    Effect.sleep(Duration.millis(lifetimeMs)).pipe(
      Effect.as("the stream reached its maximum lifetime; resume with Last-Event-ID" as const)
    ),
    revoked,
    stopRequested.pipe(Effect.as("the server is stopping; resume with Last-Event-ID" as const))
  ]).pipe(Effect.tap((reason) => Effect.logInfo("event stream ended by the server").pipe(Effect.annotateLogs({ reason }))))
}

/** The stream's cursor from `Last-Event-ID` or `after`; undefined when neither is given. */
const resumeCursor = (request: HttpServerRequest.HttpServerRequest, after: string | undefined) => {
  const resumeFrom = request.headers["last-event-id"] ?? after
  if (resumeFrom !== undefined && !eventIdPattern.test(resumeFrom) && !positionPattern.test(resumeFrom)) {
    return Effect.fail(InvalidRequest.of(
      "`Last-Event-ID` (or `after`) must be an event id (evt_...) or a stream cursor (pos_...).",
      { param: request.headers["last-event-id"] === undefined ? "after" : "Last-Event-ID" }
    ))
  }
  return Effect.succeed(resumeFrom)
}

/** The `types` (or `type`) filter: known event types, comma-separated; empty for all. */
const typesFilter = (types: string | undefined, param = "types") => {
  if (types === undefined || types.trim() === "") return Effect.succeed<ReadonlyArray<string>>([])
  const parsed = parseEventTypes(types.split(",").map((name) => name.trim()))
  return parsed._tag === "Ok"
    ? Effect.succeed(parsed.types)
    : Effect.fail(InvalidRequest.of(parsed.message.replace("The body field 'events", `The query parameter '${param}`), { param }))
}

/**
 * Where a stream starts (D58): after the named event; after a cursor; or, for an event this
 * account no longer has (past retention) or never had, just before the earliest of its events
 * with a larger id (none of those is missed); without any, from the watermark now.
 */
const startPosition = (store: EventStore["Service"], principal: Principal, resumeFrom: string | undefined) =>
  Effect.gen(function*() {
    const cursor = resumeFrom === undefined ? null : positionPattern.exec(resumeFrom)
    if (cursor !== null) return { txId: cursor[1]!, seq: cursor[2]! }
    if (resumeFrom !== undefined) {
      const named = yield* store.positionOf(resumeFrom, principal.accountId, principal.mode)
      if (Option.isSome(named)) return named.value
      const next = yield* store.firstPositionAfterId(resumeFrom, principal.accountId, principal.mode)
      if (Option.isSome(next)) return { txId: next.value.txId, seq: String(BigInt(next.value.seq) - 1n) }
    }
    return yield* store.visibleFrom
  }).pipe(database("EventsHttp.startPosition"))

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
  start: EventPosition,
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
      (resumeFrom === undefined ? `id: ${positionCursor(start)}\n\n` : "\n")
  )
  return HttpServerResponse.stream(
    Stream.concat(opening, Stream.merge(Stream.merge(events, keepAlive), ending, { haltStrategy: "right" })).pipe(Stream.encodeText),
    {
      contentType: "text/event-stream",
      headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
    }
  )
}

/** The caller, an account key: an agent's events go to its owner (D30). */
const ownerPrincipal = Effect.gen(function*() {
  const principal = yield* CurrentPrincipal
  if (principal.ownerAccountId !== null) {
    return yield* Effect.fail(NotAgentOwner.of("An agent's events go to its owner's stream and list (D30)."))
  }
  return principal
})

const decodePayload = Schema.decodeUnknownEffect(Schema.fromJsonString(EventPayload))
// Payloads are written through these schemas (Outbox): one that does not decode is a defect.
const payloadDecodes = Invariant.orDie("a stored event's payload decodes with the schema it was encoded with")

/** D59: a stored event in Stripe's shape, its payload under `data.object`. */
const toEventRecord = (event: StoredEvent) =>
  payloadDecodes(decodePayload(event.payload)).pipe(Effect.map((payload): EventRecord => ({
    id: event.eventId,
    object: "event",
    type: event.type,
    created_at: event.createdAt,
    livemode: event.mode === "live",
    data: { object: payload }
  })))

/** `GET /v1/events` (D59). */
const listEvents = (
  store: EventStore["Service"],
  query: { readonly limit?: number; readonly offset?: number; readonly type?: string }
) =>
  Effect.gen(function*() {
    const principal = yield* ownerPrincipal
    const types = yield* typesFilter(query.type, "type")
    const limit = query.limit ?? pageLimitDefault
    const offset = query.offset ?? 0
    const page = yield* store.listPage({ accountId: principal.accountId, mode: principal.mode, types, limit, offset }).pipe(
      database("EventsHttp.list")
    )
    return { data: yield* Effect.forEach(page.events, toEventRecord), limit, offset, has_more: page.hasMore }
  })

/** `GET /v1/events/{id}` (D59): 404 `event_not_found` for another account's, another mode's or a deleted one. */
const getEvent = (store: EventStore["Service"], eventId: string) =>
  Effect.gen(function*() {
    const principal = yield* ownerPrincipal
    const found = yield* store.findForAccount(eventId, principal.accountId, principal.mode).pipe(database("EventsHttp.get"))
    if (Option.isNone(found)) return yield* Effect.fail(EventNotFound.of(eventId))
    return yield* toEventRecord(found.value)
  })

/**
 * @since 0.3.0
 * @category layers
 */
export const EventsHttpLive = HttpApiBuilder.group(PublicApi, "events", (handlers) =>
  Effect.gen(function*() {
    const store = yield* EventStore
    const feed = yield* EventFeed
    const authentication = yield* RequestAuthentication
    const { eventStreamMaxLifetimeMs } = yield* AppConfig
    const stopRequested = yield* StopRequested
    const slots = makeStreamSlots({ perKey: streamsPerKeyMax, perNode: streamsPerNodeMax })
    return handlers
      .handle("list", ({ query }) => listEvents(store, query).pipe(answerServiceUnavailable))
      .handle("get", ({ params }) => getEvent(store, params.event_id).pipe(answerServiceUnavailable))
      .handle("stream", ({ query }) =>
      Effect.gen(function*() {
        const principal = yield* ownerPrincipal
        const resumeFrom = yield* resumeCursor(yield* HttpServerRequest.HttpServerRequest, query.after)
        const types = yield* typesFilter(query.types)
        // Held for the request's scope, which closes when the response stream ends or the
        // client goes away (the server interrupts the request on a closed socket).
        const slot = yield* Effect.acquireRelease(
          Effect.sync(() => slots.take(principal.keyId)),
          (taken) => taken === "taken" ? Effect.sync(() => slots.release(principal.keyId)) : Effect.void
        )
        if (slot !== "taken") return yield* refusedStream(slot)
        const stillAuthorized = yield* authentication.recheck(principal)
        // Watched before the start is read: a commit in between wakes the first read.
        const wakeup = yield* feed.watch(principal.accountId)
        // Without a cursor, from now: an event committed before the request is not this stream's.
        const start = yield* startPosition(store, principal, resumeFrom)
        const events = eventPages(store, principal, types, wakeup, start)
        return streamResponse(principal, resumeFrom, start, events, streamEnd(stillAuthorized, eventStreamMaxLifetimeMs, stopRequested))
      }).pipe(answerServiceUnavailable))
  }))
