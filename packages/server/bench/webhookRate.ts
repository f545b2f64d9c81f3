/**
 * Webhook delivery rate against a bare Node client (issue 49, goal 6: ≥ 0.5 of the bare rate with
 * 1 subscription and with 50), in one run, on loopback only.
 *
 *   node --disable-warning=ExperimentalWarning bench/webhookRate.ts [--deliveries 2000]
 *     [--pairs 1] [--subscriptions 1,50] [--timeout 120] [--postgres] [--append-in-round] [--database-thread own] [--no-record]
 *
 * One HTTPS receiver in a child process (bench/webhooks-receiver.ts, a throwaway CA, answers 200).
 * For each subscription count S, alternating A B B A (`--pairs` times):
 *
 * - A, the service: the embedded default (PGlite with durable commits, the in-process bus, the
 *   delivery worker with its configured concurrency), or with `--postgres` a fresh database on the
 *   PostgreSQL server of the tests (PPS_TEST_POSTGRES_URL, default 127.0.0.1:5432: its rows written
 *   by another process, off this one's thread), with S subscriptions; `--deliveries` events
 *   appended through the outbox, spread over the S accounts, timed from their commit (or with
 *   `--append-in-round` from before the append) to the moment every one of their deliveries is
 *   recorded `succeeded` in the database (read once the receiver has counted them all): relay,
 *   fan-out, claim, sign, POST, record.
 * - B, the bare client: `node:https` with the worker's agent settings (keep-alive, the same socket
 *   limit, the same `SecureContext`), S loops posting one request at a time each (as the worker
 *   serves a subscription: one request of a subscription open at once), the same payload bytes
 *   (read from the service's events), signed per request with the subscription's secret and the
 *   same header set (Signature.ts), recording nothing.
 *
 * Both warm up first (JIT, TLS sessions, the pool). Prints one JSON line per subscription count
 * and the ratio A/B (the mean of the A rounds over the mean of the B rounds), and each side's CPU
 * (this process's user + system time over its rounds) a delivery, which a busy machine moves less
 * than the rates; the load average is recorded with the results, since the machine may be shared.
 *
 * `--database-thread own`: the embedded database on a worker thread of its own
 * (EMBEDDED_DATABASE_THREAD=own), to see what the webhook path costs this thread without it.
 *
 * PPS_STATEMENT_LOG=<dir> counts the embedded database's statements (StatementLog.ts) and prints,
 * on stderr, each subscription count's dearest statements per delivery over its A rounds.
 * BENCH_CPU_PROFILE=<prefix> writes a CPU profile of this process over each A round (the
 * receiver's work is in its own process), `<prefix>-<subscriptions>-<round>.cpuprofile`.
 */
import { fork } from "node:child_process"
import * as fs from "node:fs"
import * as https from "node:https"
import { Session } from "node:inspector/promises"
import * as os from "node:os"
import * as path from "node:path"
import { parseArgs } from "node:util"
import * as tls from "node:tls"
import { StatementLog } from "@pps/guardian"
import { Context, Effect, Layer, Logger, Option, Redacted, References } from "effect"
import { SqlClient } from "effect/sql"
import { AppConfig } from "../src/config/AppConfig.ts"
import { Outbox } from "../src/events/Outbox.ts"
import { ulid } from "../src/platform/Ids.ts"
import { deliveryHeaders } from "../src/webhooks/Signature.ts"
import { webhookAgentOptions } from "../src/webhooks/WebhookClient.ts"
import { distributedSecrets, freshPostgresDatabase, testConfig } from "../test/support/TestServer.ts"
import { makeTestCa, removeTestCa, type TestCa } from "../test/support/webhooks-receiver.ts"
import { confirmedEvent, EventsServicesLive, newAccount, newWebhook } from "../test/support/webhooks-services.ts"
import { perTransfer, type StatementTotals, statementTable, totalsOf } from "./statementSummary.ts"
import { type Metric, recordOption, recordResults } from "../../../scripts/benchRecord.ts"

const { values: options } = parseArgs({
  // pnpm passes its `--` separator on: after it every option would be read as a positional.
  args: process.argv.slice(2).filter((arg) => arg !== "--"),
  options: {
    deliveries: { type: "string", default: "2000" },
    pairs: { type: "string", default: "1" },
    subscriptions: { type: "string", default: "1,50" },
    timeout: { type: "string", default: "120" },
    postgres: { type: "boolean", default: false },
    "append-in-round": { type: "boolean", default: false },
    "database-thread": { type: "string", default: "caller" },
    ...recordOption
  }
})
const deliveriesPerRound = Number(options.deliveries)
const pairs = Number(options.pairs)
const subscriptionCounts = options.subscriptions.split(",").map(Number)
const roundTimeoutMs = Number(options.timeout) * 1000
const warmUpDeliveries = 200

