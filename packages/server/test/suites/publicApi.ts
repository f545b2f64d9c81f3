/**
 * The public listener over a real socket, on either database: authentication
 * (D8), the account record, and D1/D2's envelope on every error path the
 * foundation owns (404, 405, 413, 400 for bodies, 429, 500-free faults).
 */
import { assert, describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { Authorization, Idempotency, RequestValidation } from "@pps/api/Api"
import { AuthorizationLive } from "../../src/http/Authorization.ts"
import { IdempotencyLive } from "../../src/http/Idempotency.ts"
import { RequestValidationLive } from "../../src/http/RequestValidation.ts"
import { AccountRecord } from "@pps/api/Accounts"
import { bearer, createAccount, expectEnvelope, postJson, send } from "../support/http.ts"
import { type DatabaseTarget, makeTestServer, TestServer } from "../support/TestServer.ts"

/** A test-only POST endpoint that goes through the real Authorization and Idempotency middleware. */
let echoCalls = 0
class EchoGroup extends HttpApiGroup.make("echo")
  .add(
    HttpApiEndpoint.post("echo", "/v1/test-echo", {
      payload: Schema.Struct({ value: Schema.String }),
      success: Schema.Struct({ value: Schema.String, call: Schema.Number })
    }).middleware(Idempotency)
  )
  .middleware(Authorization)
{}
class EchoApi extends HttpApi.make("echo").add(EchoGroup).middleware(RequestValidation) {}
const EchoLive = HttpApiBuilder.layer(EchoApi).pipe(
  Layer.provide(HttpApiBuilder.group(EchoApi, "echo", (handlers) =>
    handlers.handle("echo", ({ payload }) =>
      Effect.suspend(() => Effect.sleep("50 millis").pipe(Effect.as({ value: payload.value, call: ++echoCalls }))))
  )),
  Layer.provide([AuthorizationLive, RequestValidationLive, IdempotencyLive])
)

/**
 * The public API suite, run against one database target.
 */
export const publicApiSuite = (database: DatabaseTarget) => {
describe("public API", () => {
  layer(makeTestServer({ database, extraPublic: EchoLive }), { timeout: "60 seconds", excludeTestServices: true })(database.name, (it) => {
    it.effect("GET /v1/accounts/me returns SPEC's account record for the key's account", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const created = yield* createAccount(server, "Carol.Example")
        const response = yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(created.api_key) })
        assert.strictEqual(response.status, 200)
        const account = Schema.decodeUnknownSync(AccountRecord)(response.json)
        assert.strictEqual(account.account_id, created.account_id)
        assert.strictEqual(account.handle, "@carol.example")
        assert.strictEqual(account.type, "personal")
        assert.strictEqual(account.kyc_status, "verified")
        assert.match(account.public_key, /^0x[0-9a-fA-F]{40}$/)
        assert.match(account.created_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
        assert.match(account.account_id, /^acct_[0-9A-Z]{26}$/)
        assert.match(response.headers.get("x-request-id") ?? "", /^req_[0-9A-Z]{26}$/)
      }))

    it.effect("a missing, malformed, unknown, wrong-scheme or revoked key answers 401 unauthorized", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const me = `${server.baseUrl}/v1/accounts/me`
        expectEnvelope(yield* send(me), 401, "unauthorized")
        expectEnvelope(yield* send(me, { headers: bearer("not-a-key") }), 401, "unauthorized")
        expectEnvelope(yield* send(me, { headers: bearer("hc_test_" + "A".repeat(43)) }), 401, "unauthorized")
        expectEnvelope(yield* send(me, { headers: bearer("hc_prod_" + "A".repeat(43)) }), 401, "unauthorized")
        const created = yield* createAccount(server, "dave")
        expectEnvelope(yield* send(me, { headers: { authorization: `Basic ${created.api_key}` } }), 401, "unauthorized")
        // Warm the cache with a success, then revoke: the very next request is refused.
        assert.strictEqual((yield* send(me, { headers: bearer(created.api_key) })).status, 200)
        const revoke = yield* send(`${server.adminUrl}/admin/keys/${created.key_id}/revoke`, {
          method: "POST",
          headers: bearer(server.adminToken)
        })
        assert.strictEqual(revoke.status, 200)
        expectEnvelope(yield* send(me, { headers: bearer(created.api_key) }), 401, "unauthorized")
      }))

    it.effect("unknown path 404 not_found, wrong method 405 method_not_allowed with Allow", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        expectEnvelope(yield* send(`${server.baseUrl}/v1/nothing-here`), 404, "not_found")
        expectEnvelope(yield* send(`${server.baseUrl}/v2/accounts/me`), 404, "not_found")
        const wrongMethod = yield* send(`${server.baseUrl}/v1/accounts/me`, { method: "DELETE" })
        expectEnvelope(wrongMethod, 405, "method_not_allowed")
        assert.strictEqual(wrongMethod.headers.get("allow"), "GET")
      }))

    it.effect("a body over 64 KiB answers 413 payload_too_large, announced or streamed", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const created = yield* createAccount(server, "erin")
        const big = JSON.stringify({ value: "x".repeat(70 * 1024) })
        expectEnvelope(
          yield* send(`${server.baseUrl}/v1/test-echo`, {
            method: "POST",
            headers: { ...bearer(created.api_key), "content-type": "application/json" },
            body: big
          }),
          413,
          "payload_too_large"
        )
        // Without Content-Length (chunked), the limit is enforced while reading.
        const chunked = yield* Effect.promise(() =>
          fetch(`${server.baseUrl}/v1/test-echo`, {
            method: "POST",
            headers: { ...bearer(created.api_key), "content-type": "application/json" },
            body: new ReadableStream({
              start(controller) {
                controller.enqueue(new TextEncoder().encode(big))
                controller.close()
              }
            }),
            duplex: "half"
          } as RequestInit).then(async (r) => ({ status: r.status, body: await r.json() as unknown }))
        )
        assert.strictEqual(chunked.status, 413)
        expect(chunked.body).toMatchObject({ error: { code: "payload_too_large" } })
      }))

    it.effect("bodies that are not JSON, or not sent as JSON, answer 400 invalid_request", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const created = yield* createAccount(server, "frank")
        const url = `${server.baseUrl}/v1/test-echo`
        expectEnvelope(
          yield* send(url, { method: "POST", headers: { ...bearer(created.api_key), "content-type": "text/plain" }, body: "{}" }),
          400,
          "invalid_request"
        )
        expectEnvelope(
          yield* send(url, { method: "POST", headers: { ...bearer(created.api_key), "content-type": "application/json" }, body: "{nope" }),
          400,
          "invalid_request"
        )
        const missing = expectEnvelope(
          yield* send(url, postJson(bearer(created.api_key), {})),
          400,
          "invalid_request"
        )
        assert.strictEqual(missing.param, "value")
        const wrongType = expectEnvelope(
          yield* send(url, postJson(bearer(created.api_key), { value: 12345.678 })),
          400,
          "invalid_request"
        )
        assert.strictEqual(wrongType.param, "value")
        // The message names the field, never the rejected value.
        assert.notInclude(wrongType.message, "12345")
      }))

    it.effect("Idempotency-Key: replay with the first response, 409 on reuse and while in progress (D6)", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const created = yield* createAccount(server, "grace")
        const other = yield* createAccount(server, "heidi")
        const url = `${server.baseUrl}/v1/test-echo`
        const post = (key: string, idempotencyKey: string, value: string) =>
          send(url, {
            method: "POST",
            headers: { ...bearer(key), "idempotency-key": idempotencyKey, "content-type": "application/json" },
            body: JSON.stringify({ value })
          })
        const first = yield* post(created.api_key, "k-1", "a")
        assert.strictEqual(first.status, 200)
        assert.strictEqual(first.headers.get("idempotent-replayed"), null)
        const replay = yield* post(created.api_key, "k-1", "a")
        assert.strictEqual(replay.status, 200)
        assert.strictEqual(replay.headers.get("idempotent-replayed"), "true")
        assert.deepStrictEqual(replay.json, first.json)
        expectEnvelope(yield* post(created.api_key, "k-1", "b"), 409, "idempotency_key_reused")
        // Keys are scoped to the account: another account's k-1 runs afresh.
        const otherFirst = yield* post(other.api_key, "k-1", "a")
        assert.strictEqual(otherFirst.headers.get("idempotent-replayed"), null)
        assert.notDeepEqual(otherFirst.json, first.json)
        // Two at once with a new key: one runs, the other is told it is in progress.
        const both = yield* Effect.all([post(created.api_key, "k-2", "c"), post(created.api_key, "k-2", "c")], {
          concurrency: 2
        })
        const statuses = both.map((r) => r.status).sort()
        assert.deepStrictEqual(statuses, [200, 409])
        expectEnvelope(both.find((r) => r.status === 409)!, 409, "idempotency_key_in_progress")
        // Many at once, claimed together (one INSERT for the claims of a turn): one of six with
        // the same key runs, the others are in progress or (once it answered) its replay; each of
        // six distinct keys runs once.
        const burst = yield* Effect.all(
          [
            ...Array.from({ length: 6 }, () => post(created.api_key, "k-3", "e")),
            ...Array.from({ length: 6 }, (_, index) => post(created.api_key, `k-4-${index}`, "f"))
          ],
          { concurrency: "unbounded" }
        )
        const sameKey = burst.slice(0, 6)
        const ran = sameKey.filter((r) => r.status === 200 && r.headers.get("idempotent-replayed") === null)
        assert.strictEqual(ran.length, 1)
        for (const other of sameKey.filter((r) => r !== ran[0])) {
          if (other.status === 409) expectEnvelope(other, 409, "idempotency_key_in_progress")
          else assert.deepStrictEqual([other.status, other.headers.get("idempotent-replayed"), other.json], [200, "true", ran[0]!.json])
        }
        assert.deepStrictEqual(burst.slice(6).map((r) => r.status), [200, 200, 200, 200, 200, 200])
        expectEnvelope(yield* post(created.api_key, "x".repeat(256), "d"), 400, "invalid_request")
      }))

    it.effect("OpenAPI 3.1 at /v1/openapi.json lists the error responses", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const response = yield* send(`${server.baseUrl}/v1/openapi.json`)
        assert.strictEqual(response.status, 200)
        expect(response.json).toMatchObject({ openapi: "3.1.0" })
        const doc = response.json as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> }
        const me = doc.paths["/v1/accounts/me"]?.["get"]
        assert.isDefined(me)
        for (const status of ["200", "400", "401", "413", "429", "500"]) {
          assert.property(me!.responses, status, `GET /v1/accounts/me should document ${status}`)
        }
        // The same document, served as a reference page (self-hosted: no CDN), without a key.
        const page = yield* send(`${server.baseUrl}/v1/docs`)
        assert.strictEqual(page.status, 200)
        assert.match(page.headers.get("content-type") ?? "", /^text\/html/)
        assert.include(page.text, "Private Payments Service")
        assert.notMatch(page.text, /<script[^>]*\ssrc=/, "no script from elsewhere")
        // Its script may make no request (a dashboard session rides on this origin), nor frame it.
        const policy = page.headers.get("content-security-policy") ?? ""
        for (const directive of ["default-src 'none'", "connect-src 'none'", "form-action 'none'", "frame-ancestors 'none'"]) {
          assert.include(policy, directive)
        }
        assert.strictEqual(page.headers.get("x-frame-options"), "DENY")
        // /v1 answers are never cached and never sniffed; health checks outside /v1 are untouched.
        for (const answer of [response, yield* send(`${server.baseUrl}/v1/accounts/me`)]) {
          assert.strictEqual(answer.headers.get("cache-control"), "no-store")
          assert.strictEqual(answer.headers.get("x-content-type-options"), "nosniff")
        }
        assert.isNull((yield* send(`${server.baseUrl}/healthz`)).headers.get("x-content-type-options"))
      }))

    it.effect("healthz and readyz answer outside /v1 with a request id", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const health = yield* send(`${server.baseUrl}/healthz`)
        assert.strictEqual(health.status, 200)
        const ready = yield* send(`${server.baseUrl}/readyz`)
        assert.strictEqual(ready.status, 200)
        expect(ready.json).toMatchObject({ status: "ok", checks: { database: "ok" } })
        assert.match(ready.headers.get("x-request-id") ?? "", /^req_/)
      }))
  })
})

describe("rate limit (D7)", () => {
  layer(makeTestServer({ database, config: { rateLimitPerSecond: 1, rateLimitBurst: 2 } }), { timeout: "60 seconds", excludeTestServices: true })(database.name, (it) => {
    it.effect("past the burst a key gets 429 rate_limited with Retry-After; other keys are unaffected", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const created = yield* createAccount(server, "ivan")
        const other = yield* createAccount(server, "judy")
        const me = `${server.baseUrl}/v1/accounts/me`
        assert.strictEqual((yield* send(me, { headers: bearer(created.api_key) })).status, 200)
        assert.strictEqual((yield* send(me, { headers: bearer(created.api_key) })).status, 200)
        const limited = yield* send(me, { headers: bearer(created.api_key) })
        expectEnvelope(limited, 429, "rate_limited")
        assert.isAtLeast(Number(limited.headers.get("retry-after")), 1)
        assert.strictEqual((yield* send(me, { headers: bearer(other.api_key) })).status, 200)
      }))
  })
})
}
