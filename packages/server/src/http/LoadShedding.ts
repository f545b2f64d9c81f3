/**
 * The gate in front of the transfer decision (platform/Admission.ts): a
 * `POST /v1/transfers`, a refund (D43) or an approval of a held agent transaction is admitted, or
 * answered at once, before its key, body or idempotency claim cost anything, with
 * 503 `service_unavailable` and `Retry-After` (D1's envelope; the envelope
 * middleware adds the request id). Every other request passes untouched.
 *
 * @since 0.6.0
 */
import { Effect, Option } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { errorBody } from "@pps/api/Errors"
import { requestShed } from "../observability/Metrics.ts"
import { Admission } from "../platform/Admission.ts"

const approvalPath = /^\/v1\/agents\/transactions\/[^/]+\/approve$/
const refundPath = /^\/v1\/transfers\/[^/]+\/refund$/

/** The requests that start a transfer decision. */
const startsTransferDecision = (request: HttpServerRequest.HttpServerRequest): boolean => {
  if (request.method !== "POST") return false
  const path = request.url.split("?")[0] ?? request.url
  return path === "/v1/transfers" || approvalPath.test(path) || refundPath.test(path)
}

// Built once: past capacity a node answers hundreds of these a second, and each must cost as
// little as possible (no error object, whose stack trace alone was ~5 % of a loaded node's CPU).
// The envelope middleware adds the request id.
const atCapacityResponse = HttpServerResponse.jsonUnsafe(
  errorBody(
    "service_unavailable",
    "This node is at capacity for new transfers; retry after the number of seconds in Retry-After (with the same Idempotency-Key)."
  ),
  { status: 503 }
)

/** The refusal, counted (`pps_transfer_requests_shed_total`). */
const atCapacity = (retryAfterSeconds: number) =>
  Effect.as(requestShed, HttpServerResponse.setHeader(atCapacityResponse, "retry-after", String(retryAfterSeconds)))

/**
 * The early answer, the envelope's inner stage (before the body is read): a transfer decision
 * arriving while the node is at its limit is refused without reading anything. One that passes
 * reads its body outside the gate, so a slow upload holds no place, and is admitted (or, if the
 * node filled up meanwhile, refused) by `shedTransferLoad`.
 *
 * @since 0.7.0
 * @category middleware
 */
export const refuseAtLimit = (admission: Admission["Service"]) =>
<E, R>(
  inner: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    if (!startsTransferDecision(request)) return yield* inner
    const refused = yield* admission.refuseEarly
    return yield* (Option.isSome(refused) ? atCapacity(refused.value) : inner)
  })

/**
 * The middleware (inside the envelope middleware, around the endpoint: the body is read).
 *
 * @since 0.6.0
 * @category middleware
 */
export const shedTransferLoad = (admission: Admission["Service"]) =>
<E, R>(
  httpEffect: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    return yield* (startsTransferDecision(request) ? admission.gate(httpEffect, atCapacity) : httpEffect)
  })