const statementLog = process.env[StatementLog.variable]
if (statementLog !== undefined && statementLog !== "") StatementLog.start(path.join(statementLog, `webhook-rate-${process.pid}.statements`))

const profilePrefix = process.env["BENCH_CPU_PROFILE"]

/** Profiles `round` when BENCH_CPU_PROFILE is set, into `<prefix>-<name>.cpuprofile`. */
const profiled = <A, E, R>(name: string, round: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  profilePrefix === undefined ? round : Effect.acquireUseRelease(
    Effect.promise(async () => {
      const session = new Session()
      session.connect()
      await session.post("Profiler.enable")
      await session.post("Profiler.start")
      return session
    }),
    () => round,
    (session) =>
      Effect.promise(async () => {
        const { profile } = await session.post("Profiler.stop")
        fs.writeFileSync(`${profilePrefix}-${name}.cpuprofile`, JSON.stringify(profile))
        session.disconnect()
      })
  )

/** The statements run so far by text (empty without a statement log), as statementSummary.ts reads them. */
const statementsByText = (): Map<string, StatementTotals> =>
  new Map([["service", totalsOf(StatementLog.snapshot())]])

interface RemoteReceiver {
  readonly url: string
  readonly count: () => Promise<number>
  readonly reset: () => void
  readonly stop: () => void
}

/** The receiver in a child process (its TLS work off this process's CPU), driven over IPC. */
const startRemoteReceiver = (caDir: string) =>
  new Promise<RemoteReceiver>((resolve) => {
    const child = fork(new URL("./webhooks-receiver.ts", import.meta.url).pathname, [], {
      env: { ...process.env, PPS_BENCH_CA_DIR: caDir },
      execArgv: ["--disable-warning=ExperimentalWarning"]
    })
    const count = () =>
      new Promise<number>((answer) => {
        const listener = (message: Record<string, unknown>) => {
          if ("count" in message) {
            child.off("message", listener)
            answer(Number(message["count"]))
          }
        }
        child.on("message", listener)
        child.send("count")
      })
    child.once("message", (message: { url: string }) =>
      resolve({ url: message.url, count, reset: () => child.send("reset"), stop: () => child.kill() }))
  })

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Polls `done` every few milliseconds until it holds; dies after the round's time limit. */
const waitUntil = (what: string, done: () => Promise<boolean>) =>
  Effect.promise(async () => {
    const deadline = Date.now() + roundTimeoutMs
    while (!(await done())) {
      if (Date.now() > deadline) throw new Error(`timed out after ${roundTimeoutMs} ms waiting for ${what}`)
      await sleep(5)
    }
  })

interface Subscriber {
  readonly accountId: string
  readonly handle: string
  readonly path: string
  readonly secret: string
}

/** The service with `count` subscriptions on the receiver, in the current scope. */
const buildService = (ca: TestCa, receiverUrl: string, count: number) =>
  Effect.gen(function*() {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-bench-rate-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true })))
    const database = options.postgres
      ? { databaseUrl: Option.some(Redacted.make(yield* freshPostgresDatabase)), ...distributedSecrets }
      : {}
    const thread = { embeddedDatabaseThread: options["database-thread"] === "own" ? "own" as const : "caller" as const }
    const services = yield* Layer.build(
      EventsServicesLive.pipe(
        Layer.provideMerge(Layer.succeed(AppConfig, testConfig(dataDir, { webhookCaFile: Option.some(ca.caFile), ...thread, ...database }))),
        Layer.provide(Layer.mergeAll(Logger.layer([Logger.consolePretty()]), Layer.succeed(References.MinimumLogLevel, "Warn")))
      )
    )
    const subscribers: Array<Subscriber> = []
    for (let n = 0; n < count; n++) {
      const account = yield* newAccount(services, `rate-${count}-${n}`)
      const pathname = `/s${count}-${n}`
      const created = yield* newWebhook(services, { accountId: account.accountId, mode: "test" }, `${receiverUrl}${pathname}`)
      subscribers.push({ ...account, path: pathname, secret: created.secret })
    }
    return { services, subscribers }
  })

type Service = Effect.Success<ReturnType<typeof buildService>>

