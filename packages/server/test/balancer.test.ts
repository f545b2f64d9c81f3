/**
 * The deployment's balancer, HAProxy on the configuration `npm run cluster` and compose run
 * (scripts/cluster/haproxy.ts), over TLS on loopback:
 *
 * - in front of two HTTP upstreams that echo what reached them: it alternates between healthy
 *   nodes and names the one that answered; it carries the client's address in
 *   `X-Forwarded-For` and `X-Forwarded-Proto: https`; it keeps its connections to the nodes
 *   alive; a node that refuses connections, from the start or since its last health check,
 *   is skipped without the client noticing; a node that fails after receiving a request is not
 *   sent it again (the client gets 503 `service_unavailable` with `Retry-After` in D1's
 *   envelope and retries with its Idempotency-Key); with no node in, it answers that 503 and
 *   its `/healthz` 503;
 * - in front of a real server whose TRUSTED_PROXIES names the balancer alone (its own loopback
 *   source address, as in `npm run cluster`): the server's per-client limit (dashboard sign-in
 *   steps) sees each client's own address, a client cannot move to another bucket by writing
 *   `X-Forwarded-For` itself, and a local process that reaches the server directly is not
 *   believed when it writes one.
 */
import * as fs from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it, layer } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { ensureCertificate } from "../scripts/cluster/cluster.ts"
import { freePort } from "../scripts/cluster/processGroups.ts"
import { haproxyAvailable, startBalancer, type TestBalancer } from "./support/haproxy.ts"
import { makeTestServer, TestServer } from "./support/TestServer.ts"

interface Upstream {
  readonly name: string
  readonly port: number
  /** Requests it received, by path. */
  readonly received: Array<string>
  /** TCP connections it accepted (health checks included). */
  readonly connections: () => number
  readonly close: () => Promise<void>
}

/** A node that answers /readyz 200, drops the connection on /v1/die, and echoes what reached it otherwise. */
const startUpstream = async (name: string): Promise<Upstream> => {
  const received: Array<string> = []
  let connections = 0
  const server = http.createServer((request, response) => {
    if (request.url === "/readyz") {
      response.end("{}")
      return
    }
    received.push(request.url ?? "")
    if (request.url === "/v1/die") {
      request.socket.destroy()
      return
    }
    request.resume()
    request.on("end", () => {
      response.writeHead(200, { "content-type": "application/json" })
      response.end(JSON.stringify({
        node: name,
        forwardedFor: request.headers["x-forwarded-for"] ?? null,
        forwardedProto: request.headers["x-forwarded-proto"] ?? null
      }))
    })
  })
  server.on("connection", () => connections++)
  const port = await freePort()
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve))
  return {
    name,
    port,
    received,
    connections: () => connections,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      })
  }
}

const upstreamOf = (upstream: { readonly name: string; readonly port: number }) => ({ name: upstream.name, host: "127.0.0.1", port: upstream.port })

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-balancer-"))
const tls = ensureCertificate(path.join(dir, "tls"))
const ca = fs.readFileSync(tls.cert)

interface Answer {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly json: unknown
}

/** One exchange through the balancer over TLS on a connection of its own, trusting its certificate only. */
const call = (port: number, method: string, pathname: string, options: { readonly body?: string; readonly headers?: Record<string, string>; readonly localAddress?: string } = {}) =>
  new Promise<Answer>((resolve, reject) => {
    const request = https.request({
      host: "127.0.0.1",
      port,
      method,
      path: pathname,
      ca,
      servername: "localhost",
      agent: false,
      headers: options.headers ?? {},
      ...(options.localAddress === undefined ? {} : { localAddress: options.localAddress })
    }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        let json: unknown = text
        try {
          json = JSON.parse(text)
        } catch {
          // not JSON (HAProxy's monitor page)
        }
        resolve({ status: response.statusCode ?? 0, headers: response.headers, json })
      })
    })
    request.on("error", reject)
    request.end(options.body ?? "")
  })

