/**
 * The envelope middleware: what every response of a listener shares, whether an
 * endpoint produced it or not (D1, D2).
 *
 * - a request id (`req_<ULID>`) in `X-Request-Id` on every response, and in the
 *   `request_id` of every error body;
 * - 400 `invalid_request` for a second `Authorization` or `Content-Type` header
 *   (read from the raw headers: Node's parser keeps the first Authorization and
 *   joins Content-Types, so the application could not tell);
 * - 413 `payload_too_large` for a body over 64 KiB (announced by Content-Length,
 *   or found while reading it), 400 `invalid_request` for a body that is not
 *   `application/json`, and 400 `invalid_request` with `param` for a JSON string
 *   (key or value) holding U+0000 or a lone surrogate, which PostgreSQL text and
 *   jsonb cannot store: one rule for every field, before any handler runs;
 * - 404 `not_found` for an unknown path, 405 `method_not_allowed` for a known
 *   path with another method;
 * - D1's envelope for every error response, including those the platform
 *   produces with an empty body, and 500 `internal_error` with no internals for
 *   any fault, whose cause is logged (redacted) under the request id;
 * - 503 `service_unavailable` with `Retry-After` for a dependency's outage (platform/Unavailable.ts),
 *   and `Retry-After` on every 503 that has none of its own;
 * - one access log line per request: method, path without the query string (a
 *   decryption proof may travel there, D20), status, duration; and the request counted in
 *   `pps_http_requests_total` / `pps_http_request_duration_seconds` under its route's template
 *   (`/v1/transfers/:transfer_id`, never the path with its ids; observability/Metrics.ts);
 * - D1's envelope and a request id on what Node's own HTTP parser refuses before
 *   any handler runs (431 headers too large, 400 malformed request line or
 *   chunked encoding, 408 too slow), see `answerClientErrors`; and an answer for
 *   a client that half-closes its socket after a complete request (`makeNodeServer`).
 *
 * @since 0.1.0
 */
import { CurrentRequestId } from "./CurrentRequestId.ts"
import * as Http from "node:http"
import type { Duplex } from "node:stream"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { type Cause, Clock, Effect } from "effect"
import * as ByteSize from "effect/ByteSize"
import { FindMyWay, HttpIncomingMessage, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiError } from "effect/http-api"
import { SqlError } from "effect/sql"
import { Limits } from "../config/AppConfig.ts"
import { makeId } from "../platform/Ids.ts"
import { observeRequest, unmatchedRoute } from "../observability/Metrics.ts"
import { errorBody, routerErrors } from "@pps/api/Errors"
import { describeIssue } from "./RequestValidation.ts"
import { DependencyUnavailable, retryAfterSecondsDefault } from "../platform/Unavailable.ts"

/**
 * The routes a listener serves, to tell 405 from 404 and to name a request's route.
 *
 * @since 0.1.0
 * @category models
 */
export interface RouteTable {
  readonly allows: (method: string, url: string) => ReadonlyArray<string>
  /** The template of the route `method` and `url` match (`/v1/transfers/:transfer_id`), if any. */
  readonly templateOf: (method: string, url: string) => string | undefined
}

const methods = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const

