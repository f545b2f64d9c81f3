/**
 * `pps listen` latency (D58): from an event's commit to its arrival, forwarded by the real
 * `pps listen` child process, at a local HTTP receiver; p50/p99/max over EVENTS events recorded
 * at RATE per second. Two set-ups: `embedded` (one node on PGlite) and `postgres` (two api nodes
 * on one PostgreSQL database: the stream is served by the first, the events recorded by the
 * second, so each reaches the stream through the nodes' notification).
 *
 *   node --disable-warning=ExperimentalWarning bench/listen.bench.ts [embedded|postgres] [--no-record]
 *
 * The issue's goal: p99 < 200 ms over 100 events. Each set-up's figures are appended to
 * docs/benchmarks/results.jsonl (scripts/benchRecord.ts).
 */
import { spawn } from "node:child_process"
import * as http from "node:http"
import type * as net from "node:net"
import * as path from "node:path"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { Outbox } from "../src/events/Outbox.ts"
import { createAccount } from "../test/support/http.ts"
import { freshPostgresDatabase, makeTestServer, pglite, postgres, TestServer } from "../test/support/TestServer.ts"
import { buildServices, confirmedEvent } from "../test/support/webhooks-services.ts"
import { percentile } from "./stats.ts"
import { type Metric, recordResults, recording, repositoryRoot } from "../../../scripts/benchRecord.ts"

const events = Number(process.env["BENCH_EVENTS"] ?? "100")
const ratePerSecond = Number(process.env["BENCH_RATE"] ?? "20")
const setups = process.argv.slice(2).filter((arg) => arg === "embedded" || arg === "postgres")

/** A receiver noting each forwarded event's arrival time, by event id. */
const startReceiver = async () => {
  const arrivals = new Map<string, number>()
  const server = http.createServer((request, response) => {
    const arrivedAt = performance.now()
    const eventId = String(request.headers["x-service-event-id"] ?? "")
    request.resume()
    request.on("end", () => {
      arrivals.set(eventId, arrivedAt)
      response.writeHead(200).end()
    })
  })
  const port = await new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port)))
  return { arrivals, url: `http://127.0.0.1:${port}/hook`, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

/** `pps listen --json` as a user runs it; resolves once it printed its ready line. */
const startListen = (baseUrl: string, apiKey: string, forwardTo: string) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<ReturnType<typeof spawn>>((resolve, reject) => {
        const child = spawn(process.execPath, [
          "--disable-warning=ExperimentalWarning",
          path.join(repositoryRoot, "packages/sdk/src/cli.ts"),
          "listen",
          "--forward-to",
          forwardTo,
          "--json"
        ], { env: { ...process.env, PPS_API_KEY: apiKey, PPS_BASE_URL: baseUrl }, stdio: ["ignore", "pipe", "inherit"] })
        let output = ""
        child.stdout.on("data", (chunk: Buffer) => {
          output += chunk.toString()
          // Ready once its stream is open: the first line, then a moment for the connection.
          if (output.includes("\"ready\"")) setTimeout(() => resolve(child), 1_000)
        })
        child.once("exit", (code) => reject(new Error(`pps listen exited ${code}: ${output}`)))
      })
    ),
    (child) => Effect.sync(() => child.kill("SIGINT"))
  )

/** Records `events` events at `ratePerSecond` on `node`; returns each one's commit time by id. */
const recordEvents = (node: Context.Context<Outbox | SqlClient.SqlClient>, accountId: string) =>
  Effect.gen(function*() {
    const committed = new Map<string, number>()
    const outbox = Context.get(node, Outbox)
    for (let i = 0; i < events; i++) {
      const [stored] = yield* outbox.append([confirmedEvent(accountId, "listener", "test", `tr_bench_${i}`)]).pipe(Effect.orDie)
      committed.set(stored!.eventId, performance.now())
      yield* Effect.sleep(1_000 / ratePerSecond)
    }
    return committed
  })

const measure = (setup: "embedded" | "postgres") =>
  Effect.gen(function*() {
    const databaseUrl = setup === "postgres" ? Option.some(Redacted.make(yield* freshPostgresDatabase)) : Option.none()
    const server = Context.get(
      yield* Layer.build(makeTestServer(setup === "postgres" ? { database: postgres, config: { databaseUrl } } : { database: pglite })),
      TestServer
    )
    const recorder = setup === "postgres"
      ? (yield* buildServices({
        databaseUrl,
        apiKeyPepper: Option.some(Redacted.make("test-pepper-0123456789abcdef0123456789abcdef")),
        walletKek: Option.some(Redacted.make(Buffer.alloc(32, 7).toString("base64"))),
        adminToken: Option.some(Redacted.make("adm_test_token_0123456789abcdef0123456789"))
      })).services
      : server.services
    const account = yield* createAccount(server, "listener")
    const receiver = yield* Effect.acquireRelease(Effect.promise(startReceiver), (started) => Effect.promise(started.close))
    yield* startListen(server.baseUrl, account.api_key, receiver.url)
    const committed = yield* recordEvents(recorder, account.account_id)
    const deadline = Date.now() + 10_000
    while (receiver.arrivals.size < committed.size && Date.now() < deadline) yield* Effect.sleep(50)
    const delays = [...committed].flatMap(([id, at]) => {
      const arrived = receiver.arrivals.get(id)
      return arrived === undefined ? [] : [arrived - at]
    })
    const result = {
      setup,
      events: committed.size,
      forwarded: delays.length,
      p50_ms: percentile(delays, 0.5),
      p99_ms: percentile(delays, 0.99),
      max_ms: Math.max(...delays)
    }
    process.stdout.write(`${JSON.stringify(result)}\n`)
    return result
  }).pipe(Effect.scoped)

const results = await Effect.runPromise(Effect.forEach(setups.length === 0 ? ["embedded", "postgres"] as const : setups, measure))
if (recording()) {
  const metrics: Array<Metric> = results.flatMap((result): Array<Metric> => [
    { metric: `${result.setup} recorded → forwarded p50`, value: Number(result.p50_ms.toFixed(1)), unit: "ms" },
    { metric: `${result.setup} recorded → forwarded p99`, value: Number(result.p99_ms.toFixed(1)), unit: "ms", goal: "<= 200", headline: true },
    { metric: `${result.setup} recorded → forwarded max`, value: Number(result.max_ms.toFixed(1)), unit: "ms" },
    { metric: `${result.setup} events forwarded`, value: result.forwarded, unit: "events", goal: `>= ${result.events}` }
  ])
  recordResults("listen", metrics)
}
