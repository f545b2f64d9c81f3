/**
 * JSON-RPC over HTTP(S) on kept-alive `node:http` connections: the transport of the service's
 * long-lived chain clients (the server's settlement and the guardian's chain reader).
 *
 * Why not viem's `http`: it goes through the global `fetch` (WHATWG streams, `Request` and
 * `AbortSignal` objects a call), which measured ~460 µs of CPU for one `eth_blockNumber` to a
 * local anvil, and ~800 µs when batching with a 2-ms wait, against ~210 µs on a kept-alive
 * `node:http` socket (docs/benchmarks.md, "Chain calls without fetch"). The settlement watcher
 * makes ~60 such calls a second with nothing to do (a head read every 25 ms, two reads per
 * 100-ms block), so they were most of an idle server's CPU, and a share of every transfer's.
 *
 * It keeps what the service relies on from viem's `http`: the errors are viem's own classes
 * (`RpcRequestError` with the node's code and message, `HttpRequestError` with the status,
 * `TimeoutError`, with the response's headers), so viem's error mapping and retry rules, and
 * the service's checks of the node's words ("nonce too low"), see what they saw; credentials in
 * the URL become a Basic `Authorization` header; a response body is bounded (10 MiB, as viem's
 * default). As undici did under `fetch`, an idle socket is closed after 4 s, and a call whose
 * kept socket turns out closed by the peer is sent once more on a fresh one.
 *
 * Batching, when asked: the calls made in one turn of the event loop go out as one JSON-RPC
 * batch (`setImmediate`, no timer: a lone call leaves at once), up to `batchMax` a request.
 *
 * @since 0.4.0
 */
import * as Http from "node:http"
import * as Https from "node:https"
import {
  createTransport,
  type EIP1193RequestFn,
  HttpRequestError,
  RpcRequestError,
  stringify,
  TimeoutError,
  type Transport
} from "viem"

/**
 * @since 0.4.0
 * @category models
 */
export interface KeepAliveHttpOptions {
  /** Bounds one HTTP request, from the call to the end of its response's body; 0: no bound. */
  readonly timeoutMs?: number | undefined
  /** viem's retries of a failed call (its own rules: which errors, how long between). */
  readonly retryCount?: number | undefined
  /** Sends the calls of one event-loop turn as one JSON-RPC batch of at most this many. */
  readonly batchMax?: number | undefined
  /** Connections kept to the node at most (more calls queue for a free one). */
  readonly maxSockets?: number | undefined
}

/** viem's default bound on a response body. */
const maxResponseBytes = 10 * 1024 * 1024
const defaultTimeoutMs = 10_000
const defaultMaxSockets = 16
/**
 * An idle kept-alive socket is closed after this long (undici's default, which `fetch` had):
 * a node or a load balancer that drops idle connections must not find ours half-dead.
 */
const idleSocketMs = 4_000