const Envelope = Schema.Struct({
  error: Schema.Struct({ code: Schema.Literal("service_unavailable"), message: Schema.String, request_id: Schema.String })
})

/** D1's 503: envelope, the request id in the body and in X-Request-Id, and Retry-After. */
const assertUnavailable = (answer: Answer) => {
  assert.strictEqual(answer.status, 503, JSON.stringify(answer.json))
  assert.strictEqual(answer.headers["retry-after"], "1")
  const envelope = Schema.decodeUnknownSync(Envelope)(answer.json)
  assert.match(envelope.error.request_id, /^req_[0-9a-f]{32}$/)
  assert.strictEqual(answer.headers["x-request-id"], envelope.error.request_id)
}

const echoed = (answer: Answer) =>
  Schema.decodeUnknownSync(Schema.Struct({ node: Schema.String, forwardedFor: Schema.NullOr(Schema.String), forwardedProto: Schema.NullOr(Schema.String) }))(answer.json)

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

describe.skipIf(!haproxyAvailable)("HAProxy in front of two nodes", () => {
  let first: Upstream
  let second: Upstream
  let balancer: TestBalancer

  beforeAll(async () => {
    first = await startUpstream("first")
    second = await startUpstream("second")
    balancer = await startBalancer({ dir, pemFile: tls.pem, upstreams: [upstreamOf(first), upstreamOf(second)] })
  })

  afterAll(async () => {
    await balancer?.kill()
    await first?.close()
    await second?.close()
  })

  it("alternates between the healthy nodes and names the one that answered", async () => {
    const served = []
    for (let index = 0; index < 4; index++) {
      const answer = await call(balancer.port, "POST", "/v1/transfers", { body: "{}" })
      assert.strictEqual(answer.status, 200)
      assert.strictEqual(echoed(answer).node, answer.headers["x-served-by"])
      served.push(answer.headers["x-served-by"])
    }
    assert.sameMembers([...new Set(served)], ["first", "second"])
  })

  it("carries the client's address in X-Forwarded-For (to the right of what the client wrote) and X-Forwarded-Proto: https", async () => {
    const answer = await call(balancer.port, "GET", "/v1/accounts/me", { localAddress: "127.0.0.2", headers: { "x-forwarded-for": "198.51.100.7", "x-forwarded-proto": "http" } })
    const seen = echoed(answer)
    assert.strictEqual(seen.forwardedFor, "198.51.100.7, 127.0.0.2")
    assert.strictEqual(seen.forwardedProto, "https")
  })

  it("keeps its connections to the nodes alive: 40 clients, one request each, far fewer node connections", async () => {
    const before = first.connections() + second.connections()
    for (let index = 0; index < 40; index++) assert.strictEqual((await call(balancer.port, "GET", "/v1/accounts/me")).status, 200)
    const opened = first.connections() + second.connections() - before
    // Health checks open one a second per node; the 40 requests add a few at most.
    assert.isBelow(opened, 20, `${opened} connections to the nodes for 40 requests`)
  })

  it("a node that fails after receiving a request is not sent it again: 503 with Retry-After in D1's envelope", async () => {
    const before = first.received.length + second.received.length
    assertUnavailable(await call(balancer.port, "POST", "/v1/die", { body: "{}" }))
    // Exactly one node saw it.
    assert.strictEqual(first.received.length + second.received.length - before, 1)
  })

  it("a node that dies between health checks: its refused connection sends the request to the next node", async () => {
    const doomed = await startUpstream("doomed")
    const pair = await startBalancer({ dir, pemFile: tls.pem, upstreams: [upstreamOf(doomed), upstreamOf(second)] })
    try {
      // Both are in; the next health check is up to a second away.
      await doomed.close()
      for (let index = 0; index < 4; index++) {
        const answer = await call(pair.port, "POST", "/v1/transfers", { body: "{}" })
        assert.strictEqual(answer.status, 200)
        assert.strictEqual(answer.headers["x-served-by"], "second")
      }
      assert.deepStrictEqual(doomed.received, [])
    } finally {
      await pair.kill()
    }
  })

  it("skips a node that refuses connections, without the client noticing", async () => {
    const withDead = await startBalancer({ dir, pemFile: tls.pem, upstreams: [{ name: "dead", host: "127.0.0.1", port: await freePort() }, upstreamOf(second)] })
    try {
      for (let index = 0; index < 4; index++) {
        const answer = await call(withDead.port, "POST", "/v1/transfers", { body: "{}" })
        assert.strictEqual(answer.status, 200)
        assert.strictEqual(answer.headers["x-served-by"], "second")
      }
    } finally {
      await withDead.kill()
    }
  })

  it("with no node in: 503 with Retry-After in D1's envelope, and /healthz 503", async () => {
    const alone = await startBalancer({ dir, pemFile: tls.pem, upstreams: [{ name: "dead", host: "127.0.0.1", port: await freePort() }], untilHealthy: false })
    try {
      const refused = await call(alone.port, "POST", "/v1/transfers", { body: "{}" })
      assertUnavailable(refused)
      // The id it answered is in its log, for the operator the client quotes it to.
      await new Promise((resolve) => setTimeout(resolve, 200))
      assert.include(alone.output(), String(refused.headers["x-request-id"]))
      assertUnavailable(await call(alone.port, "GET", "/healthz"))
      assert.strictEqual((await fetch(`http://127.0.0.1:${alone.healthPort}/healthz`)).status, 503)
    } finally {
      await alone.kill()
    }
  })
})

