/**
 * The live event stream (`GET /v1/events/stream`, ext) over a real socket on embedded
 * PGlite: the account's events arrive as server-sent events with the webhook payloads,
 * in id order; a client that reconnects with `Last-Event-ID` gets exactly the events after
 * it; the stream is mode-scoped; agent keys and malformed cursors are refused in D1's
 * envelope; and no amount travels in it.
 */
import { assert, describe, expect, layer } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { registerKey } from "./support/confidentialClient.ts"
import { bearer, createAccount, expectEnvelope, postJson, send } from "./support/http.ts"
import { makeTestServer, TestServer } from "./support/TestServer.ts"

interface StreamedEvent {
  readonly id: string
  readonly event: string
  readonly data: string
}

/** Reads server-sent events until `count` arrived (or the deadline passes), then closes the stream. */
const readEvents = (url: string, apiKey: string, count: number, lastEventId?: string, waitMs = 20_000) =>
  Effect.promise(async () => {
    const controller = new AbortController()
    const response = await fetch(url, {
      headers: { ...bearer(apiKey), ...(lastEventId === undefined ? {} : { "last-event-id": lastEventId }) },
      signal: controller.signal
    })
    const events: Array<StreamedEvent> = []
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    let buffer = ""
    const deadline = setTimeout(() => controller.abort(), waitMs)
    try {
      while (events.length < count) {
        const { done, value } = await reader.read()
        if (done) break
        buffer += decoder.decode(value, { stream: true })
        let end: number
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          const fields = Object.fromEntries(block.split("\n").filter((line) => !line.startsWith(":")).map((line) => {
            const colon = line.indexOf(": ")
            return [line.slice(0, colon), line.slice(colon + 2)]
          }))
          if (fields["id"] !== undefined) events.push({ id: fields["id"], event: fields["event"] ?? "", data: fields["data"] ?? "" })
        }
      }
    } catch {
      // Aborted at the deadline: the events so far are the answer.
    } finally {
      clearTimeout(deadline)
      controller.abort()
    }
    return { status: response.status, contentType: response.headers.get("content-type"), events }
  })

describe("the live event stream (ext)", () => {
  layer(makeTestServer(), { timeout: "120 seconds", excludeTestServices: true })("pglite", (it) => {
    it.effect("streams the account's events with the webhook payloads, resumes after Last-Event-ID, and is mode-scoped", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const alice = yield* createAccount(server, "alice")
        const bob = yield* createAccount(server, "bob")
        yield* registerKey(server.baseUrl, alice.api_key)
        yield* registerKey(server.baseUrl, bob.api_key)
        const streamUrl = `${server.baseUrl}/v1/events/stream`
        yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(alice.api_key), { amount: "40" }))

        // Bob listens from now: two transfers to him arrive as initiated + confirmed each.
        const listening = yield* Effect.forkChild(readEvents(streamUrl, bob.api_key, 4))
        yield* Effect.sleep("500 millis")
        for (const amount of ["7.77", "8.88"]) {
          const paid = yield* send(`${server.baseUrl}/v1/transfers`, postJson(bearer(alice.api_key), { to: "@bob", amount }))
          assert.strictEqual(paid.status, 201, paid.text)
        }
        const first = yield* Fiber.join(listening)
        assert.strictEqual(first.status, 200)
        assert.match(first.contentType ?? "", /^text\/event-stream/)
        expect(first.events.map((event) => event.event)).toEqual([
          "transfer.initiated",
          "transfer.confirmed",
          "transfer.initiated",
          "transfer.confirmed"
        ])
        const ids = first.events.map((event) => event.id)
        expect([...ids].sort()).toEqual(ids)
        for (const event of first.events) {
          const payload = JSON.parse(event.data) as { id: string; event: string }
          // The webhook payload exactly: its event name and its id (the stream's id too).
          assert.strictEqual(payload.event, event.event)
          assert.strictEqual(payload.id, event.id)
          for (const amount of ["7.77", "8.88", "7770000", "8880000"]) assert.notInclude(event.data, amount)
        }

        // Reconnecting after the second event gets exactly the two after it.
        const resumed = yield* readEvents(streamUrl, bob.api_key, 2, ids[1])
        expect(resumed.events.map((event) => event.id)).toEqual(ids.slice(2))
        // The same with the `after` query parameter (for clients that cannot set headers).
        const viaQuery = yield* readEvents(`${streamUrl}?after=${ids[2]}`, bob.api_key, 1)
        expect(viaQuery.events.map((event) => event.id)).toEqual(ids.slice(3))

        // A live key of Bob's sees none of the test mode's events.
        const live = yield* send(`${server.adminUrl}/admin/keys`, postJson(bearer(server.adminToken), {
          account_id: bob.account_id,
          name: "live",
          mode: "live"
        }))
        const liveKey = (live.json as { api_key: string }).api_key
        // From before the first test event: a test key would get all four at once; the live key none.
        const liveStream = yield* readEvents(streamUrl, liveKey, 1, ids[0]!.replace(/[0-9A-Z]{16}$/, "0".repeat(16)), 4_000)
        assert.strictEqual(liveStream.status, 200)
        expect(liveStream.events).toEqual([])

        // Refusals, in D1's envelope.
        expectEnvelope(yield* send(`${streamUrl}?after=nope`, { headers: bearer(bob.api_key) }), 400, "invalid_request")
        expectEnvelope(yield* send(streamUrl), 401, "unauthorized")
        const agent = yield* send(`${server.baseUrl}/v1/accounts/me/agents`, postJson(bearer(alice.api_key), {
          name: "bot",
          spend_policy: { daily_limit_usdg: 10, per_transaction_limit_usdg: 5 }
        }))
        const agentKey = yield* send(`${server.adminUrl}/admin/keys`, postJson(bearer(server.adminToken), {
          account_id: (agent.json as { account_id: string }).account_id,
          name: "agent"
        }))
        expectEnvelope(
          yield* send(streamUrl, { headers: bearer((agentKey.json as { api_key: string }).api_key) }),
          403,
          "not_agent_owner"
        )
      }))
  })
})