/**
 * Builds the route table from (method, path) pairs.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeRouteTable = (routes: ReadonlyArray<readonly [method: string, path: string]>): RouteTable => {
  const router = FindMyWay.make<string>({ ignoreTrailingSlash: false })
  for (const [method, path] of routes) router.on(method, path as `/${string}`, path)
  return {
    allows: (_method, url) => methods.filter((m) => router.find(m, url) !== undefined),
    templateOf: (method, url) => router.find(method, url)?.handler
  }
}

const statusCodes: Record<number, keyof typeof routerErrors> = {
  400: "invalid_request",
  404: "not_found",
  405: "method_not_allowed",
  408: "request_timeout",
  413: "payload_too_large",
  415: "invalid_request",
  500: "internal_error",
  503: "service_unavailable"
}

const defaultMessages: Record<keyof typeof routerErrors, string> = {
  invalid_request: "The request is malformed.",
  not_found: "No such endpoint.",
  method_not_allowed: "This endpoint does not accept that method.",
  request_timeout: "The request was not received in time.",
  payload_too_large: "The request body is larger than 64 KiB.",
  headers_too_large: "The request headers are larger than the server accepts.",
  internal_error: "An unexpected error occurred; quote the request id when reporting it.",
  service_unavailable: "The service is temporarily unavailable; retry shortly."
}

const jsonError = (
  status: number,
  code: keyof typeof routerErrors,
  message: string = defaultMessages[code],
  headers: Record<string, string> = {}
) => HttpServerResponse.jsonUnsafe(errorBody(code, message), { status, headers })

const hasBody = (request: HttpServerRequest.HttpServerRequest): boolean => {
  const length = request.headers["content-length"]
  if (length !== undefined) return Number(length) > 0
  return request.headers["transfer-encoding"] !== undefined
}

/**
 * Headers a request may carry once, by their lower-case name and as messages spell them. With
 * two, Node keeps the first `Authorization` (a proxy or a client may have meant the other) and
 * joins `Content-Type`s with ", ": which credential or type the request meant is ambiguous.
 */
const singleHeaders: ReadonlyMap<string, string> = new Map([["authorization", "Authorization"], ["content-type", "Content-Type"]])

/** The first header of `singleHeaders` that the request carries more than once, as messages spell it. */
const repeatedSingleHeader = (request: HttpServerRequest.HttpServerRequest): string | undefined => {
  // Node's own request (HTTP/1.1 and HTTP/2 alike); anything else has no raw headers to read.
  const raw = (NodeHttpServerRequest.toIncomingMessage(request) as { readonly rawHeaders?: unknown }).rawHeaders
  if (!Array.isArray(raw)) return undefined
  const seen = new Set<string>()
  for (let index = 0; index < raw.length; index += 2) {
    const name = String(raw[index]).toLowerCase()
    if (!singleHeaders.has(name)) continue
    if (seen.has(name)) return singleHeaders.get(name)
    seen.add(name)
  }
  return undefined
}

const isJsonContentType = (value: string | undefined): boolean =>
  value !== undefined && value.split(";")[0]!.trim().toLowerCase() === "application/json"

/**
 * U+0000, or a UTF-16 surrogate without its pair. PostgreSQL refuses both (NUL in
 * `text`, `\u0000` and unpaired `\ud800` escapes in `jsonb`), so letting them
 * through turned a malformed request into a 500.
 */
const unstorableText = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/**
 * The dotted path (as D1's `param`) of the first JSON string, key or value, that
 * PostgreSQL cannot store; paths are built from keys already checked. Walks with an explicit stack: a 64 KiB body can nest
 * deeper than the call stack allows.
 */
const unstorableTextAt = (root: unknown): string | undefined => {
  // Each entry links to its parent rather than copying the path: a deep body
  // would otherwise cost depth² in time and memory.
  interface At {
    readonly value: unknown
    readonly key: string | undefined
    readonly parent: At | undefined
  }
  const pathOf = (at: At | undefined): string => {
    const keys: Array<string> = []
    for (let node = at; node !== undefined; node = node.parent) if (node.key !== undefined) keys.push(node.key)
    return keys.reverse().join(".")
  }
  const stack: Array<At> = [{ value: root, key: undefined, parent: undefined }]
  for (let at = stack.pop(); at !== undefined; at = stack.pop()) {
    const value = at.value
    if (typeof value === "string") {
      if (unstorableText.test(value)) return pathOf(at)
    } else if (Array.isArray(value)) {
      value.forEach((item, i) => stack.push({ value: item, key: String(i), parent: at }))
    } else if (typeof value === "object" && value !== null) {
      for (const [key, item] of Object.entries(value)) {
        // A bad key is named by its object's path: `param` never echoes the bad text.
        if (unstorableText.test(key)) return pathOf(at)
        stack.push({ value: item, key, parent: at })
      }
    }
  }
  return undefined
}

