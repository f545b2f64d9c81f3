/**
 * The live event stream (`GET /v1/events/stream`, ext) over a real socket on embedded
 * PGlite: the account's events arrive as server-sent events with the webhook payloads,
 * in id order; a client that reconnects with `Last-Event-ID` gets exactly the events after
 * it; the stream is mode-scoped; agent keys and malformed cursors are refused in D1's
 * envelope; and no amount travels in it. Its limits (M2): a revoked key's open stream ends
 * within seconds, a key holds at most `streamsPerKeyMax` streams (the next is 429 in D1's
 * envelope with Retry-After) and gets a slot back when a client leaves, and a stream ends at
 * its maximum lifetime, after which its client resumes from the cursor it was given at the
 * start and misses nothing. The revocation runs on PostgreSQL too, where no key cache exists.
 */
import { assert, describe, expect, it as plainIt, layer } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { makeStreamSlots, streamRefusedRetryAfterSeconds, streamsPerKeyMax } from "../src/events/http.ts"
import { registerKey } from "./support/confidentialClient.ts"
import { bearer, createAccount, expectEnvelope, postJson, send } from "./support/http.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { makeTestServer, postgres, TestServer, type TestServerShape } from "./support/TestServer.ts"

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
          // A block with an `id` alone is the stream's starting cursor, not an event.
          if (fields["id"] !== undefined && fields["event"] !== undefined) events.push({ id: fields["id"], event: fields["event"], data: fields["data"] ?? "" })
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


/** An open stream read in the background: its text so far, whether the server ended it. */
interface OpenStream {
  readonly status: number
  readonly text: () => string
  /** Resolves when the server ends the response (not when we abort it). */
  readonly ended: Promise<void>
  readonly hasEnded: () => boolean
  readonly close: () => void
}

/** Opens a stream and reads it until the scope closes (aborting it) or the server ends it. */
const openStream = (url: string, apiKey: string, lastEventId?: string) =>
  Effect.acquireRelease(
    Effect.promise(async (): Promise<OpenStream> => {
      const controller = new AbortController()
      const response = await fetch(url, {
        headers: { ...bearer(apiKey), ...(lastEventId === undefined ? {} : { "last-event-id": lastEventId }) },
        signal: controller.signal
      })
      let text = ""
      let ended = false
      const decoder = new TextDecoder()
      const reader = response.body!.getReader()
      const reading = (async () => {
        try {
          for (;;) {
            const { done, value } = await reader.read()
            if (done) {
              ended = true
              return
            }
            text += decoder.decode(value, { stream: true })
          }
        } catch {
          // Aborted by the test: not an end by the server.
        }
      })()
      return {
        status: response.status,
        text: () => text,
        ended: reading.then(() => ended ? undefined : new Promise<void>(() => {})),
        hasEnded: () => ended,
        close: () => controller.abort()
      }
    }),
    (stream) => Effect.sync(() => stream.close())
  )

/** Whether `check` holds within `ms`, looking every 50 ms. */
const within = (ms: number, check: () => boolean) =>
  Effect.promise(async () => {
    const deadline = Date.now() + ms
    while (!check()) {
      if (Date.now() > deadline) return false
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    return true
  })

/** Issues another test key of an account through the admin API. */
const issueKey = (server: TestServerShape, accountId: string, name: string) =>
  send(`${server.adminUrl}/admin/keys`, postJson(bearer(server.adminToken), { account_id: accountId, name })).pipe(
    Effect.map((response) => {
      assert.strictEqual(response.status, 200, response.text)
      return response.json as { key_id: string; api_key: string }
    })
  )

/** Two accounts with registered encryption keys, the payer funded by the faucet. */
const payerAndPayee = (server: TestServerShape, payerHandle: string, payeeHandle: string) =>
  Effect.gen(function*() {
    const payer = yield* createAccount(server, payerHandle)
    const payee = yield* createAccount(server, payeeHandle)
    yield* registerKey(server.baseUrl, payer.api_key)
    yield* registerKey(server.baseUrl, payee.api_key)
    yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(payer.api_key), { amount: "10" }))
    return { payer, payee }
  })

