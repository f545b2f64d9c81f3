/**
 * OTLP export of traces and metrics, through effect's own `OtlpTracer` and `OtlpMetrics`, when
 * `OTEL_EXPORTER_OTLP_ENDPOINT` is set (D47; docs/operations.md, "Metrics and traces"). Unset, nothing
 * is exported and span recording stays as main.ts set it (off, unless `PPS_SPAN_LOG` asks).
 *
 * What leaves the process is chosen so that no amount, memo, key or secret does:
 * - spans carry their names (`Transfers.create`, `POST /v1/transfers`), ids and times, and the
 *   attributes effect's HTTP, RPC and SQL layers give them: method, status, path (ids at most),
 *   SQL text with placeholders; no header (effect records none unless asked), and every query
 *   parameter's value redacted (a decryption proof may travel in a query string, D20);
 * - a server span is named by its route's template, not its path;
 * - metrics are those of observability/Metrics.ts, whose labels are closed sets.
 * Logs are not exported. `observability.test.ts` checks the bodies a real receiver gets.
 *
 * Export runs in the background every few seconds (traces 5 s, metrics 10 s); a collector that
 * fails an export is skipped for 60 s and what was buffered is dropped (effect's exporter), so an
 * unreachable collector costs no memory and never slows a request.
 *
 * @since 0.9.0
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Effect, Layer, Option, Redacted, References } from "effect"
import { HttpMiddleware, type HttpServerRequest, UrlParams } from "effect/http"
import { OtlpMetrics, OtlpSerialization, OtlpTracer } from "effect/observability"
import { AppConfig, type OtlpSettings } from "../config/AppConfig.ts"
import { unmatchedRoute } from "./Metrics.ts"

/** Every query parameter's value is redacted in span attributes (`url.full`, `url.query`). */
const everyParameter: ReadonlyArray<RegExp> = [/./]

/**
 * `OTEL_EXPORTER_OTLP_HEADERS` (`key=value,key=value`, values percent-encoded, as the
 * OpenTelemetry specification writes them) as headers.
 *
 * @since 0.9.0
 * @category parsing
 */
export const parseHeaders = (text: string): Record<string, string> => {
  const headers: Record<string, string> = {}
  for (const entry of text.split(",")) {
    const at = entry.indexOf("=")
    if (at <= 0) continue
    const name = entry.slice(0, at).trim().toLowerCase()
    const value = entry.slice(at + 1).trim()
    if (name === "") continue
    try {
      headers[name] = decodeURIComponent(value)
    } catch {
      headers[name] = value
    }
  }
  return headers
}

/**
 * The names a server span takes: `METHOD /route/:template` (or `METHOD unmatched`).
 *
 * @since 0.9.0
 * @category models
 */
export type RouteNamer = (method: string, url: string) => string | undefined

const exportLayer = (settings: OtlpSettings, routeOf: RouteNamer) => {
  const base = settings.endpoint.replace(/\/+$/, "")
  const headers = Option.match(settings.headers, { onNone: () => ({}), onSome: (value) => parseHeaders(Redacted.value(value)) })
  const resource = { serviceName: settings.serviceName }
  const spanName = (request: HttpServerRequest.HttpServerRequest) =>
    `${request.method} ${routeOf(request.method, request.url.split("?")[0] ?? request.url) ?? unmatchedRoute}`
  return Layer.mergeAll(
    OtlpTracer.layer({ url: `${base}/v1/traces`, resource, headers }),
    OtlpMetrics.layer({ url: `${base}/v1/metrics`, resource, headers }),
    Layer.succeed(References.TracerEnabled, true),
    Layer.succeed(UrlParams.CurrentRedactedNames, everyParameter),
    Layer.succeed(HttpMiddleware.SpanNameGenerator, spanName)
  ).pipe(
    Layer.provide(settings.protocol === "http/json" ? OtlpSerialization.layerJson : OtlpSerialization.layerProtobuf),
    Layer.provide(NodeHttpClient.layerUndici)
  )
}

/**
 * The export when configured, nothing otherwise. It must be built beneath everything that
 * records (Server.ts): spans and metrics go to the tracer and registry in their context.
 *
 * @since 0.9.0
 * @category layers
 */
export const layer = (routeOf: RouteNamer) =>
  Layer.unwrap(Effect.gen(function*() {
    const { otlp } = yield* AppConfig
    return otlp === undefined ? Layer.empty : exportLayer(otlp, routeOf)
  }))