/**
 * Reads a JSON body (the read is cached, so the endpoint reads it again for
 * free) and refuses text PostgreSQL cannot store. A body that is not JSON is
 * left to the endpoint, which answers it.
 */
const refuseUnstorableText = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.map(request.text, (text) => {
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      return undefined
    }
    const param = unstorableTextAt(parsed)
    return param === undefined ? undefined : HttpServerResponse.jsonUnsafe(
      errorBody(
        "invalid_request",
        "JSON strings must be well-formed Unicode without U+0000" + (param === "" ? "." : ` (field '${param}').`),
        param === "" ? undefined : { param }
      ),
      { status: 400 }
    )
  })

/** Finds a request-parse failure (body too large, unreadable) anywhere in a cause. */
const requestParseReason = (cause: Cause.Cause<unknown>): string | undefined => {
  for (const reason of cause.reasons) {
    const value = reason._tag === "Fail" ? reason.error : reason._tag === "Die" ? reason.defect : undefined
    if (value instanceof HttpServerError.HttpServerError && value.reason._tag === "RequestParseError") {
      return value.reason.reason
    }
    if (HttpApiError.HttpApiPayloadTooLarge.is(value)) return "BodyTooLarge"
  }
  return undefined
}

/** A failure to decode the request (not to encode our response) anywhere in a cause. */
const requestSchemaError = (cause: Cause.Cause<unknown>) => {
  for (const reason of cause.reasons) {
    const value = reason._tag === "Fail" ? reason.error : reason._tag === "Die" ? reason.defect : undefined
    if (HttpApiError.HttpApiSchemaError.is(value) && value.kind !== "Body" && value.kind !== "ResponseHeaders") {
      return value as typeof value & { readonly kind: "Params" | "Headers" | "Query" | "Payload" }
    }
  }
  return undefined
}

const isRouteNotFound = (cause: Cause.Cause<unknown>): boolean =>
  cause.reasons.some((reason) =>
    reason._tag === "Fail" && reason.error instanceof HttpServerError.HttpServerError &&
    reason.error.reason._tag === "RouteNotFound"
  )

/** A SQL failure or a typed dependency outage anywhere in a cause, failed or died. */
const dependencyOutage = (cause: Cause.Cause<unknown>): string | undefined => {
  for (const reason of cause.reasons) {
    const value = reason._tag === "Fail" ? reason.error : reason._tag === "Die" ? reason.defect : undefined
    if (SqlError.isSqlError(value)) return `database: ${value.reason._tag}`
    if (value instanceof DependencyUnavailable) return `${value.dependency}: ${value.detail}`
  }
  return undefined
}

const isInterruptOnly = (cause: Cause.Cause<unknown>): boolean =>
  cause.reasons.length > 0 && cause.reasons.every((reason) => reason._tag === "Interrupt")

