/**
 * Webhook delivery benchmark: deliveries per second to a local HTTPS receiver,
 * and the latency from an event's commit to its first delivery attempt
 * (p50/p99), in the embedded mode (PGlite, in-process bus) and the distributed
 * mode (PostgreSQL + NATS JetStream, when both answer on this machine).
 *
 *   node --disable-warning=ExperimentalWarning bench/webhooks.bench.ts [embedded|nats] [--no-record]
 *
 * Each mode's figures are appended to docs/benchmarks/results.jsonl (scripts/benchRecord.ts).
 *
 * Throughput: SUBSCRIPTIONS accounts with one subscription each get
 * EVENTS_PER_ACCOUNT events appended at once; deliveries/s counts from the
 * first append to the last delivery received. Latency: a steady stream of
 * events at RATE per second for a few seconds; each latency is the receiver's
 * arrival time minus the event's `created_at`.
 *
 * BENCH_CPU_PROFILE=<file> writes a CPU profile (Chrome DevTools format) of this process's main
 * thread over the throughput phase only, without the set-up. BENCH_DATABASE_THREAD=own|caller
 * (default `caller`, as the server's `EMBEDDED_DATABASE_THREAD`) says where the embedded mode's
 * PGlite runs. PPS_STATEMENT_LOG=<dir> counts the embedded database's statements (StatementLog.ts),
 * adds each phase's calls and milliseconds inside PGlite per delivery to the result, and prints
 * each phase's dearest statements per delivery on stderr.
 */
import { fork } from "node:child_process"
import * as fs from "node:fs"
import { Session } from "node:inspector/promises"
import * as os from "node:os"
import * as path from "node:path"
import { PgClient } from "@effect/sql-pg"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { EmbeddedDatabase, StatementLog } from "@pps/guardian"
import { Context, Effect, Layer, Logger, Option, Redacted, References, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { type AppConfigShape, AppConfig } from "../src/config/AppConfig.ts"
import type { StoredEvent } from "@pps/api/Events"
import { Outbox } from "../src/events/Outbox.ts"
import { ulid } from "../src/platform/Ids.ts"
import { testConfig } from "../test/support/TestServer.ts"
import { makeTestCa, removeTestCa } from "../test/support/webhooks-receiver.ts"
import { confirmedEvent, EventsServicesLive, newAccount, newWebhook } from "../test/support/webhooks-services.ts"
import { perTransfer, type StatementTotals, statementTable, totalsOf } from "./statementSummary.ts"
import { percentile } from "./stats.ts"
import { type Metric, recordResults } from "../../../scripts/benchRecord.ts"

const subscriptions = Number(process.env["BENCH_SUBSCRIPTIONS"] ?? "50")
const eventsPerAccount = Math.ceil(10_000 / subscriptions)
const concurrency = Number(process.env["BENCH_CONCURRENCY"] ?? "64")
const latencyRatePerSecond = 400
const latencySeconds = 5
const postgresUrl = process.env["PPS_TEST_POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres"
const natsUrl = process.env["PPS_TEST_NATS_URL"] ?? "nats://127.0.0.1:4222"
const profilePath = process.env["BENCH_CPU_PROFILE"]
const databaseThread = Schema.decodeUnknownSync(Schema.Literals(EmbeddedDatabase.databaseThreadings))(
  process.env["BENCH_DATABASE_THREAD"] ?? "caller"
)

const statementLog = process.env[StatementLog.variable]
if (statementLog !== undefined && statementLog !== "") StatementLog.start(path.join(statementLog, `webhooks-bench-${process.pid}.statements`))

/** Calls and ms inside PGlite so far, over every statement (zeros without a statement log). */
const statementTotals = () =>
  StatementLog.snapshot().reduce((sum, [, calls, ms]) => ({ calls: sum.calls + calls, ms: sum.ms + ms }), { calls: 0, ms: 0 })

/** This process's statement totals by text, as `statementSummary.ts` reads them from log files. */
const statementsByText = (): Map<string, StatementTotals> =>
  new Map([["webhooks-bench", totalsOf(StatementLog.snapshot())]])

/** What the database did per delivery between two readings of `statementTotals`. */
const perDelivery = (before: { calls: number; ms: number }, after: { calls: number; ms: number }, deliveries: number) => ({
  calls: Number(((after.calls - before.calls) / deliveries).toFixed(3)),
  ms: Number(((after.ms - before.ms) / deliveries).toFixed(3))
})

/** Starts the inspector's sampling profiler when BENCH_CPU_PROFILE is set; the returned stop writes the profile. */
const startProfile = async (): Promise<() => Promise<void>> => {
  if (profilePath === undefined) return async () => {}
  const session = new Session()
  session.connect()
  await session.post("Profiler.enable")
  await session.post("Profiler.start")
  return async () => {
    const { profile } = await session.post("Profiler.stop")
    fs.writeFileSync(profilePath, JSON.stringify(profile))
    session.disconnect()
  }
}

/** The receiver in a child process, driven over IPC. */
const startRemoteReceiver = (caDir: string) =>
  new Promise<{
    readonly url: string
    readonly count: () => Promise<number>
    readonly report: () => Promise<Array<[string, number]>>
    readonly reset: () => void
    readonly stop: () => void
  }>((resolve) => {
    const child = fork(new URL("./webhooks-receiver.ts", import.meta.url).pathname, [], {
      env: { ...process.env, PPS_BENCH_CA_DIR: caDir },
      execArgv: ["--disable-warning=ExperimentalWarning"]
    })
    const ask = <A>(question: string, key: string) =>
      new Promise<A>((answer) => {
        const listener = (message: Record<string, unknown>) => {
          if (key in message) {
            child.off("message", listener)
            answer(message[key] as A)
          }
        }
        child.on("message", listener)
        child.send(question)
      })
    child.once("message", (message: { url: string }) =>
      resolve({
        url: message.url,
        count: () => ask<number>("count", "count"),
        report: () => ask<Array<[string, number]>>("report", "arrivals"),
        reset: () => child.send("reset"),
        stop: () => child.kill()
      }))
  })

const freshDatabase = Effect.gen(function*() {
  const name = `pps_bench_${ulid().toLowerCase()}`
  const run = (statement: string) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(statement)
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(postgresUrl) })), Effect.orDie)
  yield* Effect.acquireRelease(run(`CREATE DATABASE ${name}`), () => run(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
  const url = new URL(postgresUrl)
  url.pathname = `/${name}`
  return url.toString()
})

