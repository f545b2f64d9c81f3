/**
 * What recording and exporting spans costs the process that makes them, per span, away from the
 * noise of a whole server (`npm run -s bench:spans -- --cost`): one process builds the same
 * request-shaped tree of spans over and over (a server span with a request's attributes, a few
 * `Effect.fn` steps, and SQL-statement spans with their text, about the shape of a
 * `POST /v1/transfers` trace on the api server: tests/observability.test.ts's export had 26-31
 * spans a create) and its CPU (`process.cpuUsage`, user + system) is compared across:
 * - `off`: span recording off (`References.TracerEnabled` false: the server's default);
 * - `dropped`: recording on, effect's native tracer, nothing exported;
 * - `otlp protobuf` / `otlp json`: effect's `OtlpTracer` exporting to an OTLP/HTTP receiver in
 *   a child process (its CPU is not counted), flushed before the CPU is read.
 * The difference from `off`, divided by the spans made, is the cost of a span; times the spans
 * of a create, the cost a transfer pays.
 *
 * `measureMetricCost` does the same for the metrics a create updates on the server whatever the
 * configuration (observability/Metrics.ts): its request's counter and histogram, two timed guardian
 * calls and four transfer stages, against the same loop without them.
 */
import { spawn } from "node:child_process"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Effect, Layer, References } from "effect"
import { OtlpExporter, OtlpSerialization, OtlpTracer } from "effect/observability"
import { MetricsRegistryLive, observeRequest, timeGuardianCall, transferReached } from "../src/observability/Metrics.ts"

/** Spans in one request-shaped tree: the server span, `stepSpans` steps and the rest SQL statements. */
export const spansPerRequest = 28
const stepSpans = 8

const sqlAttributes = {
  "db.system.name": "postgresql",
  "effect.sql.method": "execute",
  "db.query.text":
    "INSERT INTO transfers (transfer_id, mode, sender_account_id, recipient_account_id, status, created_at) VALUES ($1, $2, $3, $4, 'pending', $5)"
}

const serverAttributes = {
  "http.route": "/v1/transfers",
  "http.request.method": "POST",
  "url.full": "http://127.0.0.1:8080/v1/transfers",
  "url.path": "/v1/transfers",
  "url.scheme": "http",
  "server.address": "127.0.0.1",
  "server.port": 8080,
  "user_agent.original": "pps-sdk/0.4.0",
  "client.address": "127.0.0.1",
  "http.response.status_code": 201
}

const statement = Effect.void.pipe(Effect.withSpan("postgresql", { attributes: sqlAttributes }, { captureStackTrace: false }))

const step = Effect.fn("Transfers.step")(function*(statements: number) {
  for (let i = 0; i < statements; i++) yield* statement
})

const sqlSpans = spansPerRequest - 1 - stepSpans
const request = Effect.gen(function*() {
  for (let i = 0; i < stepSpans; i++) yield* step(Math.floor(sqlSpans / stepSpans) + (i < sqlSpans % stepSpans ? 1 : 0))
}).pipe(Effect.withSpan("POST /v1/transfers", { kind: "server", attributes: serverAttributes }))

/** An OTLP/HTTP receiver in a child process (so its CPU is not this process's): answers 200 to everything. */
const startReceiver = () =>
  new Promise<{ readonly url: string; readonly stop: () => void }>((resolve, reject) => {
    const child = spawn(process.execPath, [
      "-e",
      `const s = require("node:http").createServer((q, r) => { q.resume(); q.on("end", () => r.writeHead(200, { "content-type": "application/json" }).end("{}")) });
       s.listen(0, "127.0.0.1", () => process.stdout.write(String(s.address().port) + "\\n"))`
    ], { stdio: ["ignore", "pipe", "inherit"] })
    child.once("error", reject)
    child.stdout.once("data", (chunk: Buffer) => resolve({ url: `http://127.0.0.1:${chunk.toString().trim()}`, stop: () => child.kill() }))
  })

