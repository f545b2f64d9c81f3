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
 * @since 0.3.0
 */
import { Duration, Effect, Option, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { CurrentPrincipal, PublicApi } from "@pps/api/Api"
import { InvalidRequest, NotAgentOwner } from "@pps/api/Errors"
import { makeId } from "../platform/Ids.ts"
import { EventStore } from "./EventStore.ts"

/** How long after it is recorded an event is streamed (see above). */
export const streamSettleMs = 2_000
const pollEveryMs = 500
const pageSize = 100
const keepAliveEvery = Duration.seconds(15)

const eventIdPattern = /^evt_[0-9A-HJKMNP-TV-Z]{26}$/

/** The smallest event id of an instant: every event recorded at or after it sorts above. */
const cursorAt = (timeMs: number): string => `${makeId("evt", timeMs).slice(0, 14)}${"0".repeat(16)}`

const iso = (ms: number) => new Date(ms).toISOString()

/**
 * @since 0.3.0
 * @category layers
 */
export const EventsHttpLive = HttpApiBuilder.group(PublicApi, "events", (handlers) =>
  Effect.gen(function*() {
    const store = yield* EventStore
    return handlers.handle("stream", ({ query }) =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        if (principal.ownerAccountId !== null) {
          return yield* Effect.fail(NotAgentOwner.of("An agent's events go to its owner's stream (D30)."))
        }
        const request = yield* HttpServerRequest.HttpServerRequest
        const resumeFrom = request.headers["last-event-id"] ?? query.after
        if (resumeFrom !== undefined && !eventIdPattern.test(resumeFrom)) {
          return yield* Effect.fail(InvalidRequest.of(
            "`Last-Event-ID` (or `after`) must be an event id (evt_...).",
            { param: request.headers["last-event-id"] === undefined ? "after" : "Last-Event-ID" }
          ))
        }
        // Without a cursor, from now: an event recorded before the request is not this stream's.
        const start = resumeFrom ?? cursorAt(Date.now())
        const events = Stream.paginate(start, (cursor: string) =>
          Effect.gen(function*() {
            const rows = yield* store.listAfter({
              accountId: principal.accountId,
              mode: principal.mode,
              afterEventId: cursor,
              createdBefore: iso(Date.now() - streamSettleMs),
              limit: pageSize
            }).pipe(Effect.orDie)
            const last = rows.at(-1)
            if (last === undefined) {
              yield* Effect.sleep(Duration.millis(pollEveryMs))
              return [[], Option.some(cursor)] as const
            }
            // The payload is one line of JSON: one `data:` line.
            return [rows.map((event) => `id: ${event.eventId}\nevent: ${event.type}\ndata: ${event.payload}\n\n`), Option.some(last.eventId)] as const
          }))
        const keepAlive = Stream.tick(keepAliveEvery).pipe(Stream.map(() => ": keep-alive\n\n"))
        const opening = Stream.make(`: streaming ${principal.mode} events${resumeFrom === undefined ? " from now" : ` after ${resumeFrom}`}\n\n`)
        return HttpServerResponse.stream(
          Stream.concat(opening, Stream.merge(events, keepAlive)).pipe(Stream.encodeText),
          {
            contentType: "text/event-stream",
            headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
          }
        )
      }))
  }))