const runMode = (mode: "embedded" | "nats") =>
  Effect.gen(function*() {
    const ca = makeTestCa()
    yield* Effect.addFinalizer(() => Effect.sync(() => removeTestCa(ca)))
    const receiver = yield* Effect.acquireRelease(
      Effect.promise(() => startRemoteReceiver(ca.dir)),
      (r) => Effect.sync(() => r.stop())
    )
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-bench-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true })))
    const stream = `PPS_BENCH_${ulid()}`
    const overrides: Partial<AppConfigShape> = mode === "embedded"
      ? { webhookCaFile: Option.some(ca.caFile), webhookConcurrency: concurrency, embeddedDatabaseThread: databaseThread }
      : {
        webhookCaFile: Option.some(ca.caFile),
        webhookConcurrency: concurrency,
        databaseUrl: Option.some(Redacted.make(yield* freshDatabase)),
        databasePoolMax: 20,
        apiKeyPepper: Option.some(Redacted.make("bench-pepper-0123456789abcdef0123456789abcdef")),
        walletKek: Option.some(Redacted.make(Buffer.alloc(32, 7).toString("base64"))),
        adminToken: Option.some(Redacted.make("adm_bench_token_0123456789abcdef0123456789")),
        natsUrl: Option.some(natsUrl),
        natsStream: stream,
        natsSubjectPrefix: `bench.${stream.toLowerCase()}`
      }
    if (mode === "nats") {
      yield* Effect.addFinalizer(() =>
        Effect.promise(async () => {
          const nc = await connect({ servers: natsUrl })
          await (await jetstreamManager(nc)).streams.delete(stream).catch(() => false)
          await nc.close()
        })
      )
    }
    const services = yield* Layer.build(
      EventsServicesLive.pipe(
        Layer.provideMerge(Layer.succeed(AppConfig, testConfig(dataDir, overrides))),
        Layer.provide(Layer.mergeAll(Logger.layer([Logger.consolePretty()]), Layer.succeed(References.MinimumLogLevel, "Warn")))
      )
    )
    const outbox = Context.get(services, Outbox)
    const accounts: Array<{ readonly accountId: string; readonly handle: string }> = []
    for (let n = 0; n < subscriptions; n++) {
      const account = yield* newAccount(services, `bench-${mode}-${n}`)
      yield* newWebhook(services, { accountId: account.accountId, mode: "test" }, `${receiver.url}/sub-${n}`)
      accounts.push(account)
    }

    // Throughput: everything at once.
    const total = subscriptions * eventsPerAccount
    const stopProfile = yield* Effect.promise(startProfile)
    const statementsAtStart = statementTotals()
    const byTextAtStart = statementsByText()
    const startedMs = Date.now()
    for (let i = 0; i < eventsPerAccount; i++) {
      yield* outbox.append(accounts.map((account) => confirmedEvent(account.accountId, account.handle))).pipe(Effect.orDie)
    }
    const appendedMs = Date.now()
    while ((yield* Effect.promise(() => receiver.count())) < total) {
      yield* Effect.promise(() => new Promise((r) => setTimeout(r, 20)))
    }
    yield* Effect.promise(stopProfile)
    const lastMs = Math.max(...(yield* Effect.promise(() => receiver.report())).map(([, ms]) => ms))
    const throughput = total / ((lastMs - startedMs) / 1000)

    const statementsAfterThroughput = statementTotals()
    const byTextAfterThroughput = statementsByText()

    // Latency: a steady rate.
    receiver.reset()
    const latencyEvents: Array<StoredEvent> = []
    const tickMs = 50
    const perTick = Math.round((latencyRatePerSecond * tickMs) / 1000)
    const ticks = (latencySeconds * 1000) / tickMs
    for (let t = 0; t < ticks; t++) {
      const tickStart = Date.now()
      const batch = Array.from({ length: perTick }, (_, i) => accounts[(t * perTick + i) % accounts.length]!)
      latencyEvents.push(...(yield* outbox.append(batch.map((a) => confirmedEvent(a.accountId, a.handle))).pipe(Effect.orDie)))
      const spent = Date.now() - tickStart
      if (spent < tickMs) yield* Effect.promise(() => new Promise((r) => setTimeout(r, tickMs - spent)))
    }
    while ((yield* Effect.promise(() => receiver.count())) < latencyEvents.length) {
      yield* Effect.promise(() => new Promise((r) => setTimeout(r, 20)))
    }
    if (StatementLog.recorder() !== undefined) {
      // On stderr, so that stdout stays one JSON line a mode.
      const table = (before: Map<string, StatementTotals>, after: Map<string, StatementTotals>, deliveries: number) =>
        statementTable(perTransfer(before, after, deliveries), 10, "delivery")
      console.error(`${mode}, throughput phase:\n${table(byTextAtStart, byTextAfterThroughput, total)}`)
      console.error(`${mode}, latency phase:\n${table(byTextAfterThroughput, statementsByText(), latencyEvents.length)}`)
    }
    const createdAt = new Map(latencyEvents.map((event) => [event.eventId, Date.parse(event.createdAt)]))
    const latencies = (yield* Effect.promise(() => receiver.report()))
      .map(([eventId, receivedAtMs]) => receivedAtMs - createdAt.get(eventId)!)
      .sort((a, b) => a - b)
    return {
      mode,
      ...(mode === "embedded" ? { databaseThread } : {}),
      subscriptions,
      concurrency,
      deliveries: total,
      appendSeconds: (appendedMs - startedMs) / 1000,
      deliveriesPerSecond: Math.round(throughput),
      latencyEvents: latencyEvents.length,
      latencyRatePerSecond,
      firstAttemptP50Ms: percentile(latencies, 0.5),
      firstAttemptP99Ms: percentile(latencies, 0.99),
      firstAttemptMaxMs: latencies.at(-1),
      ...(StatementLog.recorder() === undefined ? {} : {
        statementsPerDelivery: {
          throughput: perDelivery(statementsAtStart, statementsAfterThroughput, total),
          latency: perDelivery(statementsAfterThroughput, statementTotals(), latencyEvents.length)
        }
      })
    }
  }).pipe(Effect.scoped)

const modeArgument = process.argv.slice(2).find((arg) => arg !== "--no-record" && arg !== "--")
const modes = (modeArgument === undefined ? ["embedded", "nats"] : [modeArgument]) as Array<"embedded" | "nats">
const metrics: Array<Metric> = []
for (const mode of modes) {
  const result = await Effect.runPromise(runMode(mode))
  console.log(JSON.stringify(result))
  metrics.push(
    { metric: `${mode}: deliveries/s`, value: result.deliveriesPerSecond, unit: "deliveries/s", headline: true },
    { metric: `${mode}: commit → first attempt p50`, value: result.firstAttemptP50Ms, unit: "ms" },
    { metric: `${mode}: commit → first attempt p99`, value: result.firstAttemptP99Ms, unit: "ms", headline: true }
  )
}
// One run, both modes: recorded together so that the table shows them side by side.
recordResults("webhooks", metrics)
