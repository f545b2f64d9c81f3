/**
 * Failure modes (docs/operations.md), "NATS is down", for webhooks: a server node on PostgreSQL
 * whose bus link (the real JetStream at 127.0.0.1:4222) goes through a loopback proxy
 * the test cuts. Transfers made meanwhile still commit their events to the outbox, where
 * they stay unpublished and undelivered; once the link is back, the relay publishes them
 * and each reaches every matching subscription, on a real HTTP receiver, exactly once.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { ulid } from "../src/platform/Ids.ts"
import { fundedPair } from "./support/confidentialClient.ts"
import { cuttableProxy, throughProxy } from "./support/cuttableProxy.ts"
import { bearer, postJson, send } from "./support/http.ts"
import { deleteStream, natsAvailable, natsUrl } from "./support/requireNats.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { freshPostgresDatabase, makeTestServer, postgres, TestServer } from "./support/TestServer.ts"
import { eventually, receiverResource } from "./support/webhooks-receiver.ts"

const stream = `PPS_TEST_${ulid()}`
const subjectPrefix = `test.${stream.toLowerCase()}`

/** Transfers made while the bus is cut: each gives one `transfer.confirmed` per side. */
const transfersWhileCut = 3
/** Long enough for several relay rounds (every 100 ms, 1 s back-off after a failure) to have tried. */
const cutHeldMs = 3_000

describe.skipIf(!natsAvailable || !postgresAvailable)("NATS down under a server node: webhooks late, not lost", () => {
  afterAll(() => deleteStream(stream), 60_000)

  it.live("events made while the bus is cut wait in the outbox, then reach each subscription once", () =>
    Effect.scoped(Effect.gen(function*() {
      const databaseUrl = yield* freshPostgresDatabase
      const proxy = yield* cuttableProxy(natsUrl, 4222)
      const receiver = yield* receiverResource(undefined)
      const server = yield* Layer.build(makeTestServer({
        database: postgres,
        config: {
          databaseUrl: Option.some(Redacted.make(databaseUrl)),
          natsUrl: Option.some(throughProxy(natsUrl, proxy)),
          natsStream: stream,
          natsSubjectPrefix: subjectPrefix
        }
      })).pipe(Effect.map((context) => Context.get(context, TestServer)))
      const direct = Context.get(yield* Layer.build(PgClient.layer({ url: Redacted.make(databaseUrl) })), SqlClient.SqlClient)
      const unpublished = direct<{ n: string }>`SELECT count(*)::text AS n FROM events WHERE published_at IS NULL`.pipe(
        Effect.map(([row]) => Number(row?.n ?? "-1"))
      )

      const { recipient: bob, recipientHandle, sender: alice } = yield* fundedPair(server, "100")
      for (const [party, apiKey] of [["alice", alice.api_key], ["bob", bob.api_key]] as const) {
        const created = yield* send(
          `${server.baseUrl}/v1/webhooks`,
          postJson(bearer(apiKey), { url: `${receiver.url}/${party}`, events: ["transfer.confirmed"] })
        )
        assert.strictEqual(created.status, 201, created.text)
      }
      const transfer = (amount: string) =>
        send(`${server.baseUrl}/v1/transfers`, postJson({ ...bearer(alice.api_key), "idempotency-key": ulid() }, { to: `@${recipientHandle}`, amount }))

      // The bus works: one transfer, one delivery per side.
      const first = yield* transfer("1")
      assert.strictEqual(first.status, 201, first.text)
      yield* eventually(Effect.sync(() => (receiver.requests.length >= 2 ? true : undefined)), "the first transfer's deliveries", {
        timeoutMs: 30_000
      })

      // Cut: transfers still commit (the bus is not on their path); their events stay unpublished.
      proxy.cut()
      const unpublishedBefore = yield* unpublished
      for (let index = 0; index < transfersWhileCut; index++) {
        const answer = yield* transfer(`1.${index + 1}`)
        assert.strictEqual(answer.status, 201, answer.text)
        assert.strictEqual((answer.json as { status?: unknown }).status, "confirmed", answer.text)
      }
      yield* Effect.sleep(cutHeldMs)
      assert.strictEqual(receiver.requests.length, 2, "nothing delivered while the bus is cut")
      // Each transfer commits at least its two `transfer.confirmed` events (one per side).
      assert.isAtLeast(yield* unpublished, unpublishedBefore + 2 * transfersWhileCut, "the events wait in the outbox")

      // Resumed: the outbox drains and every event reaches its subscription once.
      proxy.resume()
      const expected = 2 * (1 + transfersWhileCut)
      yield* eventually(Effect.sync(() => (receiver.requests.length >= expected ? true : undefined)), "every delivery after the resume", {
        timeoutMs: 60_000
      })
      yield* eventually(unpublished.pipe(Effect.map((n) => (n === 0 ? true : undefined))), "the outbox drained", { timeoutMs: 30_000 })
      // Time for any repeat to show (the relay republishes what it had not marked; the stream drops it).
      yield* Effect.sleep(1_500)
      const eventIds = receiver.requests.map((request) => String(request.headers["x-service-event-id"]))
      assert.strictEqual(eventIds.length, expected, "no delivery twice")
      assert.strictEqual(new Set(eventIds).size, expected)
      assert.deepStrictEqual(receiver.requests.map((request) => request.status), Array.from({ length: expected }, () => 200))
      const byPath = (path: string) => receiver.requests.filter((request) => request.path === path).length
      assert.strictEqual(byPath("/alice"), 1 + transfersWhileCut)
      assert.strictEqual(byPath("/bob"), 1 + transfersWhileCut)
      const [deliveries] = yield* direct<{ n: string }>`SELECT count(*)::text AS n FROM webhook_deliveries`
      assert.strictEqual(Number(deliveries?.n), expected, "one delivery row per event and subscription")
    })), { timeout: 180_000 })
})