/** Turns a failure of the inner handler into a D1 response. */
const responseForCause = (
  cause: Cause.Cause<unknown>,
  request: HttpServerRequest.HttpServerRequest,
  routes: RouteTable
): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  if (isRouteNotFound(cause)) {
    const allowed = routes.allows(request.method, request.url)
    return Effect.succeed(
      allowed.length > 0
        ? jsonError(405, "method_not_allowed", `This endpoint accepts ${allowed.join(", ")}.`, { allow: allowed.join(", ") })
        : jsonError(404, "not_found")
    )
  }
  // An API that forgot the RequestValidation middleware lets decoding failures
  // through as defects: they are still the caller's 400, not our 500.
  const schemaError = requestSchemaError(cause)
  if (schemaError !== undefined) {
    return Effect.succeed(jsonError(400, "invalid_request", describeIssue(schemaError.kind, schemaError.cause.issue).message))
  }
  const parseReason = requestParseReason(cause)
  if (parseReason === "BodyTooLarge") return Effect.succeed(jsonError(413, "payload_too_large"))
  if (parseReason !== undefined) return Effect.succeed(jsonError(400, "invalid_request", "The request body could not be read."))
  if (isInterruptOnly(cause)) return Effect.succeed(jsonError(503, "service_unavailable"))
  // A dependency's outage that reached here untyped (a remaining `orDie` on a store call) is still
  // an outage: the client is told to retry, not that we failed.
  const outage = dependencyOutage(cause)
  if (outage !== undefined) {
    return Effect.logWarning("request met a dependency outage outside a typed path", outage).pipe(
      Effect.as(jsonError(503, "service_unavailable"))
    )
  }
  return Effect.logError("request failed with an unexpected fault", cause).pipe(
    Effect.as(jsonError(500, "internal_error"))
  )
}

const decoder = new TextDecoder()
const encoder = new TextEncoder()

/**
 * Gives an error response D1's envelope with the request id: fills in
 * `request_id` of an envelope, and replaces an empty or foreign body (the
 * platform's bare 400/404/415/500) with the envelope for its status.
 */
const withEnvelope = (response: HttpServerResponse.HttpServerResponse, requestId: string) => {
  if (response.status < 400) return response
  if (response.status === 503 && response.headers["retry-after"] === undefined) {
    return withEnvelope(HttpServerResponse.setHeader(response, "retry-after", String(retryAfterSecondsDefault)), requestId)
  }
  const current = response.body
  if (current._tag === "Uint8Array" && current.contentType.startsWith("application/json")) {
    try {
      const parsed: unknown = JSON.parse(decoder.decode(current.body))
      if (typeof parsed === "object" && parsed !== null && "error" in parsed) {
        const envelope = parsed as { error: Record<string, unknown> }
        const patched = { error: { ...envelope.error, request_id: requestId } }
        return HttpServerResponse.setBody(response, HttpServerResponse.uint8Array(encoder.encode(JSON.stringify(patched)), {
          contentType: "application/json"
        }).body)
      }
    } catch {
      // Not JSON after all: replaced below.
    }
  }
  const code = statusCodes[response.status] ?? (response.status >= 500 ? "internal_error" : "invalid_request")
  // HttpApi answers a wrong Content-Type with 415; D2 wants 400 invalid_request.
  const status = response.status === 415 ? 400 : response.status
  const message = response.status === 415 ? "Content-Type must be application/json." : defaultMessages[code]
  const body = { error: { ...errorBody(code, message).error, request_id: requestId } }
  return HttpServerResponse.setBody(
    HttpServerResponse.setStatus(response, status),
    HttpServerResponse.uint8Array(encoder.encode(JSON.stringify(body)), { contentType: "application/json" }).body
  )
}

/**
 * The API reference page (Scalar, served from the npm package, no CDN: it works offline): a
 * large third-party script, so it is fenced in by a CSP of its own (`withApiHeaders`).
 *
 * @since 0.4.0
 * @category constants
 */
export const apiReferencePath = "/v1/docs"

/**
 * Headers every `/v1` answer carries besides its own. `no-store`: the page (docs/dashboard.md)
 * reads transfers, counterparties and keys through `/v1`; none of it may stay in a shared
 * computer's disk cache after sign-out. `nosniff`: JSON is never taken for script or HTML.
 * The reference page shares its origin with the dashboard, whose session cookie rides on every
 * same-origin request: its CSP lets its own inline script run and nothing else, no request
 * (`connect-src 'none'`: script there, say a flaw in the bundled Scalar, cannot read the
 * dashboard's CSRF token or call the API), no form, no frame. The spec it shows is inline, so it
 * needs no request. (A `sandbox` CSP would be stronger, but Scalar renders nothing in an opaque
 * origin: checked in Chromium.)
 */