type RpcCall = {
  readonly jsonrpc: "2.0"
  readonly id: number
  readonly method: string
  readonly params?: unknown
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null

const isRpcError = (value: unknown): value is { readonly error: { readonly code: number; readonly message: string } } =>
  isRecord(value) && isRecord(value["error"]) && typeof value["error"]["code"] === "number" &&
  typeof value["error"]["message"] === "string"

/** The URL without its credentials (errors name it), and the credentials as a header. */
const parseUrl = (url: string) => {
  const parsed = new URL(url)
  const authorization = parsed.username === "" && parsed.password === ""
    ? undefined
    : `Basic ${
      Buffer.from(`${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`).toString("base64")
    }`
  parsed.username = ""
  parsed.password = ""
  return { url: parsed.toString(), target: parsed, authorization }
}

/** A response's headers as viem's errors carry them (its retries read `Retry-After`). */
const headersOf = (response: Http.IncomingMessage): Headers => {
  const headers = new Headers()
  for (const [name, value] of Object.entries(response.headers)) {
    if (value === undefined) continue
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item)
  }
  return headers
}

/**
 * A reused socket the peer had already closed fails before any response: the request never
 * reached the node, so it is sent once more on a fresh socket (node's documented remedy).
 */
const isStaleSocket = (request: Http.ClientRequest, cause: Error & { readonly code?: string }) =>
  request.reusedSocket && (cause.code === "ECONNRESET" || cause.code === "EPIPE")

/**
 * A viem transport for `url` (http: or https:) on kept-alive connections.
 *
 * @since 0.4.0
 * @category constructors
 */
export const keepAliveHttp = (url: string, options: KeepAliveHttpOptions = {}): Transport<"http"> => {
  const { authorization, target, url: publicUrl } = parseUrl(url)
  const timeoutMs = options.timeoutMs ?? defaultTimeoutMs
  const secure = target.protocol === "https:"
  if (!secure && target.protocol !== "http:") throw new Error(`keepAliveHttp: ${target.protocol} is not http: or https:`)
  // `timeout` closes idle sockets only (node's agent destroys a free socket on it; a request in
  // flight is bounded by its own timer). Idle sockets are also unreferenced: no process is held open.
  const agentOptions = { keepAlive: true, maxSockets: options.maxSockets ?? defaultMaxSockets, timeout: idleSocketMs }
  const agent = secure ? new Https.Agent(agentOptions) : new Http.Agent(agentOptions)
  const send = secure ? Https.request : Http.request
  let nextId = 0

  /** One HTTP request carrying `body`; its parsed JSON, or one of viem's errors. */
  const post = (body: RpcCall | Array<RpcCall>): Promise<unknown> =>
    new Promise((resolve, reject) => {
      // viem's stringify: parameters may hold bigints.
      const payload = stringify(body)
      let settled = false
      const fail = (error: Error) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        reject(error)
      }
      const succeed = (data: unknown) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        resolve(data)
      }
      const onResponse = (response: Http.IncomingMessage) => {
        const chunks: Array<Buffer> = []
        let size = 0
        response.on("data", (chunk: Buffer) => {
          size += chunk.length
          if (size > maxResponseBytes) {
            response.destroy()
            fail(new HttpRequestError({ body, details: `response body over ${maxResponseBytes} bytes`, url: publicUrl }))
            return
          }
          chunks.push(chunk)
        })
        response.on("error", (cause) => fail(new HttpRequestError({ body, cause, url: publicUrl })))
        response.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8")
          const status = response.statusCode ?? 0
          const ok = status >= 200 && status < 300
          let data: unknown
          try {
            data = JSON.parse(text === "" ? "{}" : text)
          } catch (cause) {
            // No status on this one: viem's retry rules then treat it as a transient fault.
            if (ok) return fail(new HttpRequestError({ body, cause: cause instanceof Error ? cause : undefined, url: publicUrl }))
            data = { error: text }
          }
          if (ok) return succeed(data)
          // A node refusing a whole batch answers one error, bare or in a one-element array.
          const error = Array.isArray(data) && data.length === 1 ? data[0] : data
          const headers = headersOf(response)
          fail(
            isRpcError(error)
              ? new RpcRequestError({ body, error: error.error, headers, status, url: publicUrl })
              : new HttpRequestError({
                body,
                details: isRecord(error) && error["error"] !== undefined ? JSON.stringify(error["error"]) : response.statusMessage,
                headers,
                status,
                url: publicUrl
              })
          )
        })
      }
      const attempt = (retried: boolean) => {
        let request: Http.ClientRequest
        try {
          request = send(target, {
            agent,
            method: "POST",
            headers: {
              "content-type": "application/json",
              "content-length": Buffer.byteLength(payload),
              ...(authorization === undefined ? {} : { authorization })
            }
          }, onResponse)
        } catch (cause) {
          return fail(new HttpRequestError({ body, cause: cause instanceof Error ? cause : undefined, url: publicUrl }))
        }
        current = request
        request.on("error", (cause: Error & { readonly code?: string }) => {
          if (!retried && !settled && isStaleSocket(request, cause)) return attempt(true)
          fail(new HttpRequestError({ body, cause, url: publicUrl }))
        })
        request.end(payload)
      }
      let current: Http.ClientRequest | undefined
      // Counts from the call, waiting for a free socket included (at most `maxSockets` are open):
      // a call that times out may never have been sent, which callers treat as an unknown outcome.
      const timer = timeoutMs > 0
        ? setTimeout(() => {
          current?.destroy()
          fail(new TimeoutError({ body, url: publicUrl }))
        }, timeoutMs)
        : undefined
      attempt(false)
    })

  /** The answer to one call, or viem's error for it. */
  const answerOf = (call: RpcCall, answer: unknown): unknown => {
    if (!isRecord(answer)) {
      throw new HttpRequestError({ body: call, details: "no answer to the call", url: publicUrl })
    }
    if (isRpcError(answer)) throw new RpcRequestError({ body: call, error: answer.error, url: publicUrl })
    return answer["result"]
  }

  /** One call in a request of its own (no batching, or alone in its turn). */
  const callAlone = (call: RpcCall): Promise<unknown> => post(call).then((data) => answerOf(call, data))

  /** Calls of the current turn, sent together once it ends. */
  let pending: Array<{ readonly call: RpcCall; readonly resolve: (value: unknown) => void; readonly reject: (error: unknown) => void }> = []
  const batchMax = options.batchMax ?? 1

  const flush = () => {
    const calls = pending
    pending = []
    for (let start = 0; start < calls.length; start += batchMax) {
      const chunk = calls.slice(start, start + batchMax)
      const lone = chunk.length === 1 ? chunk[0] : undefined
      if (lone !== undefined) {
        // Alone in its turn (the watcher's polls): a plain request, not a batch of one.
        callAlone(lone.call).then(lone.resolve, lone.reject)
        continue
      }
      post(chunk.map((entry) => entry.call)).then(
        (data) => {
          // A node refusing the whole batch answers one error for all of its calls; any other
          // answer that is not an array answers none of them.
          const single = Array.isArray(data) ? (data.length === 1 ? data[0] : undefined) : data
          const shared = isRpcError(single) ? single : undefined
          const byId = new Map<string, unknown>()
          if (Array.isArray(data)) for (const answer of data) if (isRecord(answer)) byId.set(String(answer["id"]), answer)
          for (const entry of chunk) {
            try {
              entry.resolve(answerOf(entry.call, shared ?? byId.get(String(entry.call.id))))
            } catch (error) {
              entry.reject(error)
            }
          }
        },
        (error) => {
          for (const entry of chunk) entry.reject(error)
        }
      )
    }
  }

  const request = async ({ method, params }: { readonly method: string; readonly params?: unknown }): Promise<unknown> => {
    const call: RpcCall = { jsonrpc: "2.0", id: ++nextId, method, ...(params === undefined ? {} : { params }) }
    if (batchMax <= 1) return callAlone(call)
    return new Promise((resolve, reject) => {
      if (pending.length === 0) setImmediate(flush)
      pending.push({ call, resolve, reject })
    })
  }

  return () =>
    createTransport({
      key: "http",
      name: "HTTP JSON-RPC (kept-alive node:http)",
      request: request as EIP1193RequestFn,
      retryCount: options.retryCount ?? 0,
      timeout: timeoutMs,
      type: "http"
    }, { url: publicUrl })
}