/** `payer` (registered, funded) pays `payee` (registered) once. */
const pay = (server: TestServerShape, payerKey: string, payeeHandle: string, amount: string) =>
  send(`${server.baseUrl}/v1/transfers`, postJson(bearer(payerKey), { to: `@${payeeHandle}`, amount })).pipe(
    Effect.tap((paid) => Effect.sync(() => assert.strictEqual(paid.status, 201, paid.text)))
  )

/**
 * A stream opened with a key that is then revoked ends within seconds (the re-check), while the
 * account's other key keeps its stream; the re-checks are not counted as the key's requests.
 */
const revokedKeyStreamEnds = Effect.gen(function*() {
  const server = yield* TestServer
  const carol = yield* createAccount(server, "carol")
  const spare = yield* issueKey(server, carol.account_id, "laptop")
  const streamUrl = `${server.baseUrl}/v1/events/stream`
  const doomed = yield* openStream(streamUrl, spare.api_key)
  const kept = yield* openStream(streamUrl, carol.api_key)
  assert.strictEqual(doomed.status, 200)
  assert.strictEqual(kept.status, 200)
  // Open for longer than a re-check period: a valid key's stream is not ended.
  yield* Effect.sleep("3 seconds")
  assert.isFalse(doomed.hasEnded())
  const revoked = yield* send(`${server.adminUrl}/admin/keys/${spare.key_id}/revoke`, postJson(bearer(server.adminToken), {}))
  assert.strictEqual(revoked.status, 200, revoked.text)
  const revokedAt = Date.now()
  assert.isTrue(yield* within(5_000, doomed.hasEnded), "the revoked key's stream is still open 5 s after the revocation")
  assert.isBelow(Date.now() - revokedAt, 5_000)
  assert.include(doomed.text(), ": closed: the credentials are no longer valid")
  assert.isFalse(kept.hasEnded(), "the account's other key lost its stream")
  expectEnvelope(yield* send(streamUrl, { headers: bearer(spare.api_key) }), 401, "unauthorized")
  // The re-checks (several by now) are not requests: the kept key made one, its stream.
  yield* Effect.sleep("500 millis") // usage is written every API_KEY_USAGE_FLUSH_MS (200 ms here)
  const keys = yield* send(`${server.adminUrl}/admin/accounts/${carol.account_id}/keys`, { headers: bearer(server.adminToken) })
  const keptKey = (keys.json as { data: Array<{ key_id: string; request_count: number }> }).data.find((key) => key.key_id === carol.key_id)
  assert.strictEqual(keptKey?.request_count, 1)
}).pipe(Effect.scoped)

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
        // Four decimals: a canary of three ("7.77") was found in an event's timestamp ("…:47.771Z").
        for (const amount of ["7.7719", "8.8823"]) {
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
          for (const amount of ["7.7719", "8.8823", "7771900", "8882300"]) assert.notInclude(event.data, amount)
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

    it.effect("a revoked key's open stream ends within seconds; the account's other keys' streams go on", () => revokedKeyStreamEnds)

    it.effect(`a key holds ${streamsPerKeyMax} streams: the next is 429 with Retry-After while those work, and a closed one frees its slot`, () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const { payee: dave, payer: erin } = yield* payerAndPayee(server, "erin", "dave")
        const streamUrl = `${server.baseUrl}/v1/events/stream`
        const streams: Array<OpenStream> = []
        for (let i = 0; i < streamsPerKeyMax; i++) streams.push(yield* openStream(streamUrl, dave.api_key))
        for (const stream of streams) assert.strictEqual(stream.status, 200)

        const refused = yield* send(streamUrl, { headers: bearer(dave.api_key) })
        expectEnvelope(refused, 429, "rate_limited")
        assert.strictEqual(refused.headers.get("retry-after"), String(streamRefusedRetryAfterSeconds))
        // The cap is the key's: another key of the same account still opens one.
        const other = yield* issueKey(server, dave.account_id, "second")
        const otherStream = yield* openStream(streamUrl, other.api_key)
        assert.strictEqual(otherStream.status, 200)

        // The streams that were let in deliver.
        yield* pay(server, erin.api_key, "dave", "1.25")
        const delivered = yield* within(20_000, () => streams.every((stream) => stream.text().includes("event: transfer.initiated")))
        assert.isTrue(delivered, "an open stream did not deliver the transfer")
        assert.isFalse(streams.some((stream) => stream.hasEnded()))

        // A client that leaves gives its slot back (the server notices the closed socket).
        streams[0]!.close()
        const reopened = yield* Effect.promise(async () => {
          const deadline = Date.now() + 5_000
          for (;;) {
            const controller = new AbortController()
            const response = await fetch(streamUrl, { headers: bearer(dave.api_key), signal: controller.signal })
            controller.abort()
            if (response.status === 200 || Date.now() > deadline) return response.status
            await new Promise((resolve) => setTimeout(resolve, 200))
          }
        })
        assert.strictEqual(reopened, 200)
      }).pipe(Effect.scoped))
  })

  layer(makeTestServer({ config: { eventStreamMaxLifetimeMs: 3_000 } }), { timeout: "120 seconds", excludeTestServices: true })(
    "pglite, 3 s stream lifetime",
    (it) => {
      it.effect("the server ends a stream at its lifetime; resuming from the starting cursor it sent misses nothing", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const { payee: frank, payer: grace } = yield* payerAndPayee(server, "grace", "frank")
          const streamUrl = `${server.baseUrl}/v1/events/stream`

          // Opened without a cursor: the first block is its starting cursor.
          const opened = Date.now()
          const first = yield* openStream(streamUrl, frank.api_key)
          assert.strictEqual(first.status, 200)
          assert.isTrue(yield* within(2_000, () => /^id: pos_/m.test(first.text())))
          const cursor = /^id: (pos_[0-9]+_[0-9]+)$/m.exec(first.text())![1]!
          assert.isTrue(yield* within(6_000, first.hasEnded), "the stream outlived its lifetime")
          assert.isAtLeast(Date.now() - opened, 2_900)
          assert.include(first.text(), ": closed: the stream reached its maximum lifetime")

          // Paid while no stream was open: a client resuming from the cursor, and again from its
          // last event whenever the lifetime ends a stream, gets both events once.
          yield* pay(server, grace.api_key, "frank", "2.5")
          const received: Array<StreamedEvent> = []
          const deadline = Date.now() + 30_000
          while (received.length < 2 && Date.now() < deadline) {
            const resumed = yield* readEvents(streamUrl, frank.api_key, 2 - received.length, received.at(-1)?.id ?? cursor, 10_000)
            assert.strictEqual(resumed.status, 200)
            received.push(...resumed.events)
          }
          expect(received.map((event) => event.event)).toEqual(["transfer.initiated", "transfer.confirmed"])
        }).pipe(Effect.scoped))
    }
  )

  // The distributed mode has no key cache: every re-check asks the database, as every node's would.
  describe.skipIf(!postgresAvailable)("postgres", () => {
    layer(makeTestServer({ database: postgres }), { timeout: "120 seconds", excludeTestServices: true })("postgres", (it) => {
      it.effect("a revoked key's open stream ends within seconds (no cache: the database is asked)", () => revokedKeyStreamEnds)
    })
  })

  plainIt("the per-node cap refuses the stream over it whatever the key, and a release frees a slot", () => {
    const slots = makeStreamSlots({ perKey: 2, perNode: 3 })
    assert.strictEqual(slots.take("key_a"), "taken")
    assert.strictEqual(slots.take("key_a"), "taken")
    assert.strictEqual(slots.take("key_a"), "key_full")
    assert.strictEqual(slots.take("key_b"), "taken")
    assert.strictEqual(slots.take("key_c"), "node_full")
    slots.release("key_a")
    assert.strictEqual(slots.open(), 2)
    assert.strictEqual(slots.take("key_c"), "taken")
    assert.strictEqual(slots.take("key_a"), "node_full")
  })
})