const apiReferencePolicy = [
  "default-src 'none'",
  "script-src 'unsafe-inline'",
  "style-src 'unsafe-inline'",
  "img-src data:",
  "font-src data:",
  "connect-src 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "base-uri 'none'"
].join("; ")

const withApiHeaders = (path: string, response: HttpServerResponse.HttpServerResponse) => {
  if (!path.startsWith("/v1/") && path !== "/v1") return response
  const cached = response.headers["cache-control"] === undefined
    ? HttpServerResponse.setHeader(response, "cache-control", "no-store")
    : response
  const typed = HttpServerResponse.setHeader(cached, "x-content-type-options", "nosniff")
  return path === apiReferencePath
    ? HttpServerResponse.setHeaders(typed, {
      "content-security-policy": apiReferencePolicy,
      "x-frame-options": "DENY"
    })
    : typed
}

/**
 * A stage the envelope runs around everything that reads the body: the transfer decisions'
 * early refusal (http/LoadShedding.ts), so a request it refuses costs no body read and no JSON parse.
 *
 * @since 0.7.0
 * @category models
 */
export type InnerStage = <E, R>(
  inner: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest>

/**
 * The middleware, for `HttpRouter.middleware(..., { global: true })`. `stage` runs after the
 * header checks (size, content type) and before the body is read.
 *
 * @since 0.1.0
 * @category middleware
 */
export const envelopeMiddleware = (routes: RouteTable, stage: InnerStage = (inner) => inner) =>
<E, R>(
  httpEffect: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const requestId = makeId("req")
    const startedMs = yield* Clock.currentTimeMillis
    const path = request.url.split("?")[0] ?? request.url
    const response = yield* Effect.suspend(() => {
      const repeated = repeatedSingleHeader(request)
      if (repeated !== undefined) {
        return Effect.succeed(HttpServerResponse.jsonUnsafe(
          errorBody("invalid_request", `The ${repeated} header must be sent once.`, { param: repeated }),
          { status: 400 }
        ))
      }
      const length = Number(request.headers["content-length"] ?? "0")
      if (length > Limits.bodyBytesMax) return Effect.succeed(jsonError(413, "payload_too_large"))
      if (hasBody(request) && !isJsonContentType(request.headers["content-type"])) {
        return Effect.succeed(jsonError(400, "invalid_request", "Content-Type must be application/json."))
      }
      const checked = hasBody(request)
        ? Effect.flatMap(refuseUnstorableText(request), (refusal) => refusal === undefined ? httpEffect : Effect.succeed(refusal))
        : httpEffect
      return stage(checked).pipe(
        Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(Limits.bodyBytesMax)),
        Effect.catchCause((cause) => responseForCause(cause, request, routes))
      )
    }).pipe(Effect.annotateLogs({ request_id: requestId }), Effect.provideService(CurrentRequestId, requestId))
    const final = withApiHeaders(path, HttpServerResponse.setHeader(withEnvelope(response, requestId), "x-request-id", requestId))
    const endedMs = yield* Clock.currentTimeMillis
    yield* observeRequest(request.method, routes.templateOf(request.method, path) ?? unmatchedRoute, final.status, endedMs - startedMs)
    yield* Effect.logInfo("http request").pipe(
      Effect.annotateLogs({
        request_id: requestId,
        method: request.method,
        path,
        status: final.status,
        duration_ms: endedMs - startedMs
      })
    )
    return final
  })


/** Node's parser error codes that have their own status; any other is a 400. */
const clientErrorStatus: Record<string, readonly [status: number, code: keyof typeof routerErrors]> = {
  HPE_HEADER_OVERFLOW: [431, "headers_too_large"],
  HPE_CHUNK_EXTENSIONS_OVERFLOW: [413, "payload_too_large"],
  ERR_HTTP_REQUEST_TIMEOUT: [408, "request_timeout"]
}

