/**
 * Events and webhooks through the whole server on real sockets, on either
 * database: the subscription endpoints (D33-D35), end-to-end delivery to a
 * real HTTPS receiver with byte-exact signatures (D31), routing (D30, D9),
 * replay, rotation, deletion, the outbox's transaction, and the canary: no
 * amount or memo reaches a payload, a row or a log line.
 */
import { createHmac } from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { EventInput } from "@pps/api/Events"
import { Outbox } from "../../src/events/Outbox.ts"
import { WebhookStore } from "../../src/webhooks/WebhookStore.ts"
import { bearer, createAccount, expectEnvelope, patchJson, postJson, send } from "../support/http.ts"
import { type DatabaseTarget, makeTestServer, TestServer, type TestServerShape } from "../support/TestServer.ts"
import { eventually, makeTestCa, type ReceivedRequest, removeTestCa, startReceiver } from "../support/webhooks-receiver.ts"

const ca = makeTestCa()
const receiver = await startReceiver(ca, ({ path }) =>
  path.startsWith("/fail") ? { status: 500 } : path.startsWith("/slow") ? { status: 200, delayMs: 2_000 } : { status: 200 })
afterAll(async () => {
  await receiver.close()
  removeTestCa(ca)
})

const CANARY = "987654.321"
const MEMO_CANARY = "canary-memo-7f3a"

const outboxOf = (server: TestServerShape) => Context.get(server.services, Outbox)
const sqlOf = (server: TestServerShape) => Context.get(server.services, SqlClient.SqlClient)

const appendEvents = (server: TestServerShape, events: ReadonlyArray<EventInput>) =>
  outboxOf(server).append(events).pipe(Effect.orDie)

const confirmed = (accountId: string, handle: string, mode: "test" | "live" = "test", extra: Record<string, unknown> = {}) =>
  ({
    mode,
    recipientAccountId: accountId,
    payload: {
      event: "transfer.confirmed",
      account: handle,
      direction: "sent",
      counterparty: "@someone",
      asset: "USDG",
      confidential: true,
      tx_hash: `0x${"cd".repeat(32)}`,
      transfer_id: "tr_01JTEST",
      ...extra
    }
  }) as EventInput

const createWebhook = (server: TestServerShape, apiKey: string, path: string, events: ReadonlyArray<string> = ["transfer.confirmed"]) =>
  send(`${server.baseUrl}/v1/webhooks`, postJson(bearer(apiKey), { url: `${receiver.url}${path}`, events })).pipe(
    Effect.map((response) => {
      if (response.status !== 201) throw new Error(`webhook creation failed: ${response.status} ${response.text}`)
      return response.json as { webhook_id: string; url: string; events: Array<string>; secret: string; created_at: string }
    })
  )

/** A plain-http receiver on loopback (a developer's), answering 200; closed with the scope. */
const startPlainReceiver = Effect.acquireRelease(
  Effect.promise(async () => {
    const bodies: Array<string> = []
    const server = http.createServer((request, response) => {
      let text = ""
      request.on("data", (chunk: Buffer) => {
        text += chunk.toString("utf8")
      })
      request.on("end", () => {
        bodies.push(text)
        response.writeHead(200).end()
      })
    })
    const port = await new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)))
    return { bodies, url: `http://127.0.0.1:${port}`, close: () => server.close() }
  }),
  (receiver) => Effect.sync(receiver.close)
)

const requestsTo = (path: string) => receiver.requests.filter((request) => request.path === path)
const waitForRequests = (path: string, count: number) =>
  eventually(Effect.sync(() => (requestsTo(path).length >= count ? requestsTo(path) : undefined)), `${count} requests to ${path}`)

/** Verifies a delivery the way a receiver must: HMACs over the raw bytes, compared in constant time. */
const verifyDelivery = (request: ReceivedRequest, secret: string) => {
  const hex = createHmac("sha256", Buffer.from(secret, "utf8")).update(request.body).digest("hex")
  assert.strictEqual(request.headers["x-service-signature"], hex)
  const id = String(request.headers["webhook-id"])
  const timestamp = String(request.headers["webhook-timestamp"])
  const key = Buffer.from(secret.slice("whsec_".length), "base64")
  const standard = createHmac("sha256", key).update(`${id}.${timestamp}.`).update(request.body).digest("base64")
  assert.include(String(request.headers["webhook-signature"]).split(" "), `v1,${standard}`)
}

