/**
 * The deployment's load balancer: TLS in front of the api nodes, round robin over the
 * nodes whose `/readyz` answers 200, as an operator's HAProxy or nginx would be set up.
 * It is a small Node program so that compose and `npm run cluster` run the same one.
 *
 * - A node is taken out after a failed health check or a refused connection, and back
 *   in once `/readyz` answers again (checked every `healthCheckEveryMs`).
 * - A request whose connection to a node could not be made goes to the next node: no
 *   byte reached the first, so sending it elsewhere cannot do anything twice.
 * - A request that reached a node which then failed (reset, died) is not resent: the
 *   client gets 503 `service_unavailable` and retries with its Idempotency-Key (D6),
 *   which is the only safe judge of whether the first attempt took effect.
 * - Each answer names the node that served it (`X-Served-By`), for operators and tests.
 *
 * Environment: BALANCER_HOST, BALANCER_PORT, BALANCER_UPSTREAMS (`name=http://host:port`,
 * comma-separated), BALANCER_TLS_CERT and BALANCER_TLS_KEY (PEM files).
 */
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import { fileURLToPath } from "node:url"

/** How often every node's `/readyz` is asked. */
const healthCheckEveryMs = 1_000
/** A health check that takes longer than this counts as failed. */
const healthCheckTimeoutMs = 2_000
/** One proxied exchange's idle limit; POST /v1/transfers waits up to TRANSFER_CREATE_TIMEOUT_MS (5 s). */
const upstreamIdleTimeoutMs = 60_000
/** What a client is told to wait before retrying when no node could answer. */
const retryAfterSeconds = 1
/**
 * Bodies are buffered (a request is resent to the next node only whole), so they are
 * bounded: the api's own limit is 64 KiB (D2), and anything over it is refused the same way.
 */
const bodyBytesMax = 64 * 1024

export interface Upstream {
  readonly name: string
  readonly url: URL
  healthy: boolean
}

export const parseUpstreams = (text: string): Array<Upstream> =>
  text.split(",").map((entry) => entry.trim()).filter((entry) => entry !== "").map((entry) => {
    const separator = entry.indexOf("=")
    if (separator <= 0) throw new Error("BALANCER_UPSTREAMS must be comma-separated name=http://host:port pairs")
    return { name: entry.slice(0, separator), url: new URL(entry.slice(separator + 1)), healthy: false }
  })

/** D1's envelope, for the errors the balancer itself gives. */
const refuse = (response: http.ServerResponse, status: 413 | 503, code: string, message: string) => {
  if (response.headersSent) {
    response.destroy()
    return
  }
  const body = JSON.stringify({ error: { code, message, request_id: `req_${randomUUID().replaceAll("-", "")}` } })
  response.writeHead(status, {
    "content-type": "application/json",
    ...(status === 503 ? { "retry-after": String(retryAfterSeconds) } : {}),
    connection: "close"
  })
  response.end(body)
}

const unavailable = (response: http.ServerResponse) =>
  refuse(response, 503, "service_unavailable", "no api node could answer; retry with the same Idempotency-Key")

const hopByHop = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer"])

export interface Balancer {
  readonly port: number
  readonly close: () => Promise<void>
}

