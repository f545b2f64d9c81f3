/**
 * A malicious api tier in front of the real server: an HTTP proxy that forwards every
 * request unchanged, records each exchange (method, path, Idempotency-Key, request body,
 * answer status and D1 code), and may rewrite the JSON answer of `POST
 * /v1/transfers/prepare` — the answer a client-sealed transfer seals to. It keeps the
 * upstream request running when the client gives up, as a load balancer does, so a
 * retry can meet the first attempt still in flight.
 */
import * as http from "node:http"
import type * as net from "node:net"

export interface Exchange {
  readonly method: string
  readonly path: string
  readonly key: string | undefined
  readonly body: string
  /** Set once the server answered. */
  status?: number
  code?: string | undefined
}

export type Rewrite = (answer: Record<string, unknown>) => Record<string, unknown>

export interface RewritingProxy {
  readonly baseUrl: string
  readonly exchanges: ReadonlyArray<Exchange>
  /** The rewrite of prepare answers from now on; undefined forwards them unchanged. */
  readonly rewritePrepare: (rewrite: Rewrite | undefined) => void
  readonly close: () => Promise<void>
}

const codeOf = (text: string): string | undefined => {
  try {
    const parsed: unknown = JSON.parse(text)
    if (typeof parsed === "object" && parsed !== null && "error" in parsed && typeof parsed.error === "object" && parsed.error !== null) {
      return "code" in parsed.error && typeof parsed.error.code === "string" ? parsed.error.code : undefined
    }
  } catch {
    // Not JSON: no code.
  }
  return undefined
}

export const startRewritingProxy = async (upstreamBaseUrl: string): Promise<RewritingProxy> => {
  const upstream = new URL(upstreamBaseUrl)
  const exchanges: Array<Exchange> = []
  let rewrite: Rewrite | undefined
  const server = http.createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const key = request.headers["idempotency-key"]
      const body = Buffer.concat(chunks)
      const exchange: Exchange = {
        method: request.method ?? "",
        path: request.url ?? "",
        key: typeof key === "string" ? key : undefined,
        body: body.toString("utf8")
      }
      exchanges.push(exchange)
      const forwarded = http.request(
        { host: upstream.hostname, port: upstream.port, method: request.method, path: request.url, headers: request.headers },
        (answer) => {
          const answerChunks: Array<Buffer> = []
          answer.on("data", (chunk: Buffer) => answerChunks.push(chunk))
          answer.on("end", () => {
            let text = Buffer.concat(answerChunks).toString("utf8")
            exchange.status = answer.statusCode ?? 502
            exchange.code = codeOf(text)
            const prepared = exchange.method === "POST" && exchange.path === "/v1/transfers/prepare" && exchange.status === 200
            if (prepared && rewrite !== undefined) text = JSON.stringify(rewrite(JSON.parse(text) as Record<string, unknown>))
            // The client may have given up (its timeout): the answer is then only recorded.
            if (response.destroyed) return
            const headers = { ...answer.headers, "content-length": String(Buffer.byteLength(text)) }
            delete headers["transfer-encoding"]
            response.writeHead(exchange.status, headers)
            response.end(text)
          })
        }
      )
      forwarded.on("error", () => response.destroy())
      forwarded.end(body)
    })
  })
  const port = await new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port)))
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    exchanges,
    rewritePrepare: (next) => {
      rewrite = next
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
