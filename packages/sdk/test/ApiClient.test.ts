/**
 * The client derived from the contract, against the real server (child process, embedded
 * PGlite, anvil and guardian): every operation of the contract is a method; answers are
 * decoded by the wire schemas (numbers where the contract has numbers); declared errors
 * arrive as the contract's error classes with D1's body and a request id; a 503 is
 * retried after its Retry-After with the same Idempotency-Key, and the POST takes
 * effect once. The live event stream (server-sent events) is read as a typed `Stream` of
 * payloads and resumes after an event id.
 */
import { PublicApi } from "@pps/api/Api"
import type { EventPayload } from "@pps/api/Events"
import { summaries } from "@pps/api/OpenApiDocument"
import { EncryptionKey } from "@pps/crypto"
import { Effect, Stream } from "effect"
import { HttpApi } from "effect/http-api"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Client from "../src/Client.ts"
import * as Confidential from "../src/Confidential.ts"
import { ApiClient } from "../src/index.ts"
import { startHop } from "./support/hop.ts"
import { type ServerProcess, startServer } from "./support/server.ts"

let server: ServerProcess
let alice: { readonly account_id: string; readonly api_key: string }

beforeAll(async () => {
  server = await startServer()
  alice = await server.createAccount("carol")
  const dave = await server.createAccount("dave")
  // A transfer needs both parties' encryption keys (registered here with the facade's module).
  await Confidential.registerKey(Client.make({ baseUrl: server.baseUrl, apiKey: alice.api_key }), EncryptionKey.generate())
  await Confidential.registerKey(Client.make({ baseUrl: server.baseUrl, apiKey: dave.api_key }), EncryptionKey.generate())
}, 120_000)

afterAll(async () => {
  await server?.stop()
}, 30_000)

const run = <A, E>(
  baseUrl: string,
  apiKey: string,
  program: (client: ApiClient.Client) => Effect.Effect<A, E>,
  options: Partial<ApiClient.Options> = {}
) =>
  Effect.runPromise(
    Effect.gen(function*() {
      return yield* program(yield* ApiClient.ApiClient)
    }).pipe(Effect.provide(ApiClient.layer({ ...options, apiKey, baseUrl })))
  )

