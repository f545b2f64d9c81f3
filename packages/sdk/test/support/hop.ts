/**
 * A faulty hop in front of the real server: it records every request's method, path and
 * Idempotency-Key, answers 503 (with `Retry-After`) to the first request `failFirst`
 * picks (or, with `stall`, never answers it; with `loseAnswer`, forwards it, reads the
 * server's whole answer, then drops the client's connection and calls `loseAnswer`: the
 * server acted, the client never heard), and forwards everything else unchanged. While
 * the server is down, a forwarded request's connection is dropped as the server's would be.
 * For the retry tests of the facade, of the derived client and of the command line.
 */
import * as http from "node:http"
import type * as net from "node:net"

export interface SeenRequest {
  readonly method: string
  readonly path: string
  readonly key: string | undefined
}

export interface Hop {
  readonly baseUrl: string
  readonly seen: ReadonlyArray<SeenRequest>
  readonly close: () => Promise<void>
}

export const startHop = async (
  upstreamBaseUrl: string,
  failFirst: (request: SeenRequest) => boolean,
  options: { readonly retryAfterSeconds?: number; readonly stall?: boolean; readonly loseAnswer?: () => void } = {}
): Promise<Hop> => {
  const upstream = new URL(upstreamBaseUrl)
  const seen: Array<SeenRequest> = []
  let failed = false
  /** Sends the request on to the server; `answered` gets its answer. The server down: the client's connection drops. */
  const forward = (request: http.IncomingMessage, body: Buffer, answered: (answer: http.IncomingMessage) => void) => {
    const forwarded = http.request(
      { host: upstream.hostname, port: upstream.port, method: request.method, path: request.url, headers: request.headers },
      answered
    )
    forwarded.on("error", () => request.socket.destroy())
    forwarded.end(body)
  }
  const hop = http.createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const key = request.headers["idempotency-key"]
      const entry = { method: request.method ?? "", path: request.url ?? "", key: typeof key === "string" ? key : undefined }
      seen.push(entry)
      if (!failed && failFirst(entry)) {
        failed = true
        // A stalled request is left open, unanswered, until the client gives up on it.
        if (options.stall === true) return
        const loseAnswer = options.loseAnswer
        if (loseAnswer !== undefined) {
          forward(request, Buffer.concat(chunks), (answer) => {
            answer.resume()
            answer.on("end", () => {
              request.socket.destroy()
              loseAnswer()
            })
          })
          return
        }
        response.writeHead(503, { "retry-after": String(options.retryAfterSeconds ?? 1), "content-type": "application/json" })
        response.end(JSON.stringify({ error: { code: "service_unavailable", message: "try again" } }))
        return
      }
      forward(request, Buffer.concat(chunks), (answer) => {
        response.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(response)
      })
    })
  })
  const port = await new Promise<number>((resolve) => hop.listen(0, "127.0.0.1", () => resolve((hop.address() as net.AddressInfo).port)))
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    seen,
    close: () => {
      hop.closeAllConnections()
      return new Promise((resolve) => hop.close(() => resolve()))
    }
  }
}