export const webhooksApiSuite = (database: DatabaseTarget) =>
  describe("events and webhooks", () => {
    layer(makeTestServer({ database, config: { webhookCaFile: Option.some(ca.caFile) } }), {
      timeout: "60 seconds",
      excludeTestServices: true
    })(database.name, (it) => {
      it.effect("create answers 201 with the secret once; list shows the subscription without it", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const alice = yield* createAccount(server, `wh-alice-${database.name}`)
          const created = yield* createWebhook(server, alice.api_key, "/alice", ["transfer.confirmed", "agent.policy.updated"])
          assert.match(created.webhook_id, /^wh_[0-9A-Z]{26}$/)
          assert.match(created.secret, /^whsec_[A-Za-z0-9+/]{43}=$/)
          assert.strictEqual(created.url, `${receiver.url}/alice`)
          assert.deepStrictEqual(created.events, ["transfer.confirmed", "agent.policy.updated"])
          const list = yield* send(`${server.baseUrl}/v1/webhooks`, { headers: bearer(alice.api_key) })
          assert.strictEqual(list.status, 200)
          assert.deepStrictEqual(list.json, {
            data: [{ webhook_id: created.webhook_id, url: created.url, events: created.events, enabled: true, created_at: created.created_at }]
          })
          assert.notInclude(list.text, created.secret)
          // The secret is stored sealed: not in any row, not in any log line.
          const rows = yield* sqlOf(server)<{ secret_sealed: Uint8Array }>`SELECT secret_sealed FROM webhooks`.pipe(Effect.orDie)
          for (const row of rows) assert.notInclude(Buffer.from(row.secret_sealed).toString("latin1"), created.secret.slice(6))
          assert.isFalse(server.logs.some((line) => line.includes(created.secret.slice(6, 20))))
        }))

      it.effect("create refuses bad URLs and events with 400 invalid_request and the param", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const bob = yield* createAccount(server, `wh-bob-${database.name}`)
          const post = (body: unknown) => send(`${server.baseUrl}/v1/webhooks`, postJson(bearer(bob.api_key), body))
          const cases: Array<[unknown, string]> = [
            [{ url: "ftp://example.com/x", events: ["transfer.confirmed"] }, "url"],
            [{ url: "http://example.com/x", events: ["transfer.confirmed"] }, "url"],
            [{ url: "https://169.254.169.254/", events: ["transfer.confirmed"] }, "url"],
            [{ url: "https://10.0.0.8/hook", events: ["transfer.confirmed"] }, "url"],
            [{ url: "https://[::ffff:127.0.0.1]/hook", events: ["transfer.confirmed"] }, "url"],
            [{ url: "not a url", events: ["transfer.confirmed"] }, "url"],
            [{ url: "https://example.com/x", events: [] }, "events"],
            [{ url: "https://example.com/x", events: ["transfer.confirmed", "nope"] }, "events.1"],
            [{ events: ["transfer.confirmed"] }, "url"]
          ]
          for (const [body, param] of cases) {
            const error = expectEnvelope(yield* post(body), 400, "invalid_request")
            assert.strictEqual(error.param, param, JSON.stringify(body))
          }
        }))

      it.effect("an event is delivered once to each matching subscription, signed byte-exactly, with D31's headers", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const carol = yield* createAccount(server, `wh-carol-${database.name}`)
          const webhook = yield* createWebhook(server, carol.api_key, "/carol")
          const other = yield* createWebhook(server, carol.api_key, "/carol-policy", ["agent.policy.updated"])
          const [event] = yield* appendEvents(server, [confirmed(carol.account_id, `@wh-carol-${database.name}`)])
          const [request] = yield* waitForRequests("/carol", 1)
          verifyDelivery(request!, webhook.secret)
          assert.strictEqual(request!.headers["content-type"], "application/json")
          assert.strictEqual(request!.headers["x-service-event-id"], event!.eventId)
          assert.match(String(request!.headers["x-service-delivery-id"]), /^dlv_[0-9A-Z]{26}$/)
          assert.strictEqual(request!.headers["webhook-id"], event!.eventId)
          assert.isTrue(Math.abs(Number(request!.headers["webhook-timestamp"]) - Date.now() / 1000) < 60)
          assert.strictEqual(request!.body.toString("utf8"), event!.payload)
          const payload = JSON.parse(request!.body.toString("utf8")) as Record<string, unknown>
          assert.deepStrictEqual(payload, {
            id: event!.eventId,
            event: "transfer.confirmed",
            account: `@wh-carol-${database.name}`,
            direction: "sent",
            counterparty: "@someone",
            asset: "USDG",
            confidential: true,
            tx_hash: `0x${"cd".repeat(32)}`,
            transfer_id: "tr_01JTEST",
            timestamp: event!.createdAt
          })
          // The other subscription does not take this type.
          assert.strictEqual(requestsTo("/carol-policy").length, 0)
          // D34's history.
          const history = yield* eventually(
            send(`${server.baseUrl}/v1/webhooks/${webhook.webhook_id}/deliveries`, { headers: bearer(carol.api_key) }).pipe(
              Effect.map((response) => {
                const page = response.json as { data: Array<{ status: string }> }
                return page.data[0]?.status === "succeeded" ? response : undefined
              })
            ),
            "the delivery to be recorded"
          )
          const page = history.json as { data: Array<Record<string, unknown>>; limit: number; offset: number; has_more: boolean }
          assert.deepStrictEqual({ limit: page.limit, offset: page.offset, has_more: page.has_more }, { limit: 20, offset: 0, has_more: false })
          assert.strictEqual(page.data.length, 1)
          assert.deepInclude(page.data[0], {
            delivery_id: request!.headers["x-service-delivery-id"],
            event_id: event!.eventId,
            event: "transfer.confirmed",
            status: "succeeded",
            response_status_code: 200,
            retry_count: 0,
            next_attempt_at: null
          })
          const empty = yield* send(`${server.baseUrl}/v1/webhooks/${other.webhook_id}/deliveries`, { headers: bearer(carol.api_key) })
          assert.deepStrictEqual((empty.json as { data: Array<unknown> }).data, [])
          for (const query of ["limit=0", "limit=101", "limit=abc", "offset=-1", "limit=2.5"]) {
            const bad = yield* send(`${server.baseUrl}/v1/webhooks/${webhook.webhook_id}/deliveries?${query}`, {
              headers: bearer(carol.api_key)
            })
            assert.strictEqual(expectEnvelope(bad, 400, "invalid_request").param, query.split("=")[0])
          }
        }))

      it.effect("pages of the history: newest first, limit, offset, has_more", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const dan = yield* createAccount(server, `wh-dan-${database.name}`)
          const webhook = yield* createWebhook(server, dan.api_key, "/dan")
          for (let i = 0; i < 3; i++) yield* appendEvents(server, [confirmed(dan.account_id, "@dan")])
          yield* waitForRequests("/dan", 3)
          const url = `${server.baseUrl}/v1/webhooks/${webhook.webhook_id}/deliveries`
          const first = (yield* send(`${url}?limit=2`, { headers: bearer(dan.api_key) })).json as {
            data: Array<{ created_at: string; delivery_id: string }>
            has_more: boolean
          }
          const second = (yield* send(`${url}?limit=2&offset=2`, { headers: bearer(dan.api_key) })).json as {
            data: Array<{ created_at: string; delivery_id: string }>
            has_more: boolean
          }
          assert.strictEqual(first.data.length, 2)
          assert.isTrue(first.has_more)
          assert.strictEqual(second.data.length, 1)
          assert.isFalse(second.has_more)
          const all = [...first.data, ...second.data]
          const sorted = [...all].sort((a, b) => (b.created_at + b.delivery_id).localeCompare(a.created_at + a.delivery_id))
          assert.deepStrictEqual(all, sorted)
        }))

      it.effect("subscriptions are scoped to account and mode: other tenants get 404 webhook_not_found, live never sees test", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const erin = yield* createAccount(server, `wh-erin-${database.name}`)
          const mallory = yield* createAccount(server, `wh-mallory-${database.name}`)
          const webhook = yield* createWebhook(server, erin.api_key, "/erin")
          const [event] = yield* appendEvents(server, [confirmed(erin.account_id, "@erin")])
          const base = `${server.baseUrl}/v1/webhooks/${webhook.webhook_id}`
          const asMallory = bearer(mallory.api_key)
          expectEnvelope(yield* send(base, { method: "DELETE", headers: asMallory }), 404, "webhook_not_found")
          expectEnvelope(yield* send(`${base}/deliveries`, { headers: asMallory }), 404, "webhook_not_found")
          expectEnvelope(yield* send(`${base}/rotate-secret`, { method: "POST", headers: asMallory }), 404, "webhook_not_found")
          expectEnvelope(yield* send(`${base}/replay/${event!.eventId}`, { method: "POST", headers: asMallory }), 404, "webhook_not_found")
          // Mallory's own subscription cannot replay Erin's event.
          const malloryHook = yield* createWebhook(server, mallory.api_key, "/mallory")
          expectEnvelope(
            yield* send(`${server.baseUrl}/v1/webhooks/${malloryHook.webhook_id}/replay/${event!.eventId}`, {
              method: "POST",
              headers: asMallory
            }),
            404,
            "event_not_found"
          )
          // A live key of the same account sees no test subscription (D9)...
          const liveKey = yield* send(`${server.adminUrl}/admin/keys`, postJson(bearer(server.adminToken), {
            account_id: erin.account_id,
            name: "live",
            mode: "live"
          }))
          const live = (liveKey.json as { api_key: string }).api_key
          assert.deepStrictEqual((yield* send(`${server.baseUrl}/v1/webhooks`, { headers: bearer(live) })).json, { data: [] })
          expectEnvelope(yield* send(base, { method: "DELETE", headers: bearer(live) }), 404, "webhook_not_found")
          // ...and a live event never reaches a test subscription (which has the test event's delivery:
          // waited for first, or a late arrival of it would pass for the live event's absence or fail the count).
          yield* waitForRequests("/erin", 1)
          const liveHook = yield* createWebhook(server, live, "/erin-live")
          yield* appendEvents(server, [confirmed(erin.account_id, "@erin", "live")])
          yield* waitForRequests("/erin-live", 1)
          assert.strictEqual(requestsTo("/erin").length, 1)
          assert.notStrictEqual(liveHook.webhook_id, webhook.webhook_id)
        }))

      it.effect("agent events go to the owner's subscriptions with account = the agent's handle", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const owner = yield* createAccount(server, `wh-acme-${database.name}`)
          yield* createWebhook(server, owner.api_key, "/acme", ["agent.policy.updated", "agent.transaction.pending_approval"])
          yield* appendEvents(server, [
            {
              mode: "test",
              recipientAccountId: owner.account_id,
              payload: { event: "agent.policy.updated", account: "@acme/buyer", agent: "@acme/buyer", policy_id: "pol_1" }
            }
          ])
          const [request] = yield* waitForRequests("/acme", 1)
          const payload = JSON.parse(request!.body.toString("utf8")) as Record<string, unknown>
          assert.strictEqual(payload["event"], "agent.policy.updated")
          assert.strictEqual(payload["account"], "@acme/buyer")
          assert.strictEqual(payload["policy_id"], "pol_1")
        }))

      it.effect("replay answers 202 with a new pending delivery and sends the same event again", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const fay = yield* createAccount(server, `wh-fay-${database.name}`)
          const webhook = yield* createWebhook(server, fay.api_key, "/fay")
          const [event] = yield* appendEvents(server, [confirmed(fay.account_id, "@fay")])
          const [first] = yield* waitForRequests("/fay", 1)
          const replay = yield* send(`${server.baseUrl}/v1/webhooks/${webhook.webhook_id}/replay/${event!.eventId}`, {
            method: "POST",
            headers: bearer(fay.api_key)
          })
          assert.strictEqual(replay.status, 202)
          const accepted = replay.json as { delivery_id: string; event_id: string; status: string }
          assert.strictEqual(accepted.event_id, event!.eventId)
          assert.strictEqual(accepted.status, "pending")
          const [, second] = yield* waitForRequests("/fay", 2)
          assert.strictEqual(second!.headers["x-service-delivery-id"], accepted.delivery_id)
          assert.notStrictEqual(second!.headers["x-service-delivery-id"], first!.headers["x-service-delivery-id"])
          assert.strictEqual(second!.headers["webhook-id"], event!.eventId)
          assert.isTrue(second!.body.equals(first!.body))
          expectEnvelope(
            yield* send(`${server.baseUrl}/v1/webhooks/${webhook.webhook_id}/replay/evt_00000000000000000000000000`, {
              method: "POST",
              headers: bearer(fay.api_key)
            }),
            404,
            "event_not_found"
          )
        }))

      it.effect("rotate-secret returns a new secret once; deliveries then carry both signatures", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const gus = yield* createAccount(server, `wh-gus-${database.name}`)
          const webhook = yield* createWebhook(server, gus.api_key, "/gus")
          const rotated = yield* send(`${server.baseUrl}/v1/webhooks/${webhook.webhook_id}/rotate-secret`, {
            method: "POST",
            headers: bearer(gus.api_key)
          })
          assert.strictEqual(rotated.status, 200)
          const body = rotated.json as { secret: string; previous_secret_expires_at: string }
          assert.notStrictEqual(body.secret, webhook.secret)
          assert.isTrue(Date.parse(body.previous_secret_expires_at) - Date.now() > 23 * 3600_000)
          yield* appendEvents(server, [confirmed(gus.account_id, "@gus")])
          const [request] = yield* waitForRequests("/gus", 1)
          verifyDelivery(request!, body.secret)
          verifyDelivery(
            { ...request!, headers: { ...request!.headers, "x-service-signature": request!.headers["x-service-signature-previous"] } },
            webhook.secret
          )
          assert.strictEqual(String(request!.headers["webhook-signature"]).split(" ").length, 2)
        }))

      it.effect("delete answers 204, cancels pending deliveries and stops further ones", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const hal = yield* createAccount(server, `wh-hal-${database.name}`)
          const webhook = yield* createWebhook(server, hal.api_key, "/fail-hal")
          yield* appendEvents(server, [confirmed(hal.account_id, "@hal")])
          yield* waitForRequests("/fail-hal", 1)
          const deleted = yield* send(`${server.baseUrl}/v1/webhooks/${webhook.webhook_id}`, {
            method: "DELETE",
            headers: bearer(hal.api_key)
          })
          assert.strictEqual(deleted.status, 204)
          assert.strictEqual(deleted.text, "")
          const rows = yield* sqlOf(server)<{ status: string }>`
            SELECT status FROM webhook_deliveries WHERE webhook_id = ${webhook.webhook_id}`.pipe(Effect.orDie)
          assert.deepStrictEqual(rows.map((row) => row.status), ["cancelled"])
          expectEnvelope(
            yield* send(`${server.baseUrl}/v1/webhooks/${webhook.webhook_id}`, { method: "DELETE", headers: bearer(hal.api_key) }),
            404,
            "webhook_not_found"
          )
          assert.deepStrictEqual((yield* send(`${server.baseUrl}/v1/webhooks`, { headers: bearer(hal.api_key) })).json, { data: [] })
          yield* appendEvents(server, [confirmed(hal.account_id, "@hal")])
          yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 500)))
          assert.strictEqual(requestsTo("/fail-hal").length, 1)
        }))

      it.effect("an attempt in flight when the subscription is deleted is aborted here and cannot revive it elsewhere", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const lee = yield* createAccount(server, `wh-lee-${database.name}`)
          const webhook = yield* createWebhook(server, lee.api_key, "/slow-lee")
          const [event] = yield* appendEvents(server, [confirmed(lee.account_id, "@lee")])
          yield* waitForRequests("/slow-lee", 1)
          // The receiver holds the request; delete while it is in flight.
          const deleted = yield* send(`${server.baseUrl}/v1/webhooks/${webhook.webhook_id}`, {
            method: "DELETE",
            headers: bearer(lee.api_key)
          })
          assert.strictEqual(deleted.status, 204)
          yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 2_500)))
          const sql = sqlOf(server)
          const rows = yield* sql<{ delivery_id: string; status: string; attempt_count: number }>`
            SELECT delivery_id, status, attempt_count FROM webhook_deliveries WHERE event_id = ${event!.eventId}`.pipe(Effect.orDie)
          assert.deepStrictEqual(rows.map((row) => [row.status, row.attempt_count]), [["cancelled", 0]])
          assert.strictEqual(requestsTo("/slow-lee").length, 1)
          // Another node's attempt that finishes after the delete: logged, but the delivery stays
          // cancelled and that node learns it lost the subscription.
          const store = Context.get(server.services, WebhookStore)
          const [result] = yield* store.recordAttempts([{
            deliveryId: rows[0]!.delivery_id,
            attemptNumber: 1,
            nodeId: "node_elsewhere",
            startedAt: new Date().toISOString(),
            durationMs: 5,
            statusCode: 200,
            error: undefined,
            status: "succeeded",
            webhookId: webhook.webhook_id,
            leaseUntil: new Date(Date.now() + 30_000).toISOString()
          }]).pipe(Effect.orDie)
          assert.deepStrictEqual(result, { recorded: false, leaseHeld: false })
          const after = yield* sql<{ status: string }>`
            SELECT status FROM webhook_deliveries WHERE delivery_id = ${rows[0]!.delivery_id}`.pipe(Effect.orDie)
          assert.strictEqual(after[0]!.status, "cancelled")
          const logged = yield* sql<{ node_id: string }>`
            SELECT node_id FROM webhook_attempts WHERE delivery_id = ${rows[0]!.delivery_id}`.pipe(Effect.orDie)
          assert.deepStrictEqual(logged.map((row) => row.node_id), ["node_elsewhere"])
        }))

      it.effect("events commit with the caller's transaction: a rolled-back change announces nothing", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const ivy = yield* createAccount(server, `wh-ivy-${database.name}`)
          yield* createWebhook(server, ivy.api_key, "/ivy")
          const sql = sqlOf(server)
          const failed = yield* sql.withTransaction(
            appendEvents(server, [confirmed(ivy.account_id, "@ivy", "test", { transfer_id: "tr_rolled_back" })]).pipe(
              Effect.andThen(Effect.fail("the transfer insert failed" as const))
            )
          ).pipe(Effect.flip)
          assert.strictEqual(failed, "the transfer insert failed")
          yield* sql.withTransaction(appendEvents(server, [confirmed(ivy.account_id, "@ivy", "test", { transfer_id: "tr_committed" })]))
            .pipe(Effect.orDie)
          const [request] = yield* waitForRequests("/ivy", 1)
          yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 300)))
          assert.strictEqual(requestsTo("/ivy").length, 1)
          assert.include(request!.body.toString("utf8"), "tr_committed")
          const rows = yield* sql<{ count: string }>`
            SELECT count(*)::text AS count FROM events WHERE payload LIKE '%tr_rolled_back%'`.pipe(Effect.orDie)
          assert.strictEqual(rows[0]!.count, "0")
        }))

      it.effect("nothing is lost between commit and publish, and a republished event is not delivered twice", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const kim = yield* createAccount(server, `wh-kim-${database.name}`)
          yield* createWebhook(server, kim.api_key, "/kim")
          const sql = sqlOf(server)
          // A row committed by a process that died before waking its relay: only the poll finds it.
          yield* sql`
            INSERT INTO events (event_id, account_id, mode, type, payload, created_at)
            VALUES ('evt_01KORPHAN000000000000000000', ${kim.account_id}, 'test', 'transfer.confirmed', '{"id":"evt_01KORPHAN000000000000000000"}', now())`
            .pipe(Effect.orDie)
          const [request] = yield* waitForRequests("/kim", 1)
          assert.strictEqual(request!.headers["x-service-event-id"], "evt_01KORPHAN000000000000000000")
          // A relay that died after publishing but before marking publishes again: no second delivery.
          yield* sql`UPDATE events SET published_at = NULL WHERE event_id = 'evt_01KORPHAN000000000000000000'`.pipe(Effect.orDie)
          yield* eventually(
            sql<{ published: boolean }>`
              SELECT published_at IS NOT NULL AS published FROM events WHERE event_id = 'evt_01KORPHAN000000000000000000'`.pipe(
              Effect.map((rows) => (rows[0]?.published === true ? true : undefined))
            ),
            "the republish"
          )
          yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 300)))
          assert.strictEqual(requestsTo("/kim").length, 1)
        }))

      it.effect("canary: an amount or memo handed to the outbox appears in no payload, no row and no log line", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const joe = yield* createAccount(server, `wh-joe-${database.name}`)
          yield* createWebhook(server, joe.api_key, "/joe", [
            "transfer.initiated",
            "transfer.confirmed",
            "transfer.failed",
            "agent.transaction.pending_approval",
            "agent.transaction.approved",
            "agent.transaction.rejected",
            "agent.transaction.expired",
            "agent.policy.updated"
          ])
          const smuggled = { amount: CANARY, memo: MEMO_CANARY, amount_usdg: CANARY, plaintext: CANARY }
          const transaction = {
            account: "@joe/agent",
            agent: "@joe/agent",
            transaction_id: "atx_1",
            to: "@shop",
            asset: "USDG",
            confidential: true,
            requested_at: "2026-01-01T00:00:00.000Z",
            expires_at: "2026-01-02T00:00:00.000Z",
            transfer_id: null,
            tx_hash: null,
            ...smuggled
          }
          const inputs = [
            confirmed(joe.account_id, "@joe", "test", { event: "transfer.initiated", tx_hash: null, ...smuggled }),
            confirmed(joe.account_id, "@joe", "test", smuggled),
            confirmed(joe.account_id, "@joe", "test", { event: "transfer.failed", ...smuggled }),
            ...(["pending_approval", "approved", "rejected", "expired"] as const).map((state) => ({
              mode: "test" as const,
              recipientAccountId: joe.account_id,
              payload: { event: `agent.transaction.${state}`, ...transaction }
            }) as unknown as EventInput),
            {
              mode: "test",
              recipientAccountId: joe.account_id,
              payload: { event: "agent.policy.updated", account: "@joe/agent", agent: "@joe/agent", policy_id: "pol_1", ...smuggled }
            } as unknown as EventInput
          ]
          yield* appendEvents(server, inputs)
          const requests = yield* waitForRequests("/joe", 8)
          const events = new Set<string>()
          for (const request of requests) {
            const text = request.body.toString("utf8")
            events.add((JSON.parse(text) as { event: string }).event)
            for (const canary of [CANARY, MEMO_CANARY, "amount", "memo"]) assert.notInclude(text, canary)
          }
          assert.strictEqual(events.size, 8)
          const rows = yield* sqlOf(server)<{ payload: string }>`SELECT payload FROM events`.pipe(Effect.orDie)
          for (const row of rows) {
            assert.notInclude(row.payload, CANARY)
            assert.notInclude(row.payload, MEMO_CANARY)
          }
          for (const line of server.logs) {
            assert.notInclude(line, CANARY)
            assert.notInclude(line, MEMO_CANARY)
          }
        }))

      it.effect("D59: one subscription is read and changed (url, events, enabled); a disabled one gets nothing until enabled; failures carry their reason", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const kim = yield* createAccount(server, `wh-kimd59-${database.name}`)
          const handle = `@wh-kimd59-${database.name}`
          const created = yield* createWebhook(server, kim.api_key, "/fail-kimd59")
          const url = `${server.baseUrl}/v1/webhooks/${created.webhook_id}`
          const got = yield* send(url, { headers: bearer(kim.api_key) })
          assert.deepStrictEqual(got.json, { webhook_id: created.webhook_id, url: created.url, events: created.events, enabled: true, created_at: created.created_at })
          // A receiver answering 500: the delivery stays pending with `http_500`.
          yield* appendEvents(server, [confirmed(kim.account_id, handle)])
          yield* waitForRequests("/fail-kimd59", 1)
          const failed = yield* eventually(
            send(`${url}/deliveries`, { headers: bearer(kim.api_key) }).pipe(Effect.map((answer) => {
              const entry = (answer.json as { data: Array<{ status: string; failure_reason: string | null }> }).data[0]
              return entry?.failure_reason === "http_500" ? entry : undefined
            })),
            "the failed delivery's reason"
          )
          assert.strictEqual(failed.status, "pending")

          // Disabled: a new event makes no delivery; enabled with a new URL and events, the next one is delivered there.
          const disabled = yield* send(url, patchJson(bearer(kim.api_key), { enabled: false }))
          assert.strictEqual(disabled.status, 200, disabled.text)
          assert.isFalse((disabled.json as { enabled: boolean }).enabled)
          yield* appendEvents(server, [confirmed(kim.account_id, handle, "test", { transfer_id: "tr_while_disabled" })])
          yield* Effect.sleep("1 second")
          assert.isFalse(receiver.requests.some((request) => request.body.toString("utf8").includes("tr_while_disabled")))
          const moved = yield* send(url, patchJson(bearer(kim.api_key), {
            url: `${receiver.url}/kimd59`,
            events: ["transfer.confirmed", "transfer.failed"],
            enabled: true
          }))
          assert.deepStrictEqual(moved.json, {
            webhook_id: created.webhook_id,
            url: `${receiver.url}/kimd59`,
            events: ["transfer.confirmed", "transfer.failed"],
            enabled: true,
            created_at: created.created_at
          })
          yield* appendEvents(server, [confirmed(kim.account_id, handle, "test", { transfer_id: "tr_after_enable" })])
          const [delivered] = yield* waitForRequests("/kimd59", 1)
          verifyDelivery(delivered!, created.secret)
          assert.include(delivered!.body.toString("utf8"), "tr_after_enable")
          assert.isFalse(requestsTo("/kimd59").some((request) => request.body.toString("utf8").includes("tr_while_disabled")))

          // Refusals: a bad URL or event (400 with the param), another account's id (404).
          expectEnvelope(yield* send(url, patchJson(bearer(kim.api_key), { url: "https://10.0.0.8/x" })), 400, "invalid_request")
          const badEvents = expectEnvelope(yield* send(url, patchJson(bearer(kim.api_key), { events: ["nope"] })), 400, "invalid_request")
          assert.strictEqual(badEvents.param, "events.0")
          const stranger = yield* createAccount(server, `wh-stranger-${database.name}`)
          expectEnvelope(yield* send(url, { headers: bearer(stranger.api_key) }), 404, "webhook_not_found")
          expectEnvelope(yield* send(url, patchJson(bearer(stranger.api_key), { enabled: false })), 404, "webhook_not_found")
        }))

      it.effect("D59: GET /v1/events lists the account's events newest first in Stripe's shape, and GET /v1/events/{id} reads one; no amounts", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const lea = yield* createAccount(server, `wh-leander-${database.name}`)
          const handle = `@wh-leander-${database.name}`
          const stored = yield* appendEvents(server, [
            confirmed(lea.account_id, handle, "test", { transfer_id: "tr_lea_1" }),
            confirmed(lea.account_id, handle, "test", { transfer_id: "tr_lea_2" }),
            confirmed(lea.account_id, handle, "live", { transfer_id: "tr_lea_live" })
          ])
          const listed = yield* send(`${server.baseUrl}/v1/events?limit=1`, { headers: bearer(lea.api_key) })
          assert.strictEqual(listed.status, 200, listed.text)
          const page = listed.json as { data: Array<Record<string, unknown>>; has_more: boolean; limit: number; offset: number }
          assert.strictEqual(page.has_more, true)
          assert.deepStrictEqual(page.data[0], {
            id: stored[1]!.eventId,
            object: "event",
            type: "transfer.confirmed",
            created_at: stored[1]!.createdAt,
            livemode: false,
            data: { object: JSON.parse(stored[1]!.payload) }
          })
          const all = yield* send(`${server.baseUrl}/v1/events?type=transfer.confirmed`, { headers: bearer(lea.api_key) })
          assert.deepStrictEqual((all.json as { data: Array<{ id: string }> }).data.map((event) => event.id), [stored[1]!.eventId, stored[0]!.eventId])
          const none = yield* send(`${server.baseUrl}/v1/events?type=transfer.failed`, { headers: bearer(lea.api_key) })
          assert.deepStrictEqual((none.json as { data: Array<unknown> }).data, [])
          expectEnvelope(yield* send(`${server.baseUrl}/v1/events?type=nope`, { headers: bearer(lea.api_key) }), 400, "invalid_request")
          const one = yield* send(`${server.baseUrl}/v1/events/${stored[0]!.eventId}`, { headers: bearer(lea.api_key) })
          assert.strictEqual((one.json as { id: string }).id, stored[0]!.eventId)
          // The live event is not the test key's; another account's is not found either.
          expectEnvelope(yield* send(`${server.baseUrl}/v1/events/${stored[2]!.eventId}`, { headers: bearer(lea.api_key) }), 404, "event_not_found")
          const stranger = yield* createAccount(server, `wh-leander-stranger-${database.name}`)
          expectEnvelope(yield* send(`${server.baseUrl}/v1/events/${stored[0]!.eventId}`, { headers: bearer(stranger.api_key) }), 404, "event_not_found")
          assert.notInclude(all.text, "amount")
        }))
    })

    // D59: loopback closed by configuration, opened per account by the operator, without a restart.
    layer(makeTestServer({ database, config: { webhookAllowInsecureLoopback: false, port: 18_480 } }), {
      timeout: "60 seconds",
      excludeTestServices: true
    })(`${database.name}, loopback closed`, (it) => {
      it.effect("D59: the refusal names the operator's grant; once granted, a loopback receiver gets deliveries, never on the service's own port", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const local = yield* startPlainReceiver
          const max = yield* createAccount(server, `wh-max-${database.name}`)
          const body = { url: `${local.url}/hook`, events: ["transfer.confirmed"] }
          const refused = expectEnvelope(yield* send(`${server.baseUrl}/v1/webhooks`, postJson(bearer(max.api_key), body)), 400, "invalid_request")
          assert.include(refused.message, `webhook-loopback allow --account ${max.account_id} --mode test`)
          const grant = (allowed: boolean) =>
            send(`${server.adminUrl}/admin/accounts/${max.account_id}/webhook-loopback`, postJson(bearer(server.adminToken), { mode: "test", allowed }))
          assert.deepStrictEqual((yield* grant(true)).json, { account_id: max.account_id, mode: "test", allowed: true })
          const created = yield* send(`${server.baseUrl}/v1/webhooks`, postJson(bearer(max.api_key), body))
          assert.strictEqual(created.status, 201, created.text)
          // The service's own port (PORT) stays refused.
          const own = expectEnvelope(
            yield* send(`${server.baseUrl}/v1/webhooks`, postJson(bearer(max.api_key), { ...body, url: "http://127.0.0.1:18480/hook" })),
            400,
            "invalid_request"
          )
          assert.include(own.message, "port of this service")
          yield* appendEvents(server, [confirmed(max.account_id, `@wh-max-${database.name}`)])
          yield* eventually(Effect.sync(() => local.bodies.length >= 1 ? true : undefined), "a delivery to the loopback receiver")
          // Withdrawn: the next attempt is refused as SSRF, and the delivery says so.
          yield* grant(false)
          yield* appendEvents(server, [confirmed(max.account_id, `@wh-max-${database.name}`, "test", { transfer_id: "tr_after_withdrawal" })])
          const webhookId = (created.json as { webhook_id: string }).webhook_id
          yield* eventually(
            send(`${server.baseUrl}/v1/webhooks/${webhookId}/deliveries`, { headers: bearer(max.api_key) }).pipe(
              Effect.map((answer) => (answer.json as { data: Array<{ failure_reason: string | null }> }).data.some((entry) => entry.failure_reason === "ssrf_refused") ? true : undefined)
            ),
            "the refused attempt's reason"
          )
          assert.strictEqual(local.bodies.length, 1)
        }).pipe(Effect.scoped))
    })
  })