describe("ApiClient", { timeout: 60_000 }, () => {
  it("has a method for every operation of the contract", async () => {
    const operations: Array<string> = []
    HttpApi.reflect(PublicApi, {
      onGroup: () => {},
      onEndpoint: ({ group, endpoint }) => operations.push(`${group.identifier}.${endpoint.identifier}`)
    })
    expect(operations.length).toBeGreaterThan(20)
    expect(operations.sort()).toEqual(Object.keys(summaries).sort())
    await run(server.baseUrl, alice.api_key, (client) =>
      Effect.sync(() => {
        for (const operation of operations) {
          const [group, endpoint] = operation.split(".") as [string, string]
          expect(typeof (client as unknown as Record<string, Record<string, unknown>>)[group]?.[endpoint], operation).toBe("function")
        }
      }))
  })

  it("reads, creates, pages and deletes with the contract's types", async () => {
    await run(server.baseUrl, alice.api_key, (client) =>
      Effect.gen(function*() {
        const me = yield* client.accounts.me()
        expect(me).toMatchObject({ account_id: alice.account_id, handle: "@carol", kyc_status: "verified" })
        yield* client.test.faucet({ payload: { amount: "5" } })
        const transfer = yield* client.transfers.create({ payload: { to: "@dave", amount: "1.25", confidential: false } })
        expect(transfer).toMatchObject({ status: "confirmed", to: "@dave", confidential: false })
        const page = yield* client.transfers.list({ query: { limit: 1, status: "confirmed" } })
        expect(page).toMatchObject({ limit: 1, offset: 0 })
        expect(page.data).toHaveLength(1)
        const webhook = yield* client.webhooks.create({ payload: { url: "https://example.com/derived", events: ["transfer.confirmed"] } })
        expect(webhook.secret).toMatch(/^whsec_/)
        // `limit` is a number here: the contract decodes it from the query string.
        const deliveries = yield* client.webhooks.deliveries({ params: { webhook_id: webhook.webhook_id }, query: { limit: 5 } })
        expect(deliveries).toMatchObject({ limit: 5, offset: 0, has_more: false })
        yield* client.webhooks.remove({ params: { webhook_id: webhook.webhook_id } })
        const listed = yield* client.webhooks.list()
        expect(listed.data.map((entry) => entry.webhook_id)).not.toContain(webhook.webhook_id)
      }))
  })

  it("fails with the contract's error classes, D1's body and the request id", async () => {
    const [missingTransfer, missingWebhook, refused] = await run(server.baseUrl, alice.api_key, (client) =>
      Effect.all([
        Effect.flip(client.transfers.get({ params: { transfer_id: "tr_01JZZZZZZZZZZZZZZZZZZZZZZZ" } })),
        Effect.flip(client.webhooks.remove({ params: { webhook_id: "wh_01JZZZZZZZZZZZZZZZZZZZZZZZ" } })),
        Effect.flip(client.transfers.create({ payload: { to: "@dave", amount: "1000000", confidential: false } }))
      ]))
    expect(missingTransfer._tag).toBe("TransferNotFound")
    expect(missingWebhook._tag).toBe("WebhookNotFound")
    expect(refused._tag).toBe("InsufficientBalance")
    if (refused._tag !== "InsufficientBalance") return
    expect(refused.error.code).toBe("insufficient_balance")
    expect(refused.error.request_id).toMatch(/^req_/)
    expect(refused.message).toBe(refused.error.message)

    const unauthorized = await run(server.baseUrl, "hc_test_nope", (client) => Effect.flip(client.accounts.me()))
    expect(unauthorized._tag).toBe("Unauthorized")
  })

  it("with the caller's Idempotency-Key, the same POST again answers the first outcome", async () => {
    const create = (client: ApiClient.Client) =>
      client.webhooks.create({ payload: { url: "https://example.com/keyed", events: ["transfer.confirmed"] } }).pipe(
        ApiClient.withIdempotencyKey("derived-webhook-1")
      )
    const first = await run(server.baseUrl, alice.api_key, create)
    const again = await run(server.baseUrl, alice.api_key, create)
    expect(again.webhook_id).toBe(first.webhook_id)
    const listed = await run(server.baseUrl, alice.api_key, (client) => client.webhooks.list())
    expect(listed.data.filter((entry) => entry.url === "https://example.com/keyed")).toHaveLength(1)
  })

  it("retries a 503 after its Retry-After with the same Idempotency-Key; the POST takes effect once", async () => {
    const hop = await startHop(server.baseUrl, (request) => request.method === "POST" && request.path === "/v1/webhooks")
    try {
      const started = Date.now()
      const webhook = await run(hop.baseUrl, alice.api_key, (client) =>
        client.webhooks.create({ payload: { url: "https://example.com/retried", events: ["transfer.failed"] } }))
      expect(Date.now() - started).toBeGreaterThanOrEqual(1_000)
      const creates = hop.seen.filter((request) => request.method === "POST" && request.path === "/v1/webhooks")
      expect(creates).toHaveLength(2)
      expect(creates[0]?.key).toMatch(/^pps_/)
      expect(creates[1]?.key).toBe(creates[0]?.key)
      const listed = await run(server.baseUrl, alice.api_key, (client) => client.webhooks.list())
      expect(listed.data.filter((entry) => entry.url === "https://example.com/retried").map((entry) => entry.webhook_id)).toEqual([webhook.webhook_id])
    } finally {
      await hop.close()
    }
  })

  it("gives up on an attempt that gets no answer and retries it with the same Idempotency-Key", async () => {
    const hop = await startHop(server.baseUrl, (request) => request.method === "POST" && request.path === "/v1/webhooks", { stall: true })
    try {
      const started = Date.now()
      const webhook = await run(hop.baseUrl, alice.api_key, (client) =>
        client.webhooks.create({ payload: { url: "https://example.com/stalled", events: ["transfer.confirmed"] } }), { attemptTimeoutMs: 500 })
      expect(Date.now() - started).toBeGreaterThanOrEqual(500)
      expect(webhook.webhook_id).toMatch(/^wh_/)
      const creates = hop.seen.filter((request) => request.method === "POST" && request.path === "/v1/webhooks")
      expect(creates).toHaveLength(2)
      expect(creates[1]?.key).toBe(creates[0]?.key)
    } finally {
      await hop.close()
    }
  })

  it("reads the live event stream as a typed Stream of payloads, and resumes after an event id", async () => {
    /** The first event of a transfer on a stream; events are streamed a settle window (2 s) after they are recorded. */
    const firstEventOf = <E>(events: Stream.Stream<EventPayload, E>, transferId: string | null) =>
      events.pipe(
        Stream.filter((event) => "transfer_id" in event && event.transfer_id === transferId),
        Stream.runHead,
        Effect.flatMap((head) => head._tag === "Some" ? Effect.succeed(head.value) : Effect.die(new Error("the stream ended"))),
        Effect.timeout("20 seconds")
      )
    const [first, resumed] = await run(server.baseUrl, alice.api_key, (client) =>
      Effect.gen(function*() {
        yield* client.test.faucet({ payload: { amount: "2" } })
        // Open (its answer's headers are in) before the transfer exists: without a cursor a
        // stream starts now.
        const live = yield* client.events.stream({ query: {}, headers: {} })
        const transfer = yield* client.transfers.create({ payload: { to: "@dave", amount: "0.5", confidential: false } })
        const first = yield* firstEventOf(live, transfer.transfer_id)
        // A transfer made while no stream is open arrives on a stream resumed after the first
        // event (a stream opened without the header would start after it and never see it).
        const later = yield* client.transfers.create({ payload: { to: "@dave", amount: "0.25", confidential: false } })
        const again = yield* client.events.stream({ query: {}, headers: { "last-event-id": first.id } })
        return [first, yield* firstEventOf(again, later.transfer_id)] as const
      }))
    expect(first).toMatchObject({ event: expect.stringMatching(/^transfer\./), direction: "sent", account: "@carol" })
    expect(first.id).toMatch(/^evt_/)
    expect(resumed).toMatchObject({ event: expect.stringMatching(/^transfer\./), direction: "sent" })
    expect(resumed.id > first.id).toBe(true)
  })
})