export const startBalancer = async (options: {
  readonly host: string
  readonly port: number
  readonly upstreams: Array<Upstream>
  readonly cert: string | Buffer
  readonly key: string | Buffer
}): Promise<Balancer> => {
  const { upstreams } = options
  if (upstreams.length === 0) throw new Error("the balancer needs at least one upstream")
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 })
  let next = 0

  const check = (upstream: Upstream) =>
    new Promise<void>((resolve) => {
      const request = http.get(new URL("/readyz", upstream.url), { agent, timeout: healthCheckTimeoutMs }, (response) => {
        upstream.healthy = response.statusCode === 200
        response.resume()
        resolve()
      })
      request.on("timeout", () => request.destroy(new Error("timeout")))
      request.on("error", () => {
        upstream.healthy = false
        resolve()
      })
    })
  await Promise.all(upstreams.map(check))
  const timer = setInterval(() => void Promise.all(upstreams.map(check)), healthCheckEveryMs)

  /** The healthy nodes in round-robin order from the next one; all of them when none looks healthy. */
  const candidates = (): Array<Upstream> => {
    const start = next++ % upstreams.length
    const ordered = [...upstreams.slice(start), ...upstreams.slice(0, start)]
    const healthy = ordered.filter((upstream) => upstream.healthy)
    return healthy.length > 0 ? healthy : ordered
  }

  const forward = (request: http.IncomingMessage, body: Buffer, response: http.ServerResponse, queue: Array<Upstream>) => {
    const upstream = queue.shift()
    if (upstream === undefined) return unavailable(response)
    const headers: http.OutgoingHttpHeaders = {}
    for (const [name, value] of Object.entries(request.headers)) {
      if (!hopByHop.has(name) && value !== undefined) headers[name] = value
    }
    headers["x-forwarded-proto"] = "https"
    headers["x-forwarded-for"] = request.socket.remoteAddress ?? ""
    headers["content-length"] = String(body.length)
    let connected = false
    const outgoing = http.request(new URL(request.url ?? "/", upstream.url), {
      method: request.method,
      headers,
      agent,
      timeout: upstreamIdleTimeoutMs
    }, (answer) => {
      const answerHeaders: http.OutgoingHttpHeaders = { "x-served-by": upstream.name }
      for (const [name, value] of Object.entries(answer.headers)) {
        if (!hopByHop.has(name) && value !== undefined) answerHeaders[name] = value
      }
      response.writeHead(answer.statusCode ?? 502, answerHeaders)
      answer.pipe(response)
      answer.on("error", () => response.destroy())
    })
    outgoing.on("socket", (socket) => {
      // A reused keep-alive socket is connected already; a new one once it connects.
      if (!socket.connecting) connected = true
      else socket.once("connect", () => (connected = true))
    })
    outgoing.on("timeout", () => outgoing.destroy(new Error("upstream timeout")))
    outgoing.on("error", (error: NodeJS.ErrnoException) => {
      if (!connected || error.code === "ECONNREFUSED") {
        // Nothing reached this node: it is down; the next one gets the request.
        upstream.healthy = false
        return forward(request, body, response, queue)
      }
      unavailable(response)
    })
    outgoing.end(body)
  }

  const server = https.createServer({ cert: options.cert, key: options.key }, (request, response) => {
    if (request.url === "/healthz" && request.method === "GET") {
      const healthy = upstreams.filter((upstream) => upstream.healthy).map((upstream) => upstream.name)
      response.writeHead(healthy.length > 0 ? 200 : 503, { "content-type": "application/json" })
      response.end(JSON.stringify({ status: healthy.length > 0 ? "ok" : "no_upstream", upstreams: healthy }))
      return
    }
    const chunks: Array<Buffer> = []
    let received = 0
    request.on("data", (chunk: Buffer) => {
      received += chunk.length
      if (received > bodyBytesMax) {
        refuse(response, 413, "payload_too_large", "the request body is over 64 KiB")
        request.destroy()
        return
      }
      chunks.push(chunk)
    })
    request.on("end", () => {
      if (received <= bodyBytesMax) forward(request, Buffer.concat(chunks), response, candidates())
    })
    request.on("error", () => response.destroy())
  })
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(options.port, options.host, () => resolve())
  })
  const address = server.address()
  return {
    port: typeof address === "object" && address !== null ? address.port : options.port,
    close: () =>
      new Promise<void>((resolve) => {
        clearInterval(timer)
        agent.destroy()
        server.close(() => resolve())
        server.closeAllConnections()
      })
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const env = (name: string) => {
    const value = process.env[name]
    if (value === undefined || value === "") throw new Error(`${name} is required`)
    return value
  }
  const balancer = await startBalancer({
    host: process.env["BALANCER_HOST"] ?? "127.0.0.1",
    port: Number(process.env["BALANCER_PORT"] ?? "8443"),
    upstreams: parseUpstreams(env("BALANCER_UPSTREAMS")),
    cert: fs.readFileSync(env("BALANCER_TLS_CERT")),
    key: fs.readFileSync(env("BALANCER_TLS_KEY"))
  })
  process.stdout.write(`${JSON.stringify({ message: "balancer started", port: balancer.port })}\n`)
  const stop = () => void balancer.close().then(() => process.exit(0))
  process.once("SIGTERM", stop)
  process.once("SIGINT", stop)
}
