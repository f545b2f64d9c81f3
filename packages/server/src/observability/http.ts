/**
 * `GET /metrics` on the admin listener: the registry in Prometheus's text format, through
 * effect's own `PrometheusMetrics`, after the gauges read at scrape time are refreshed
 * (Scrape.ts). Like the admin API beside it, it asks for `ADMIN_TOKEN` as a bearer token (D47)
 * (Prometheus: `authorization: { credentials_file: ... }`, the example in docs/operations.md); the admin listener stays on loopback or a private network.
 *
 * @since 0.9.0
 */
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { PrometheusMetrics } from "effect/observability"
import { Unauthorized } from "@pps/api/Errors"
import { makeAdminTokenCheck } from "../admin/http.ts"
import { makeRefresh } from "./Scrape.ts"

/**
 * Where the admin listener serves the metrics.
 *
 * @since 0.9.0
 * @category constants
 */
export const metricsPath = "/metrics"

/**
 * The (method, path) pair of the route, for the admin listener's route table.
 *
 * @since 0.9.0
 * @category constants
 */
export const metricsRoutePaths = [["GET", metricsPath]] as const

/** Prometheus's text exposition format. */
const contentType = "text/plain; version=0.0.4; charset=utf-8"

const bearerToken = /^Bearer +(\S+)$/i

const refusal = () => {
  const failure = Unauthorized.of("Missing or invalid admin token.")
  return HttpServerResponse.jsonUnsafe({ error: failure.error }, { status: Unauthorized.status, headers: { "www-authenticate": "Bearer" } })
}

/**
 * The route.
 *
 * @since 0.9.0
 * @category layers
 */
export const MetricsRoutes = Layer.unwrap(Effect.gen(function*() {
  const isAdminToken = yield* makeAdminTokenCheck
  const refresh = yield* makeRefresh
  return HttpRouter.add(
    "GET",
    metricsPath,
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const token = bearerToken.exec(request.headers["authorization"] ?? "")?.[1]
      if (token === undefined || !isAdminToken(token)) return refusal()
      yield* refresh
      return HttpServerResponse.text(yield* PrometheusMetrics.format(), { contentType })
    })
  )
}))
