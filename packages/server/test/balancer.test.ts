/**
 * The deployment's TLS balancer (scripts/cluster/balancer.ts) against two real HTTP
 * upstreams on loopback: it alternates between healthy nodes and names the one that
 * answered; a node that refuses connections is skipped without the client noticing; a
 * node that fails after receiving a request is not sent it again (the client gets 503
 * `service_unavailable` in D1's envelope and retries with its Idempotency-Key); a body
 * over 64 KiB is refused with 413.
 */
import * as fs from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { type Balancer, parseUpstreams, startBalancer } from "../scripts/cluster/balancer.ts"
import { ensureCertificate } from "../scripts/cluster/cluster.ts"
import { freePort } from "../scripts/cluster/processGroups.ts"

interface Upstream {
  readonly port: number
  /** Requests it received, by path. */
  readonly received: Array<string>
  readonly close: () => Promise<void>
}

/** A node that answers /readyz 200, drops the connection on /v1/die, and echoes anything else. */
const startUpstream = async (name: string): Promise<Upstream> => {
  const received: Array<string> = []
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
      response.end(JSON.stringify({ node: name }))
    })
  })
  const port = await freePort()
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve))
  return {
    port,
    received,
    close: () => new Promise((resolve) => {
      server.close(() => resolve())
      server.closeAllConnections()
    })
  }
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-balancer-"))
const tls = ensureCertificate(path.join(dir, "tls"))
const ca = fs.readFileSync(tls.cert)

/** One exchange through the balancer over TLS, trusting its certificate only. */
const call = (port: number, method: string, pathname: string, body = "") =>
  new Promise<{ status: number; servedBy: string | undefined; retryAfter: string | undefined; json: unknown }>((resolve, reject) => {
    const request = https.request({ host: "127.0.0.1", port, method, path: pathname, ca, servername: "localhost" }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        resolve({
          status: response.statusCode ?? 0,
          servedBy: response.headers["x-served-by"] as string | undefined,
          retryAfter: response.headers["retry-after"] as string | undefined,
          json: text === "" ? undefined : JSON.parse(text)
        })
      })
    })
    request.on("error", reject)
    request.end(body)
  })

describe("the TLS balancer", () => {
  let first: Upstream
  let second: Upstream
  let balancer: Balancer
  let deadPort = 0

  beforeAll(async () => {
    first = await startUpstream("first")
    second = await startUpstream("second")
    deadPort = await freePort()
    balancer = await startBalancer({
      host: "127.0.0.1",
      port: 0,
      upstreams: parseUpstreams(`first=http://127.0.0.1:${first.port},second=http://127.0.0.1:${second.port}`),
      cert: fs.readFileSync(tls.cert),
      key: fs.readFileSync(tls.key)
    })
  })

  afterAll(async () => {
    await balancer.close()
    await first.close()
    await second.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it("alternates between the healthy nodes and names the one that answered", async () => {
    const served = []
    for (let index = 0; index < 4; index++) {
      const answer = await call(balancer.port, "POST", "/v1/transfers", "{}")
      assert.strictEqual(answer.status, 200)
      assert.deepStrictEqual(answer.json, { node: answer.servedBy })
      served.push(answer.servedBy)
    }
    assert.sameMembers([...new Set(served)], ["first", "second"])
  })

  it("a node that fails after receiving a request is not sent it again: 503 with Retry-After", async () => {
    const before = first.received.length + second.received.length
    const answer = await call(balancer.port, "POST", "/v1/die", "{}")
    assert.strictEqual(answer.status, 503)
    assert.strictEqual(answer.retryAfter, "1")
    assert.strictEqual((answer.json as { error: { code: string } }).error.code, "service_unavailable")
    // Exactly one node saw it.
    assert.strictEqual(first.received.length + second.received.length - before, 1)
  })

  it("refuses a body over 64 KiB with 413 in D1's envelope", async () => {
    const answer = await call(balancer.port, "POST", "/v1/transfers", "x".repeat(64 * 1024 + 1))
    assert.strictEqual(answer.status, 413)
    assert.strictEqual((answer.json as { error: { code: string } }).error.code, "payload_too_large")
  })

  it("a node that dies between health checks: its refused connection sends the request to the next node", async () => {
    const doomed = await startUpstream("doomed")
    const pair = await startBalancer({
      host: "127.0.0.1",
      port: 0,
      upstreams: parseUpstreams(`doomed=http://127.0.0.1:${doomed.port},second=http://127.0.0.1:${second.port}`),
      cert: fs.readFileSync(tls.cert),
      key: fs.readFileSync(tls.key)
    })
    try {
      // Both passed the first health check; the next one is a second away.
      await doomed.close()
      await new Promise((resolve) => setTimeout(resolve, 100))
      for (let index = 0; index < 2; index++) {
        const answer = await call(pair.port, "POST", "/v1/transfers", "{}")
        assert.strictEqual(answer.status, 200)
        assert.strictEqual(answer.servedBy, "second")
      }
      assert.deepStrictEqual(doomed.received, [])
    } finally {
      await pair.close()
    }
  })

  it("skips a node that refuses connections, without the client noticing", async () => {
    const withDead = await startBalancer({
      host: "127.0.0.1",
      port: 0,
      upstreams: parseUpstreams(`dead=http://127.0.0.1:${deadPort},second=http://127.0.0.1:${second.port}`),
      cert: fs.readFileSync(tls.cert),
      key: fs.readFileSync(tls.key)
    })
    try {
      for (let index = 0; index < 4; index++) {
        const answer = await call(withDead.port, "POST", "/v1/transfers", "{}")
        assert.strictEqual(answer.status, 200)
        assert.strictEqual(answer.servedBy, "second")
      }
    } finally {
      await withDead.close()
    }
  })
})