const reasonPhrases: Record<number, string> = {
  400: "Bad Request",
  408: "Request Timeout",
  413: "Payload Too Large",
  431: "Request Header Fields Too Large"
}

/**
 * How long a refused connection stays open after its answer, reading and
 * discarding what the client still sends: closing a socket with unread input
 * resets the connection, and the client may then lose the answer.
 */
const clientErrorLingerMs = 1_000

/**
 * The Node server every listener runs on. Node's parser refusals answer in D1's envelope
 * (`answerClientErrors`). `httpAllowHalfOpen`: a client may half-close its socket (a TCP FIN)
 * once it has sent a complete request and still read the answer; by default Node ends the
 * socket at once on that FIN, the platform takes the closed response for a client abort and
 * interrupts the handler, and the client is left without an answer to a request that may still
 * take effect (a transfer). With it, Node ends the socket after the last answer instead.
 *
 * @since 0.7.0
 * @category constructors
 */
export const makeNodeServer = (): Http.Server => {
  // A property of Node's http.Server since v0.x that @types/node does not declare.
  return endStartedAnswersOnHalfClose(Object.assign(answerClientErrors(Http.createServer()), { httpAllowHalfOpen: true }))
}

/**
 * What `httpAllowHalfOpen` keeps open is the answer not yet begun. An answer already under way
 * when the client half-closes (an event stream, which never ends by itself) ends with the socket,
 * as it did before: a client that aborts a stream sends a FIN, and the stream's slot (five per
 * key) must come back at once, not at the next failed write.
 */
const endStartedAnswersOnHalfClose = <S extends Http.Server>(server: S): S => {
  const latest = new WeakMap<object, Http.ServerResponse>()
  server.on("request", (request: Http.IncomingMessage, response: Http.ServerResponse) => {
    latest.set(request.socket, response)
  })
  server.on("connection", (socket: Duplex) => {
    socket.once("end", () => {
      const response = latest.get(socket)
      if (response !== undefined && response.headersSent && !response.writableFinished) socket.destroy()
    })
  })
  return server
}

/**
 * Answers what Node's HTTP parser refuses (a malformed request line, headers
 * over the limit, bad chunked encoding, a request too slow to arrive) with D1's
 * envelope and an `X-Request-Id`, instead of Node's bare status line. These
 * requests never reach the router, so the middleware above cannot see them.
 * Nothing is written in the middle of a response already under way, and the
 * rejected bytes are neither echoed nor logged.
 *
 * @since 0.1.0
 * @category middleware
 */
export const answerClientErrors = <S extends Http.Server>(server: S): S => {
  // The latest response on each connection: a keep-alive connection may carry a
  // malformed request after complete answers, which still deserves one.
  const latest = new WeakMap<object, Http.ServerResponse>()
  server.on("request", (request: Http.IncomingMessage, response: Http.ServerResponse) => {
    latest.set(request.socket, response)
  })
  server.on("clientError", (error: Error & { readonly code?: string }, socket: Duplex) => {
    // The parser reports again on every later chunk: the first answer stands.
    if (socket.writableEnded || socket.destroyed) return
    const response = latest.get(socket)
    const midResponse = response !== undefined && response.headersSent && !response.writableFinished
    if (error.code === "ECONNRESET" || !socket.writable || midResponse) {
      socket.destroy()
      return
    }
    const [status, code] = clientErrorStatus[error.code ?? ""] ?? [400, "invalid_request"] as const
    const requestId = makeId("req")
    const body = JSON.stringify({ error: { ...errorBody(code, defaultMessages[code]).error, request_id: requestId } })
    socket.end(
      `HTTP/1.1 ${status} ${reasonPhrases[status] ?? "Bad Request"}\r\n` +
        "Content-Type: application/json\r\n" +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-Id: ${requestId}\r\n` +
        "Connection: close\r\n\r\n" +
        body
    )
    setTimeout(() => socket.destroy(), clientErrorLingerMs).unref()
  })
  return server
}