describe.skipIf(!haproxyAvailable)("HAProxy in front of a server that trusts it", () => {
  const origin = "https://localhost:8443"
  const balancerSource = "127.0.0.2"
  layer(makeTestServer({ config: { dashboardOrigin: origin, trustedProxies: [balancerSource] } }), { timeout: "120 seconds", excludeTestServices: true })("X-Forwarded-For", (it) => {
    it.effect("each client behind the balancer has its own sign-in bucket, whatever X-Forwarded-For it writes", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const upstream = { name: "api-1", host: "127.0.0.1", port: Number(new URL(server.baseUrl).port) }
        const balancer = yield* Effect.acquireRelease(
          Effect.promise(() => startBalancer({ dir, pemFile: tls.pem, upstreams: [upstream], sourceAddress: balancerSource })),
          (running) => Effect.promise(() => running.kill())
        )
        // Clients on loopback addresses of their own; the balancer reaches the server from its own.
        const attempt = (localAddress: string, forwardedFor: string) =>
          Effect.promise(() =>
            call(balancer.port, "POST", "/dashboard/api/sign-in/options", {
              localAddress,
              body: "{}",
              headers: { origin, "content-type": "application/json", "x-forwarded-for": forwardedFor }
            })
          ).pipe(Effect.map((answer) => answer.status))
        const statuses: Array<number> = []
        // A new X-Forwarded-For each time: the client tries to look like 31 clients.
        for (let index = 0; index < 31; index++) statuses.push(yield* attempt("127.0.0.3", `198.51.100.${index + 1}`))
        assert.deepStrictEqual(statuses.slice(0, 30).filter((status) => status !== 200), [])
        assert.strictEqual(statuses[30], 429, "the 31st attempt of one client is limited, whatever it wrote")
        // Another client behind the same balancer is not locked out.
        assert.strictEqual(yield* attempt("127.0.0.4", "198.51.100.1"), 200)
        // A local process reaching the server directly is judged by its own address: writing the
        // limited client's address does not put it in that bucket (it would be 429 then).
        const direct = yield* Effect.promise(() =>
          fetch(`${server.baseUrl}/dashboard/api/sign-in/options`, {
            method: "POST",
            headers: { origin, "content-type": "application/json", "x-forwarded-for": "127.0.0.3" },
            body: "{}"
          })
        )
        assert.strictEqual(direct.status, 200)
      }).pipe(Effect.scoped))
  })
})