/** CPU ms this process spent running `requests` trees (and, with an exporter, flushing them). */
const cpuOf = (requests: number, layer: Layer.Layer<never> | Layer.Layer<OtlpExporter.Flusher>) =>
  Effect.gen(function*() {
    const flush = Effect.serviceOption(OtlpExporter.Flusher).pipe(
      Effect.flatMap((flusher) => (flusher._tag === "Some" ? flusher.value.flush : Effect.void))
    )
    // Warm-up: the JIT, and the exporter's first connection.
    yield* Effect.forEach(Array.from({ length: 500 }), () => request, { discard: true })
    yield* flush
    const before = process.cpuUsage()
    for (let i = 0; i < requests; i++) {
      yield* request
      // As a server does: the exporter's interval fiber gets its turns between requests.
      if (i % 200 === 199) yield* Effect.yieldNow
    }
    yield* flush
    const used = process.cpuUsage(before)
    return (used.user + used.system) / 1000
  }).pipe(Effect.scoped, Effect.provide(layer))

/** One measurement per configuration; µs per span over `off`. */
export const measureSpanCost = async (requests: number) => {
  const receiver = await startReceiver()
  try {
    const exporting = (serialization: Layer.Layer<OtlpSerialization.OtlpSerialization>) =>
      Layer.mergeAll(
        OtlpTracer.layer({ url: `${receiver.url}/v1/traces`, resource: { serviceName: "span-cost" } }),
        Layer.succeed(References.TracerEnabled, true)
      ).pipe(Layer.provide(serialization), Layer.provide(NodeHttpClient.layerUndici))
    const configurations = [
      ["off", Layer.succeed(References.TracerEnabled, false)],
      ["dropped", Layer.succeed(References.TracerEnabled, true)],
      ["otlp protobuf", exporting(OtlpSerialization.layerProtobuf)],
      ["otlp json", exporting(OtlpSerialization.layerJson)]
    ] as const
    const cpuMs: Record<string, number> = {}
    // Twice, in turn, keeping each configuration's lower figure: the machine is shared.
    for (let round = 0; round < 2; round++) {
      for (const [name, layer] of configurations) {
        const ms = await Effect.runPromise(cpuOf(requests, layer))
        cpuMs[name] = Math.min(cpuMs[name] ?? Number.POSITIVE_INFINITY, ms)
      }
    }
    return cpuMs
  } finally {
    receiver.stop()
  }
}

/** What a create's metric updates cost, in µs a create (CPU of this process, the lower of two rounds). */
export const measureMetricCost = async (requests: number) => {
  const guardianCall = Effect.void
  const withMetrics = Effect.gen(function*() {
    yield* transferReached("created", "test")
    yield* guardianCall.pipe(timeGuardianCall("authorize"))
    yield* transferReached("authorized", "test")
    yield* transferReached("submitted", "test")
    yield* guardianCall.pipe(timeGuardianCall("settle"))
    yield* transferReached("confirmed", "test")
    yield* observeRequest("POST", "/v1/transfers", 201, 12)
  })
  const without = Effect.gen(function*() {
    yield* guardianCall
    yield* guardianCall
  })
  const cpuOfLoop = (body: Effect.Effect<void>) =>
    Effect.gen(function*() {
      for (let i = 0; i < 2_000; i++) yield* body
      const before = process.cpuUsage()
      for (let i = 0; i < requests; i++) yield* body
      const used = process.cpuUsage(before)
      return (used.user + used.system) / 1000
    }).pipe(Effect.provide(MetricsRegistryLive))
  let withMs = Number.POSITIVE_INFINITY
  let withoutMs = Number.POSITIVE_INFINITY
  for (let round = 0; round < 2; round++) {
    withoutMs = Math.min(withoutMs, await Effect.runPromise(cpuOfLoop(without)))
    withMs = Math.min(withMs, await Effect.runPromise(cpuOfLoop(withMetrics)))
  }
  return ((withMs - withoutMs) * 1000) / requests
}