const succeededCount = (services: Service["services"]) =>
  Effect.gen(function*() {
    const sql = Context.get(services, SqlClient.SqlClient)
    const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'succeeded'`
    return row?.n ?? 0
  }).pipe(Effect.orDie)

/**
 * A: `deliveries` events through the service, until every delivery is recorded `succeeded`.
 * Returns deliveries a second and this process's CPU milliseconds over the timed part.
 *
 * What is timed: by default from the commit of the events (appended as the transfers path appends
 * them, 50 an insert, here in one transaction so none is relayed before the clock starts): the
 * relay, fan-out, claim, due read, signing, the POST and the record, i.e. the webhook path. The
 * events' append is the transfers path's write (the event feed and the API read the same rows
 * with no subscription at all), and the bare client is handed its payloads ready too, so charging
 * the append to the service would compare it with more than the issue names. `--append-in-round`
 * times the append as well (50 a commit, interleaved with the deliveries), as until 2026-11-30.
 */
const serviceRound = (service: Service, receiver: RemoteReceiver, deliveries: number) =>
  Effect.gen(function*() {
    const { services, subscribers } = service
    const outbox = Context.get(services, Outbox)
    const sql = Context.get(services, SqlClient.SqlClient)
    const before = yield* succeededCount(services)
    receiver.reset()
    // Built before the clock: the bare client's payloads are built before its clock too.
    const events = Array.from({ length: deliveries }, (_, i) => {
      const subscriber = subscribers[i % subscribers.length]!
      return confirmedEvent(subscriber.accountId, subscriber.handle, "test", `tr_${ulid()}`)
    })
    // As the transfers path appends: many small inserts (at most 50 events each).
    const append = Effect.forEach(
      Array.from({ length: Math.ceil(events.length / 50) }, (_, i) => events.slice(i * 50, i * 50 + 50)),
      (chunk) => outbox.append(chunk),
      { discard: true }
    ).pipe(Effect.orDie)
    if (!options["append-in-round"]) yield* sql.withTransaction(append).pipe(Effect.orDie)
    const startedMs = performance.now()
    const cpuBefore = process.cpuUsage()
    if (options["append-in-round"]) yield* append
    yield* waitUntil("the receiver to count every delivery", async () => (await receiver.count()) >= deliveries)
    const recorded = () => Effect.runPromise(succeededCount(services)).then((n) => n - before >= deliveries)
    yield* waitUntil("every delivery to be recorded", recorded)
    const rate = deliveries / ((performance.now() - startedMs) / 1000)
    const cpu = process.cpuUsage(cpuBefore)
    return { rate, cpuMs: (cpu.user + cpu.system) / 1000 }
  })

/** The payload bytes the service sent, to post the same ones. */
const storedPayloads = (services: Service["services"]) =>
  Effect.gen(function*() {
    const sql = Context.get(services, SqlClient.SqlClient)
    const rows = yield* sql<{ payload: string }>`
      SELECT e.payload FROM webhook_deliveries d JOIN events e ON e.event_id = d.event_id LIMIT 500`
    return rows.map((row) => new TextEncoder().encode(row.payload))
  }).pipe(Effect.orDie)

/** One signed POST on the bare agent; resolves with the status. */
const barePost = (agent: https.Agent, url: URL, subscriber: Subscriber, body: Uint8Array) =>
  new Promise<number>((resolve, reject) => {
    const headers = deliveryHeaders({
      secrets: [subscriber.secret],
      eventId: `evt_${ulid()}`,
      deliveryId: `dlv_${ulid()}`,
      timestampSeconds: Math.floor(Date.now() / 1000),
      body
    })
    const request = https.request({
      hostname: url.hostname,
      port: url.port,
      path: subscriber.path,
      method: "POST",
      headers: { ...headers, "content-length": String(body.byteLength) },
      agent
    }, (response) => {
      response.resume()
      response.once("end", () => resolve(response.statusCode ?? 0))
      response.once("error", reject)
    })
    request.once("error", reject)
    request.end(body)
  })

/**
 * B: the bare client, one loop per subscription posting one request at a time, `deliveries` in
 * all. Returns deliveries a second.
 */
const bareRound = async (
  agent: https.Agent,
  receiverUrl: string,
  subscribers: ReadonlyArray<Subscriber>,
  payloads: ReadonlyArray<Uint8Array>,
  deliveries: number
) => {
  const url = new URL(receiverUrl)
  let next = 0
  const startedMs = performance.now()
  const loop = async (subscriber: Subscriber) => {
    while (next < deliveries) {
      const body = payloads[next % payloads.length]!
      next += 1
      const status = await barePost(agent, url, subscriber, body)
      if (status !== 200) throw new Error(`the receiver answered ${status}`)
    }
  }
  await Promise.all(subscribers.map(loop))
  return deliveries / ((performance.now() - startedMs) / 1000)
}

const mean = (values: ReadonlyArray<number>) => values.reduce((sum, value) => sum + value, 0) / values.length

/** Warm-up, then `pairs` × A B B A for one subscription count. */
const measure = (ca: TestCa, receiver: RemoteReceiver, count: number) =>
  Effect.gen(function*() {
    const service = yield* buildService(ca, receiver.url, count)
    const agent = new https.Agent({
      ...webhookAgentOptions,
      secureContext: tls.createSecureContext({ ca: [...tls.rootCertificates, fs.readFileSync(ca.caFile, "utf8")] })
    })
    yield* Effect.addFinalizer(() => Effect.sync(() => agent.destroy()))
    yield* serviceRound(service, receiver, warmUpDeliveries)
    const payloads = yield* storedPayloads(service.services)
    const bare = (deliveries: number) =>
      Effect.promise(() => bareRound(agent, receiver.url, service.subscribers, payloads, deliveries))
    yield* bare(warmUpDeliveries)
    const a: Array<number> = []
    const b: Array<number> = []
    // This process's CPU (user + system) over each side's timed part: the service's webhook path
    // (serviceRound measures it), or the bare client's (the receiver is another process). Less
    // moved by a busy machine than rates.
    const cpuMs = { a: 0, b: 0 }
    const bareTimed = Effect.suspend(() => {
      const before = process.cpuUsage()
      return Effect.ensuring(bare(deliveriesPerRound), Effect.sync(() => {
        const used = process.cpuUsage(before)
        cpuMs.b += (used.user + used.system) / 1000
      }))
    })
    // Statements are counted over the A rounds only (the B rounds run none).
    const statementsBefore = statementsByText()
    for (let pair = 0; pair < pairs; pair++) {
      const timed = (n: number) =>
        profiled(`${count}-${2 * pair + n}`, serviceRound(service, receiver, deliveriesPerRound)).pipe(
          Effect.map(({ cpuMs: used, rate }) => {
            cpuMs.a += used
            return rate
          })
        )
      a.push(yield* timed(1))
      b.push(yield* bareTimed)
      b.push(yield* bareTimed)
      a.push(yield* timed(2))
    }
    if (StatementLog.recorder() !== undefined) {
      const rows = perTransfer(statementsBefore, statementsByText(), a.length * deliveriesPerRound)
      console.error(`${count} subscription(s), service rounds:\n${statementTable(rows, 12, "delivery")}`)
    }
    const round = (values: ReadonlyArray<number>) => values.map((value) => Math.round(value))
    return {
      subscriptions: count,
      deliveriesPerRound,
      serviceDeliveriesPerSecond: round(a),
      bareDeliveriesPerSecond: round(b),
      service: Math.round(mean(a)),
      bare: Math.round(mean(b)),
      ratio: Number((mean(a) / mean(b)).toFixed(3)),
      serviceCpuMsPerDelivery: Number((cpuMs.a / (a.length * deliveriesPerRound)).toFixed(3)),
      bareCpuMsPerDelivery: Number((cpuMs.b / (b.length * deliveriesPerRound)).toFixed(3)),
      database: options.postgres ? "postgres" : "embedded",
      timed: options["append-in-round"] ? "append and deliveries" : "deliveries of committed events",
      databaseThread: options["database-thread"],
      loadAverage: os.loadavg().map((load) => load.toFixed(1)).join(" ")
    }
  }).pipe(Effect.scoped)

const main = Effect.gen(function*() {
  const ca = makeTestCa()
  yield* Effect.addFinalizer(() => Effect.sync(() => removeTestCa(ca)))
  const receiver = yield* Effect.acquireRelease(
    Effect.promise(() => startRemoteReceiver(ca.dir)),
    (r) => Effect.sync(() => r.stop())
  )
  const metrics: Array<Metric> = []
  for (const count of subscriptionCounts) {
    const result = yield* measure(ca, receiver, count)
    console.log(JSON.stringify(result))
    const label = `${count} subscription${count === 1 ? "" : "s"}`
    metrics.push(
      { metric: `${label}: service deliveries/s`, value: result.service, unit: "deliveries/s" },
      { metric: `${label}: bare client deliveries/s`, value: result.bare, unit: "deliveries/s" },
      { metric: `${label}: service / bare`, value: result.ratio, unit: "ratio", goal: ">= 0.5", headline: true },
      { metric: `${label}: service CPU a delivery`, value: result.serviceCpuMsPerDelivery, unit: "ms" },
      { metric: `${label}: bare client CPU a delivery`, value: result.bareCpuMsPerDelivery, unit: "ms" }
    )
  }
  // The recorded table is the embedded default's; a PostgreSQL run is for comparison.
  if (!options.postgres) recordResults("webhook-rate", metrics)
}).pipe(Effect.scoped)

await Effect.runPromise(main)
