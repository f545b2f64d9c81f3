/**
 * The throughput benchmark (its goals and results: docs/benchmarks.md): the real server
 * process (`src/main.ts`, the embedded default of `npm start`: PGlite, its guardian child,
 * anvil with 100 ms blocks), loaded over loopback HTTP from this separate process.
 *
 * For each level of concurrent clients (closed loop: each client sends its next transfer when
 * the last one is answered) it measures confirmed transfers per second (create → `confirmed`,
 * counting transfers answered `pending` once they confirm), the answers by status (load shed
 * with 429/503 included), create → confirmed latency, and the CPU each process spent (server,
 * guardian, anvil; `/proc/<pid>/stat`, user + system) per confirmed transfer. Then a fixed
 * arrival rate (open loop) for create → confirmed p50/p99. The cryptographic floor of one
 * transfer (packages/crypto/bench/transferFloor.ts, mcl-wasm) is measured in this process in
 * the same run, and the server's and guardian's CPU per transfer is printed as a multiple of it.
 *
 * Transfers use SPEC's plain form (`amount` in the body): the server seals, so the service's
 * whole cryptographic work is on its side, as in the floor. Load generation costs this process
 * CPU on the same two cores: the figures are a floor for the service. That cost is printed
 * too (this process's `process.cpuUsage()` over the window, "load generator"): 300 transfers a
 * second on two cores leaves every process together ~6.7 ms a transfer, it included.
 *
 * `--mode distributed` runs the cluster topology instead (`npm run cluster`'s
 * processes, scripts/cluster/): the machine's PostgreSQL (127.0.0.1:5432, a fresh database
 * dropped afterwards) and NATS, anvil, the guardians as their own processes, `--api-nodes`
 * api nodes and `--workers` workers. Clients go round-robin straight to the api nodes (no
 * balancer: its TLS would cost these two cores too), and CPU per confirmed transfer is
 * printed per process: each api node, worker, guardian, anvil, and the PostgreSQL backends
 * serving the run's database (`/proc`, matched by the database name in their title; the
 * server's shared background processes are not counted).
 *
 * Run (Linux: it reads /proc):
 *   npm run -s bench:throughput -- [--clients 64,256,1024] [--seconds 20] [--accounts 16]
 *                                  [--rate 100] [--rate-seconds 20] [--block-time-ms 100] [--seed N]
 *                                  [--mode embedded|distributed] [--api-nodes 1] [--workers 2] [--guardians 2]
 *                                  [--no-record]
 *
 * Each run appends its figures to docs/benchmarks/results.jsonl (scripts/benchRecord.ts), the
 * source of docs/benchmarks.md's tables, unless `--no-record`.
 */
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { Backend, EncryptionKey } from "@pps/crypto"
import { GuardianKeys } from "@pps/guardian"
import { Client, Confidential } from "@pps/sdk/internal"
import { medianMs, transferCrypto } from "../../crypto/bench/transferFloor.ts"
import { mulberry32 } from "../test/fault/prng.ts"
import { freePort, serverTarget } from "../test/fault/processes.ts"
import { type Cluster, dropDatabases, startCluster } from "../scripts/cluster/cluster.ts"
import { readEnvFile, writeRunEnvFile } from "../scripts/cluster/envFile.ts"
import { defaultWorkerNodes } from "../scripts/cluster/topology.ts"
import { readSpans, stages, table } from "./spanSummary.ts"
import { measureStores, type StoreSize, storeTable } from "./storeSizes.ts"
import { perTransfer, readStatements, type StatementRow, statementTable } from "./statementSummary.ts"
import { percentile } from "./stats.ts"
import { type Metric, recordOption, recordResults } from "../../../scripts/benchRecord.ts"

const { values } = parseArgs({
  // pnpm passes its `--` separator on: after it every option would be read as a positional.
  args: process.argv.slice(2).filter((arg) => arg !== "--"),
  options: {
    clients: { type: "string", default: "64,256,1024" },
    seconds: { type: "string", default: "20" },
    accounts: { type: "string", default: "16" },
    rate: { type: "string", default: "100" },
    "rate-seconds": { type: "string", default: "20" },
    "block-time-ms": { type: "string", default: "100" },
    "idle-seconds": { type: "string", default: "10" },
    seed: { type: "string", default: "16" },
    mode: { type: "string", default: "embedded" },
    "api-nodes": { type: "string", default: "1" },
    workers: { type: "string", default: String(defaultWorkerNodes) },
    guardians: { type: "string", default: "2" },
    keep: { type: "boolean", default: false },
    "span-log": { type: "string" },
    "statement-log": { type: "string" },
    "cpu-prof": { type: "string" },
    otlp: { type: "boolean", default: false },
    "otlp-protocol": { type: "string", default: "http/json" },
    help: { type: "boolean", default: false },
    ...recordOption
  }
})

if (values.help) {
  process.stdout.write(`npm run -s bench:throughput -- [options]
  --clients 64,256,1024   closed-loop client levels
  --seconds 20            window per level
  --accounts 16           accounts created and funded
  --rate 100              fixed arrival rate (transfers/s) of the open-loop run
  --rate-seconds 20       its duration
  --block-time-ms 100     the chain's block time
  --idle-seconds 10       embedded: a window without traffic first, for each process's fixed CPU cost
  --seed 16               the clients' pseudo-random choices
  --mode embedded         embedded (npm start's default) or distributed (the cluster topology:
                          PostgreSQL at PPS_BENCH_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432,
                          NATS at PPS_BENCH_NATS_URL, default nats://127.0.0.1:4222)
  --api-nodes 1           distributed: api nodes, loaded round-robin
  --workers ${defaultWorkerNodes}             distributed: worker nodes
  --guardians 2           distributed: guardian processes (one serves)
  --keep                  embedded: keep the work folder (data, server.log) for a post-mortem
                          (kept anyway when a transfer is still pending after the drain)
  --span-log DIR          embedded: the server and the guardian write their spans to DIR
                          (PPS_SPAN_LOG; tracing costs CPU, so not for the headline figures);
                          its stages are printed at the end (npm run -s bench:spans -- DIR)
  --statement-log DIR     embedded: the server and the guardian count their database statements
                          into DIR (PPS_STATEMENT_LOG); calls and ms in PGlite per transfer of the
                          first client level are printed at the end
  --cpu-prof DIR          embedded: the server and the guardian run under node's --cpu-prof (sampled
                          every 500 µs, written into DIR when they stop), and DIR/windows.json names
                          the processes and each level's window; summary: npm run -s bench:cpu-profile -- DIR
                          (the profiler costs CPU, so not for the headline figures)
  --otlp                  embedded: what exporting traces and metrics costs. Runs everything twice, on two
                          fresh servers: without export (span recording off, as by default), then with
                          OTEL_EXPORTER_OTLP_ENDPOINT set to a receiver in this process (which only counts
                          what it gets); records the difference as the \`tracing\` benchmark, not as throughput
  --otlp-protocol P       with --otlp: http/json (the default, as the server's) or http/protobuf
  --no-record             do not append the figures to docs/benchmarks/results.jsonl
`)
  process.exit(0)
}

const positive = (name: string, text: string | undefined): number => {
  const value = Number(text)
  if (!Number.isSafeInteger(value) || value < 1) {
    process.stderr.write(`throughput: --${name} must be a whole number >= 1, got ${text}\n`)
    process.exit(2)
  }
  return value
}
const clientLevels = (values.clients ?? "").split(",").map((text) => positive("clients", text))
const windowMs = positive("seconds", values.seconds) * 1000
const accountsCount = Math.max(2, positive("accounts", values.accounts))
const fixedRatePerSecond = positive("rate", values.rate)
const fixedRateMs = positive("rate-seconds", values["rate-seconds"]) * 1000
const blockTimeMs = positive("block-time-ms", values["block-time-ms"])
const idleMs = positive("idle-seconds", values["idle-seconds"]) * 1000
const prng = mulberry32(positive("seed", values.seed))
if (values.mode !== "embedded" && values.mode !== "distributed") {
  process.stderr.write(`throughput: --mode must be embedded or distributed, got ${values.mode}\n`)
  process.exit(2)
}
const distributed = values.mode === "distributed"
const apiNodesCount = positive("api-nodes", values["api-nodes"])
const workersCount = positive("workers", values.workers)
const guardiansCount = positive("guardians", values.guardians)

// ---- limits (each with its reason) ----

/** A create waits at most TRANSFER_CREATE_TIMEOUT_MS (5 s) for settlement; past this the socket is given up. */
const requestTimeoutMs = 30_000
/** A kept-alive socket idle this long is closed by this side (the server closes its own at 5 s). */
const idleSocketMs = 4_000
/** After a window, transfers answered `pending` get this long to reach a final state. */
const drainTimeoutMs = 120_000
/**
 * How often a `pending` transfer is read again: first after this, then each wait half as long
 * again, up to `drainPollMaxMs` (a client polling a payment backs off; hundreds of pending
 * transfers each read ten times a second would be a load of their own, larger than the creates).
 */
const drainPollMs = 100
const drainPollMaxMs = 1_000
/**
 * A shed request (429/503) waits its Retry-After, as the SDK does, but not past the end of the
 * window (the window's count would not change; the level would only end later).
 */
/** Test USDG per account: enough for every level's transfers of 0.01 each. */
const fundingUsdg = "100000"
const amountUsdg = "0.01"

const log = (line: string) => process.stdout.write(`${new Date().toISOString()} ${line}\n`)
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)))

// ---- processes and their CPU ----

/** Clock ticks per second of /proc's CPU counters (USER_HZ: 100 on Linux). */
const ticksPerSecond = 100

/**
 * User + system CPU time of one process so far, in ms; undefined once it is gone. With `thread`,
 * of that one thread of it (a process's main thread has the process's id: a Node process's event
 * loop).
 */
const cpuMs = (pid: number, thread?: number): number | undefined => {
  try {
    const stat = fs.readFileSync(thread === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${thread}/stat`, "utf8")
    // Fields after the command (which may hold spaces) start after its closing parenthesis.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond
  } catch {
    return undefined
  }
}

const childrenOf = (pid: number): ReadonlyArray<number> => {
  try {
    return fs.readdirSync(`/proc/${pid}/task`).flatMap((task) =>
      fs.readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number)
    )
  } catch {
    return []
  }
}

const commandOf = (pid: number): string => {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim()
  } catch {
    return "?"
  }
}

interface Processes {
  readonly server: number
  readonly guardian: number | undefined
  readonly anvil: number | undefined
}

const findProcesses = (dataDir: string): Processes => {
  const server = Number(fs.readFileSync(path.join(dataDir, "server.lock"), "utf8"))
  const guardianFile = path.join(dataDir, "guardian.pid")
  const guardian = fs.existsSync(guardianFile) ? Number(fs.readFileSync(guardianFile, "utf8")) : undefined
  const anvil = childrenOf(server).find((pid) => commandOf(pid) === "anvil")
  return { server, guardian, anvil }
}

/**
 * CPU so far per process name. A name `group:pid` is one of several processes counted as
 * `group` (PostgreSQL backends): it is diffed per pid, so a backend born in the window counts
 * from zero and one that ended in it is lost (the pools keep theirs for the run).
 */
type CpuSample = Record<string, number>
const diffCpu = (before: CpuSample, after: CpuSample): CpuSample => {
  const spent: Record<string, number> = {}
  for (const [name, ms] of Object.entries(after)) {
    const group = name.split(":", 1)[0]!
    spent[group] = (spent[group] ?? 0) + ms - (before[name] ?? 0)
  }
  return spent
}
const sampleCpu = (processes: Processes): CpuSample => ({
  server: cpuMs(processes.server) ?? Number.NaN,
  // Not a process: the part of the server's CPU its event loop spent (the rest is its other
  // threads': the sealing thread, the garbage collector's helpers, libuv's pool).
  serverEventLoop: cpuMs(processes.server, processes.server) ?? Number.NaN,
  guardian: processes.guardian === undefined ? 0 : cpuMs(processes.guardian) ?? Number.NaN,
  anvil: processes.anvil === undefined ? Number.NaN : cpuMs(processes.anvil) ?? Number.NaN
})

// ---- processes and their resident memory ----

/** Resident memory of one process (`VmRSS`, what the kernel holds in RAM for it), in MB; NaN once it is gone. */
const residentMb = (pid: number | undefined): number => {
  if (pid === undefined) return Number.NaN
  try {
    const kb = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]
    return kb === undefined ? Number.NaN : Number(kb) / 1024
  } catch {
    return Number.NaN
  }
}

interface Resident {
  readonly server: number
  readonly guardian: number
  readonly anvil: number
}

const sampleResident = (processes: Processes): Resident => ({
  server: residentMb(processes.server),
  guardian: residentMb(processes.guardian),
  anvil: residentMb(processes.anvil)
})

/** How often resident memory is read under load (its peak over a window is what a host must hold). */
const residentSampleMs = 500

/**
 * Runs `during` while reading each process's resident memory every `residentSampleMs`; returns
 * the highest reading of each (D67: a level's figure is its peak, not its end).
 */
const peakResident = async <A>(processes: Processes, during: () => Promise<A>): Promise<{ readonly value: A; readonly peak: Resident }> => {
  let peak = sampleResident(processes)
  const read = () => {
    const now = sampleResident(processes)
    peak = { server: Math.max(peak.server, now.server), guardian: Math.max(peak.guardian, now.guardian), anvil: Math.max(peak.anvil, now.anvil) }
  }
  const timer = setInterval(read, residentSampleMs)
  try {
    const value = await during()
    read()
    return { value, peak }
  } finally {
    clearInterval(timer)
  }
}

// ---- HTTP ----

interface Answer {
  readonly status: number
  readonly json: unknown
  readonly retryAfterMs: number | undefined
}

/**
 * Every request of the load generator goes through node:http on kept-alive sockets, not `fetch`:
 * on this machine `fetch` (undici) cost 3-4x the CPU a request (~460-550 µs against ~160-190 at
 * 1,024 concurrent requests, measured against a trivial server), CPU taken from the two cores the
 * service runs on, and most of all at 1,024 clients, where refusals make most of the requests.
 * An idle socket is closed after `idleSocketMs`, before the server closes it (Node's
 * `keepAliveTimeout`, 5 s): a request sent on a socket the server is closing would fail, and a
 * create is not retried.
 */
const agent = new http.Agent({ keepAlive: true, timeout: idleSocketMs })

const exchange = (url: string, init: { method: string; headers: Record<string, string>; body?: string }): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const body = init.body === undefined ? undefined : Buffer.from(init.body)
    const request = http.request(url, {
      method: init.method,
      agent,
      timeout: requestTimeoutMs,
      headers: body === undefined ? init.headers : { ...init.headers, "content-length": String(body.length) }
    }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("error", reject)
      response.on("end", () => {
        let json: unknown = undefined
        try {
          json = JSON.parse(Buffer.concat(chunks).toString("utf8"))
        } catch {
          // a non-JSON answer: only its status counts
        }
        const retryAfter = response.headers["retry-after"]
        resolve({ status: response.statusCode ?? 0, json, retryAfterMs: retryAfter === undefined ? undefined : Number(retryAfter) * 1000 })
      })
    })
    request.on("timeout", () => request.destroy(new Error(`no answer within ${requestTimeoutMs} ms`)))
    request.on("error", reject)
    request.end(body)
  })

const stringField = (value: unknown, name: string): string | undefined => {
  if (typeof value !== "object" || value === null) return undefined
  const field = (value as Record<string, unknown>)[name]
  return typeof field === "string" ? field : undefined
}

interface Account {
  readonly handle: string
  readonly apiKey: string
}

const json = (apiKey: string, extra: Record<string, string> = {}) => ({
  authorization: `Bearer ${apiKey}`,
  "content-type": "application/json",
  ...extra
})

// ---- set-up ----

const setUp = async (baseUrl: string, adminUrl: string, adminToken: string): Promise<ReadonlyArray<Account>> => {
  const accounts: Array<Account> = []
  for (let index = 0; index < accountsCount; index++) {
    const handle = `bench-${index}`
    const created = await exchange(`${adminUrl}/admin/accounts`, {
      method: "POST",
      headers: json(adminToken),
      body: JSON.stringify({ handle, kyc_status: "verified" })
    })
    const apiKey = stringField(created.json, "api_key")
    if (created.status !== 201 || apiKey === undefined) throw new Error(`account ${handle}: ${created.status} ${JSON.stringify(created.json)}`)
    await Confidential.registerKey(Client.make({ baseUrl, apiKey }), EncryptionKey.generate())
    const funded = await exchange(`${baseUrl}/v1/test/faucet`, { method: "POST", headers: json(apiKey), body: JSON.stringify({ amount: fundingUsdg }) })
    if (funded.status !== 200) throw new Error(`faucet ${handle}: ${funded.status} ${JSON.stringify(funded.json)}`)
    accounts.push({ handle: `@${handle}`, apiKey })
  }
  // Credits come from the chain (D39): an account can spend once the guardian has read its
  // grant. One transfer from each, repeated until it is accepted, is the warm-up too.
  for (const [index, account] of accounts.entries()) {
    const to = accounts[(index + 1) % accounts.length]!.handle
    for (let attempt = 0; ; attempt++) {
      const answer = await exchange(`${baseUrl}/v1/transfers`, { method: "POST", headers: json(account.apiKey), body: JSON.stringify({ to, amount: amountUsdg }) })
      if (answer.status === 201) break
      if (attempt > 600) throw new Error(`warm-up ${account.handle}: ${answer.status} ${JSON.stringify(answer.json)}`)
      await sleep(100)
    }
  }
  return accounts
}

// ---- one transfer, followed to its end ----

interface Outcome {
  /** The create's status (201 created, 429/503 shed, anything else an error). */
  readonly status: number
  /** The final transfer status, for a 201. */
  readonly final?: "confirmed" | "failed" | "pending"
  /** Create sent → confirmed seen (the answer, or a later read). */
  readonly latencyMs?: number
  readonly retryAfterMs?: number
}

const transferOnce = async (baseUrl: string, accounts: ReadonlyArray<Account>, followPending: Array<Promise<Outcome>>): Promise<Outcome> => {
  const from = prng.int(0, accounts.length - 1)
  const to = (from + prng.int(1, accounts.length - 1)) % accounts.length
  const sender = accounts[from]!
  const started = performance.now()
  let answer: Answer
  try {
    answer = await exchange(`${baseUrl}/v1/transfers`, {
      method: "POST",
      headers: json(sender.apiKey, { "idempotency-key": `bench-${crypto.randomUUID()}` }),
      body: JSON.stringify({ to: accounts[to]!.handle, amount: amountUsdg })
    })
  } catch {
    return { status: 0 }
  }
  if (answer.status !== 201) return { status: answer.status, ...(answer.retryAfterMs === undefined ? {} : { retryAfterMs: answer.retryAfterMs }) }
  const status = stringField(answer.json, "status")
  if (status === "confirmed") return { status: 201, final: "confirmed", latencyMs: performance.now() - started }
  if (status !== "pending") return { status: 201, final: "failed" }
  // D14: answered `pending` after the create timeout; read it until it is final.
  const transferId = stringField(answer.json, "transfer_id") ?? ""
  const followed = (async (): Promise<Outcome> => {
    const deadline = Date.now() + drainTimeoutMs
    for (let waitMs = drainPollMs; Date.now() < deadline; waitMs = Math.min(drainPollMaxMs, waitMs * 1.5)) {
      await sleep(waitMs)
      const read = await exchange(`${baseUrl}/v1/transfers/${transferId}`, { method: "GET", headers: json(sender.apiKey) }).catch(() => undefined)
      const now = stringField(read?.json, "status")
      if (now === "confirmed") return { status: 201, final: "confirmed", latencyMs: performance.now() - started }
      if (now === "failed") return { status: 201, final: "failed" }
    }
    return { status: 201, final: "pending" }
  })()
  followPending.push(followed)
  return { status: 201, final: "pending" }
}

// ---- a level ----

interface LevelResult {
  readonly label: string
  readonly elapsedMs: number
  readonly outcomes: ReadonlyArray<Outcome>
  readonly cpu: CpuSample
  /** This process's CPU over the window (the load it generates costs the same cores). */
  readonly loadCpuMs: number
}

const summarize = (result: LevelResult) => {
  const byStatus: Record<string, number> = {}
  for (const outcome of result.outcomes) {
    const key = outcome.status === 201 ? `201 ${outcome.final}` : String(outcome.status)
    byStatus[key] = (byStatus[key] ?? 0) + 1
  }
  const confirmed = result.outcomes.filter((outcome) => outcome.final === "confirmed")
  const latencies = confirmed.flatMap((outcome) => (outcome.latencyMs === undefined ? [] : [outcome.latencyMs]))
  const perTransfer = (ms: number) => (confirmed.length === 0 ? Number.NaN : ms / confirmed.length)
  return {
    confirmed: confirmed.length,
    perSecond: confirmed.length / (result.elapsedMs / 1000),
    byStatus,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    cpuServerMs: perTransfer(result.cpu["server"] ?? Number.NaN),
    cpuServerEventLoopMs: perTransfer(result.cpu["serverEventLoop"] ?? Number.NaN),
    cpuGuardianMs: perTransfer(result.cpu["guardian"] ?? Number.NaN),
    cpuAnvilMs: perTransfer(result.cpu["anvil"] ?? Number.NaN),
    cpuLoadMs: perTransfer(result.loadCpuMs),
    cpuMsPerTransfer: Object.fromEntries(Object.entries(result.cpu).map(([name, ms]) => [name, perTransfer(ms)]))
  }
}

/**
 * Now on the clock of V8's CPU profiles (CLOCK_MONOTONIC in µs on Linux, as `process.hrtime`),
 * so that `--cpu-prof`'s samples can be cut to a level's window.
 */
const monotonicUs = () => Number(process.hrtime.bigint() / 1000n)

/** A level's window, as `--cpu-prof` writes it into windows.json for cpuProfile.ts. */
interface ProfileWindow {
  readonly label: string
  readonly startUs: number
  readonly endUs: number
  readonly confirmed: number
  /** CPU ms each process (and the server's event loop) spent in the window, from /proc. */
  readonly cpuMs: CpuSample
}

/** Runs `drive` between two CPU samples; the window ends once every followed transfer is final. */
const measured = async (label: string, sample: () => CpuSample, drive: (followPending: Array<Promise<Outcome>>) => Promise<ReadonlyArray<Outcome>>): Promise<LevelResult> => {
  const before = sample()
  const loadBefore = process.cpuUsage()
  const started = performance.now()
  const followPending: Array<Promise<Outcome>> = []
  const answered = await drive(followPending)
  const followed = await Promise.all(followPending)
  const elapsedMs = performance.now() - started
  const after = sample()
  const load = process.cpuUsage(loadBefore)
  // A followed outcome replaces the `pending` answer it started from.
  const outcomes = [...answered.filter((outcome) => outcome.final !== "pending"), ...followed]
  return {
    label,
    elapsedMs,
    outcomes,
    cpu: diffCpu(before, after),
    loadCpuMs: (load.user + load.system) / 1000
  }
}

/** Client `index` talks to node `index mod nodes` (round-robin over the api nodes; one in the embedded mode). */
const closedLoop = (baseUrls: ReadonlyArray<string>, accounts: ReadonlyArray<Account>, clients: number) => async (followPending: Array<Promise<Outcome>>) => {
  const outcomes: Array<Outcome> = []
  const endAt = performance.now() + windowMs
  await Promise.all(Array.from({ length: clients }, async (_, index) => {
    while (performance.now() < endAt) {
      const outcome = await transferOnce(baseUrls[index % baseUrls.length]!, accounts, followPending)
      outcomes.push(outcome)
      if (outcome.retryAfterMs !== undefined) await sleep(Math.min(outcome.retryAfterMs, endAt - performance.now()))
    }
  }))
  return outcomes
}

const openLoop = (baseUrls: ReadonlyArray<string>, accounts: ReadonlyArray<Account>) => async (followPending: Array<Promise<Outcome>>) => {
  const count = Math.round((fixedRatePerSecond * fixedRateMs) / 1000)
  const started = performance.now()
  return Promise.all(Array.from({ length: count }, async (_, index) => {
    await sleep(started + (index * 1000) / fixedRatePerSecond - performance.now())
    return transferOnce(baseUrls[index % baseUrls.length]!, accounts, followPending)
  }))
}

// ---- the run ----

/**
 * The throughput goals, in the units of the records: confirmed transfers a second under load, the
 * service's CPU a transfer (server and guardian together), create → confirmed p99 at 100/s.
 */
const confirmedPerSecondGoal = ">= 300"
const serviceCpuMsGoal = "<= 5"
const fixedRateP99MsGoal = "<= 250"

/**
 * The records of a run, per level: `serviceCpuMs` is the CPU of the service's own processes
 * per confirmed transfer (server and guardian; the nodes and guardians in the distributed mode),
 * the figure set beside the cryptographic floor. The first level and the fixed rate are the
 * history's headline.
 */
const levelMetrics = (
  rows: ReadonlyArray<ReturnType<typeof summarize> & { label: string; serviceCpuMs: number }>,
  floorMs: number
): Array<Metric> => [
  { metric: "cryptographic floor per transfer", value: floorMs, unit: "ms" },
  ...rows.flatMap((row, index): Array<Metric> => {
    const fixedRate = row.label.endsWith("fixed")
    const headline = index === 0 || fixedRate
    return [
      { metric: `${row.label}: confirmed/s`, value: row.perSecond, unit: "transfers/s", headline, ...(fixedRate ? {} : { goal: confirmedPerSecondGoal }) },
      { metric: `${row.label}: create → confirmed p50`, value: row.p50, unit: "ms" },
      { metric: `${row.label}: create → confirmed p99`, value: row.p99, unit: "ms", ...(fixedRate ? { goal: fixedRateP99MsGoal, headline } : {}) },
      {
        metric: `${row.label}: service CPU per confirmed transfer`,
        value: row.serviceCpuMs,
        unit: "ms",
        goal: serviceCpuMsGoal,
        ratioToFloor: row.serviceCpuMs / floorMs,
        headline: index === 0
      },
      ...Object.entries(row.cpuMsPerTransfer)
        .filter(([name]) => !name.includes(":") && name !== "serverEventLoop")
        .map(([name, ms]): Metric => ({ metric: `${row.label}: ${name} CPU per confirmed transfer`, value: ms, unit: "ms" })),
      { metric: `${row.label}: load generator CPU per confirmed transfer`, value: row.cpuLoadMs, unit: "ms" },
      { metric: `${row.label}: shed (429/503)`, value: (row.byStatus["429"] ?? 0) + (row.byStatus["503"] ?? 0), unit: "requests" }
    ]
  })
]

/**
 * The memory goals (D67), in MB of resident memory of the server and its guardian together: with
 * nothing to do, and at the peak of the 256-client level.
 */
const idleResidentGoal = "<= 400"
const loadResidentGoal = "<= 700"

const serviceResident = (resident: Resident) => resident.server + resident.guardian

const residentTable = (
  start: Resident | undefined,
  idle: Resident | undefined,
  rows: ReadonlyArray<{ readonly label: string; readonly resident: Resident }>
) => {
  const line = (when: string, resident: Resident | undefined) =>
    resident === undefined
      ? `| ${when} | n/a | n/a | n/a | n/a |`
      : `| ${when} | ${format(resident.server, 0)} | ${format(resident.guardian, 0)} | ${format(resident.anvil, 0)} | ${format(serviceResident(resident), 0)} |`
  return [
    "| resident memory, MB (VmRSS) | server | guardian | anvil | server + guardian |",
    "|---|---:|---:|---:|---:|",
    line("once ready, before any request", start),
    line(`idle (set-up done, ${idleMs / 1000} s without traffic)`, idle),
    ...rows.map((row) => line(`${row.label}, peak`, row.resident))
  ].join("\n")
}

const residentMetrics = (
  idle: Resident | undefined,
  rows: ReadonlyArray<{ readonly label: string; readonly resident: Resident }>
): Array<Metric> => [
  ...(idle === undefined ? [] : [
    { metric: "idle: server + guardian resident memory", value: serviceResident(idle), unit: "MB", goal: idleResidentGoal, headline: true } satisfies Metric,
    { metric: "idle: server resident memory", value: idle.server, unit: "MB" },
    { metric: "idle: guardian resident memory", value: idle.guardian, unit: "MB" }
  ]),
  ...rows.flatMap((row): Array<Metric> => [
    {
      metric: `${row.label}: server + guardian resident memory, peak`,
      value: serviceResident(row.resident),
      unit: "MB",
      ...(row.label === "256 clients" ? { goal: loadResidentGoal, headline: true } : {})
    },
    { metric: `${row.label}: server resident memory, peak`, value: row.resident.server, unit: "MB" },
    { metric: `${row.label}: guardian resident memory, peak`, value: row.resident.guardian, unit: "MB" }
  ])
]

/** D67's storage goal: KB of the api database per transfer (every row, 30 days of events, vacuumed). */
const apiStoreGoal = "<= 3"

const storeMetrics = (stores: { readonly api: StoreSize; readonly guardian: StoreSize }): Array<Metric> => [
  { metric: "api database per transfer", value: stores.api.bytes / 1024 / stores.api.transfers, unit: "KB", goal: apiStoreGoal, headline: true },
  { metric: "guardian database per transfer", value: stores.guardian.bytes / 1024 / stores.api.transfers, unit: "KB" },
  { metric: "transfers in the api database", value: stores.api.transfers, unit: "transfers" }
]

const format = (value: number, digits = 1) => (Number.isFinite(value) ? value.toFixed(digits) : "n/a")

/**
 * The cryptographic floor of one transfer with the implementations the service runs:
 * mcl-wasm for the curve, libsecp256k1 for the attestation's and the relayer's signatures.
 */
const measureFloorMs = async () => {
  await Backend.init({ backend: "mcl" })
  const floorMs = medianMs(transferCrypto({ signer: GuardianKeys.libsecp256k1Signer }).oneTransfer)
  log(`cryptographic floor of one transfer (mcl-wasm, libsecp256k1; this process): ${format(floorMs, 2)} ms`)
  return floorMs
}

/** One server from start to stop: set-up, the idle window, the client levels, the fixed rate. */
const runEmbedded = async (extraEnv: Record<string, string>) => {
  const statementLog = values["statement-log"] === undefined ? undefined : path.resolve(values["statement-log"])
  let statementRows: { readonly label: string; readonly rows: ReadonlyArray<StatementRow> } | undefined
  const cpuProfileDir = values["cpu-prof"] === undefined ? undefined : path.resolve(values["cpu-prof"])
  const profileWindows: Array<ProfileWindow> = []
  if (cpuProfileDir !== undefined) fs.mkdirSync(cpuProfileDir, { recursive: true })
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-throughput-"))
  const dataDir = path.join(workDir, "data")
  fs.mkdirSync(dataDir)
  const [port, adminPort] = [await freePort(), await freePort()]
  const server = serverTarget({
    dataDir,
    port,
    adminPort,
    logFile: path.join(workDir, "server.log"),
    env: {
      CHAIN_BLOCK_TIME_MS: String(blockTimeMs),
      ...(values["span-log"] === undefined ? {} : { PPS_SPAN_LOG: path.resolve(values["span-log"]) }),
      ...(statementLog === undefined ? {} : { PPS_STATEMENT_LOG: statementLog }),
      // The server through NODE_OPTIONS (this benchmark's own child); its guardian child through
      // PPS_CPU_PROF_DIR (EmbeddedGuardian.cpuProfileFlags), which it alone passes on.
      ...(cpuProfileDir === undefined ? {} : {
        NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${cpuProfileDir} --cpu-prof-interval=500`,
        PPS_CPU_PROF_DIR: cpuProfileDir
      }),
      ...extraEnv
    }
  })
  const baseUrl = `http://127.0.0.1:${port}`
  const results: Array<ReturnType<typeof summarize> & { label: string; resident: Resident }> = []
  let idleCpuPerSecond: Record<string, number> = {}
  let startResident: Resident | undefined
  let idleResident: Resident | undefined
  try {
    log(`starting the server (embedded default, ${blockTimeMs} ms blocks) in ${workDir}`)
    await server.start()
    startResident = sampleResident(findProcesses(dataDir))
    log(`  resident MB once ready: ${JSON.stringify(startResident)}`)
    const adminToken = (JSON.parse(fs.readFileSync(path.join(dataDir, "secrets.json"), "utf8")) as { admin_token: string }).admin_token
    const accounts = await setUp(baseUrl, `http://127.0.0.1:${adminPort}`, adminToken)
    const processes = findProcesses(dataDir)
    log(`${accounts.length} accounts funded; pids: server ${processes.server}, guardian ${processes.guardian ?? "in process"}, anvil ${processes.anvil ?? "not found"}`)
    // What each process spends with nothing to do (watchers, relays, sweeps): under load it is
    // part of every transfer's CPU, and at a low rate most of it.
    log(`no traffic for ${idleMs / 1000} s ...`)
    const idleStartUs = monotonicUs()
    const idle = await measured("idle", () => sampleCpu(processes), () => sleep(idleMs).then(() => []))
    profileWindows.push({ label: "idle", startUs: idleStartUs, endUs: monotonicUs(), confirmed: 0, cpuMs: idle.cpu })
    idleCpuPerSecond = Object.fromEntries(Object.entries(idle.cpu).map(([name, ms]) => [name, ms / (idle.elapsedMs / 1000)]))
    log(`  idle CPU ms per second: ${JSON.stringify(idleCpuPerSecond)}`)
    idleResident = sampleResident(processes)
    log(`  idle resident MB: ${JSON.stringify(idleResident)}`)
    for (const clients of clientLevels) {
      log(`${clients} clients for ${windowMs / 1000} s ...`)
      // The logs are rewritten every second: the reading after the window waits for one more.
      const statementsBefore = statementLog === undefined ? undefined : readStatements(statementLog)
      const startUs = monotonicUs()
      const { value: result, peak } = await peakResident(processes, () =>
        measured(`${clients} clients`, () => sampleCpu(processes), closedLoop([baseUrl], accounts, clients))
      )
      results.push({ label: result.label, ...summarize(result), resident: peak })
      profileWindows.push({ label: result.label, startUs, endUs: monotonicUs(), confirmed: results.at(-1)!.confirmed, cpuMs: result.cpu })
      log(`  ${JSON.stringify(results.at(-1))}`)
      if (statementLog !== undefined && statementsBefore !== undefined && statementRows === undefined) {
        await sleep(1_200)
        statementRows = { label: result.label, rows: perTransfer(statementsBefore, readStatements(statementLog), results.at(-1)!.confirmed) }
      }
    }
    log(`${fixedRatePerSecond} transfers/s for ${fixedRateMs / 1000} s ...`)
    const fixedStartUs = monotonicUs()
    const { value: fixed, peak } = await peakResident(processes, () =>
      measured(`${fixedRatePerSecond}/s fixed`, () => sampleCpu(processes), openLoop([baseUrl], accounts))
    )
    results.push({ label: fixed.label, ...summarize(fixed), resident: peak })
    profileWindows.push({ label: fixed.label, startUs: fixedStartUs, endUs: monotonicUs(), confirmed: results.at(-1)!.confirmed, cpuMs: fixed.cpu })
    log(`  ${JSON.stringify(results.at(-1))}`)
    if (cpuProfileDir !== undefined) {
      fs.writeFileSync(path.join(cpuProfileDir, "windows.json"), JSON.stringify({ processes, windows: profileWindows }, null, 2))
    }
  } finally {
    await server.stop()
  }
  log("the stores, once the service's maintenance has run over them ...")
  const stores = await measureStores(dataDir)
  return { results, idleCpuPerSecond, startResident, idleResident, stores, statementRows, statementLog, workDir }
}

const main = async () => {
  const floorMs = await measureFloorMs()
  const { idleCpuPerSecond, idleResident, results, startResident, statementLog, statementRows, stores, workDir } = await runEmbedded({})
  const cpu = os.cpus()
  process.stdout.write([
    "",
    `machine: ${cpu[0]?.model ?? "unknown"} (${cpu.length} vCPU), load average at the end ${os.loadavg().map((load) => load.toFixed(1)).join(" ")}, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}`,
    `command: npm run -s bench:throughput -- --clients ${clientLevels.join(",")} --seconds ${windowMs / 1000} --accounts ${accountsCount} --rate ${fixedRatePerSecond} --rate-seconds ${fixedRateMs / 1000} --block-time-ms ${blockTimeMs} --idle-seconds ${idleMs / 1000}`,
    `cryptographic floor per transfer (mcl-wasm, libsecp256k1; measured in this run): ${format(floorMs, 2)} ms`,
    `idle (no traffic, ${idleMs / 1000} s), CPU ms per second: server ${format(idleCpuPerSecond["server"] ?? Number.NaN)} / guardian ${format(idleCpuPerSecond["guardian"] ?? Number.NaN)} / anvil ${format(idleCpuPerSecond["anvil"] ?? Number.NaN)}`,
    "",
    "| load | confirmed/s | answers | create → confirmed p50 / p99 ms | CPU ms per confirmed transfer: server (its event loop) / guardian / anvil / load generator | server + guardian ÷ floor |",
    "|---|---:|---|---:|---:|---:|",
    ...results.map((row) =>
      `| ${row.label} | ${format(row.perSecond)} | ${Object.entries(row.byStatus).map(([status, count]) => `${status}: ${count}`).join(", ")} | ${format(row.p50, 0)} / ${format(row.p99, 0)} | ${format(row.cpuServerMs)} (${format(row.cpuServerEventLoopMs)}) / ${format(row.cpuGuardianMs)} / ${format(row.cpuAnvilMs)} / ${format(row.cpuLoadMs)} | ${format((row.cpuServerMs + row.cpuGuardianMs) / floorMs)}× |`
    ),
    "",
    residentTable(startResident, idleResident, results),
    "",
    storeTable("api database", stores.api, stores.api.transfers),
    storeTable("guardian database", stores.guardian, stores.api.transfers)
  ].join("\n"))
  recordResults("throughput", levelMetrics(results.map((row) => ({ ...row, serviceCpuMs: row.cpuServerMs + row.cpuGuardianMs })), floorMs))
  recordResults("memory", [...residentMetrics(idleResident, results), ...storeMetrics(stores)])
  if (statementRows !== undefined) {
    process.stdout.write(
      `database statements per confirmed transfer, ${statementRows.label} (PPS_STATEMENT_LOG in ${statementLog}):\n\n${statementTable(statementRows.rows)}\n`
    )
  }
  if (values["span-log"] !== undefined) {
    const { rows, traces } = stages(readSpans(values["span-log"]), "Transfers.create")
    process.stdout.write(`stages of ${traces} creates, every level together (spans in ${values["span-log"]}):\n\n${table(rows.filter((row) => row.perTrace >= 0.05))}\n`)
  }
  // A transfer still pending after the drain is a stall seen rarely ("A stall seen once" in
  // docs/benchmarks/notes/2026-11-26-spans-off-records-batched.md): its server log is what would
  // explain it, so the folder is kept for it unasked.
  const stalled = results.some((row) => (row.byStatus["201 pending"] ?? 0) > 0)
  if (values.keep || stalled) log(`kept ${workDir}${stalled ? " (transfers still pending after the drain: see server.log)" : ""}`)
  else fs.rmSync(workDir, { recursive: true, force: true })
}

// ---- what OTLP export costs ----

/** An OTLP/HTTP receiver on loopback that answers 200 and counts what it gets (for JSON, the spans too). */
const startOtlpReceiver = async () => {
  const counts = { requests: 0, bytes: 0, spans: 0 }
  const receiver = http.createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const body = Buffer.concat(chunks)
      counts.requests += 1
      counts.bytes += body.length
      if (request.url === "/v1/traces" && (request.headers["content-type"] ?? "").startsWith("application/json")) {
        counts.spans += (body.toString("utf8").match(/"spanId"/g) ?? []).length
      }
      response.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
  const { port } = receiver.address() as { port: number }
  return { url: `http://127.0.0.1:${port}`, counts, close: () => receiver.close() }
}

/**
 * `--otlp`: the same run on two fresh servers, without export and then with it, and the
 * difference: CPU per confirmed transfer of the server (the guardian, a child process, exports
 * nothing) at each level, and at rest.
 */
const mainOtlp = async () => {
  const protocol = values["otlp-protocol"]
  if (protocol !== "http/protobuf" && protocol !== "http/json") {
    process.stderr.write(`throughput: --otlp-protocol must be http/protobuf or http/json, got ${protocol}\n`)
    process.exit(2)
  }
  const receiver = await startOtlpReceiver()
  try {
    log("without export: span recording off (the default)")
    const off = await runEmbedded({})
    log(`with export: OTEL_EXPORTER_OTLP_ENDPOINT=${receiver.url} (${protocol})`)
    const on = await runEmbedded({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: protocol })
    for (const run of [off, on]) fs.rmSync(run.workDir, { recursive: true, force: true })
    const confirmedWithExport = on.results.reduce((sum, row) => sum + row.confirmed, 0)
    const rows = off.results.map((row, index) => ({ label: row.label, off: row, on: on.results[index]! }))
    const idle = { off: off.idleCpuPerSecond["server"] ?? Number.NaN, on: on.idleCpuPerSecond["server"] ?? Number.NaN }
    process.stdout.write([
      "",
      `machine: ${os.cpus()[0]?.model ?? "unknown"} (${os.cpus().length} vCPU), load average at the end ${os.loadavg().map((load) => load.toFixed(1)).join(" ")}, Node ${process.version}`,
      `exported by the second server over its whole run (set-up and idle included): ${receiver.counts.requests} requests, ${receiver.counts.bytes} bytes` +
        (protocol === "http/json" ? `, ${receiver.counts.spans} spans` : "") + `; ${confirmedWithExport} transfers confirmed in its measured windows`,
      `idle server CPU ms per second: ${format(idle.off)} without export, ${format(idle.on)} with`,
      "",
      "| load | confirmed/s without / with export | server CPU ms per confirmed transfer without / with | difference | guardian CPU ms without / with |",
      "|---|---:|---:|---:|---:|",
      ...rows.map(({ label, off, on }) =>
        `| ${label} | ${format(off.perSecond)} / ${format(on.perSecond)} | ${format(off.cpuServerMs, 2)} / ${format(on.cpuServerMs, 2)} | ${format(on.cpuServerMs - off.cpuServerMs, 2)} ms (${format(((on.cpuServerMs - off.cpuServerMs) / off.cpuServerMs) * 100)} %) | ${format(off.cpuGuardianMs, 2)} / ${format(on.cpuGuardianMs, 2)} |`
      ),
      ""
    ].join("\n"))
    recordResults("tracing", [
      ...rows.flatMap(({ label, off, on }, index): Array<Metric> => [
        { metric: `${label}: server CPU per confirmed transfer, no export`, value: off.cpuServerMs, unit: "ms" },
        { metric: `${label}: server CPU per confirmed transfer, OTLP export (${protocol})`, value: on.cpuServerMs, unit: "ms" },
        { metric: `${label}: server CPU added by OTLP export, per confirmed transfer`, value: on.cpuServerMs - off.cpuServerMs, unit: "ms", headline: index === 0 || label.endsWith("fixed") },
        { metric: `${label}: confirmed/s, no export`, value: off.perSecond, unit: "transfers/s" },
        { metric: `${label}: confirmed/s, OTLP export`, value: on.perSecond, unit: "transfers/s" }
      ]),
      { metric: "idle server CPU per second, no export", value: idle.off, unit: "ms" },
      { metric: "idle server CPU per second, OTLP export", value: idle.on, unit: "ms" },
      { metric: "OTLP bytes exported per confirmed transfer (whole run)", value: receiver.counts.bytes / confirmedWithExport, unit: "bytes" },
      ...(protocol === "http/json" ? [{ metric: "spans exported per confirmed transfer (whole run)", value: receiver.counts.spans / confirmedWithExport, unit: "spans" }] : [])
    ])
  } finally {
    receiver.close()
  }
}

// ---- the distributed mode ----

const postgresServerUrl = (process.env["PPS_BENCH_POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432").replace(/\/+$/, "")
const benchNatsUrl = process.env["PPS_BENCH_NATS_URL"] ?? "nats://127.0.0.1:4222"
/** The no-load window measured before the levels. */
const idleWindowMs = 10_000
const clusterTemplate = fileURLToPath(new URL("../../../deploy/cluster.env.example", import.meta.url))

/** PostgreSQL backends serving `database`, found by their process title (`/proc/<pid>/cmdline`). */
const postgresBackends = (database: string): ReadonlyArray<number> =>
  fs.readdirSync("/proc").filter((entry) => /^\d+$/.test(entry)).map(Number).filter((pid) => {
    try {
      const title = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ")
      // `postgres: [cluster name: ]user database host(port) state`: the name as a whole word.
      return title.startsWith("postgres: ") && title.split(/\s+/).includes(database)
    } catch {
      return false
    }
  })

const sampleCluster = (cluster: Cluster, databases: { readonly api: string; readonly guardian: string }) => (): CpuSample => {
  const sample: Record<string, number> = {}
  for (const member of [...cluster.apiNodes, ...cluster.workers, ...cluster.guardians]) {
    const pid = member.pid()
    sample[member.name] = pid === undefined ? Number.NaN : cpuMs(pid) ?? Number.NaN
  }
  const chainPid = cluster.chain.pid()
  sample["anvil"] = chainPid === undefined ? Number.NaN : cpuMs(chainPid) ?? Number.NaN
  for (const [group, database] of [["postgres-api", databases.api], ["postgres-guardian", databases.guardian]] as const) {
    sample[group] = 0
    for (const pid of postgresBackends(database)) sample[`${group}:${pid}`] = cpuMs(pid) ?? 0
  }
  return sample
}

const mainDistributed = async () => {
  const floorMs = await measureFloorMs()
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-throughput-cluster-"))
  const runId = `${Date.now().toString(36)}${process.pid.toString(36)}`
  const databases = { api: `pps_bench_${runId}`, guardian: `pps_bench_${runId}_guardian` }
  const stream = `PPS_BENCH_${runId.toUpperCase()}`
  const envFile = writeRunEnvFile(clusterTemplate, workDir, {
    PPS_DATABASE: databases.api,
    PPS_GUARDIAN_DATABASE: databases.guardian,
    NATS_STREAM: stream,
    NATS_SUBJECT_PREFIX: `bench${runId}`
  })
  const results: Array<ReturnType<typeof summarize> & { label: string }> = []
  let cluster: Cluster | undefined
  let idle: CpuSample = {}
  try {
    log(`starting the cluster (${apiNodesCount} api node(s), ${workersCount} worker(s), ${guardiansCount} guardian(s), ${blockTimeMs} ms blocks) in ${workDir}`)
    cluster = await startCluster({
      envFile,
      dir: workDir,
      apiNodes: apiNodesCount,
      workers: workersCount,
      guardians: guardiansCount,
      postgresUrl: postgresServerUrl,
      natsUrl: benchNatsUrl,
      chainBlockTimeMs: blockTimeMs,
      log: (line) => log(`  cluster: ${line}`)
    })
    const nodes = cluster.apiNodes
    const adminToken = readEnvFile(envFile).get("ADMIN_TOKEN")!
    const accounts = await setUp(nodes[0]!.baseUrl, nodes[0]!.adminUrl, adminToken)
    const sample = sampleCluster(cluster, databases)
    log(`${accounts.length} accounts funded; processes: ${Object.keys(sample()).filter((name) => !name.includes(":")).join(", ")}`)
    const baseUrls = nodes.map((node) => node.baseUrl)
    // Before any load: what each process spends with nothing to do (pollers, heartbeats,
    // leases), which a per-transfer figure at a low rate also carries.
    const idleBefore = sample()
    await sleep(idleWindowMs)
    idle = diffCpu(idleBefore, sample())
    log(`idle CPU ms per second: ${JSON.stringify(Object.fromEntries(Object.entries(idle).map(([name, ms]) => [name, Number((ms / (idleWindowMs / 1000)).toFixed(1))])))}`)
    for (const clients of clientLevels) {
      log(`${clients} clients for ${windowMs / 1000} s ...`)
      const result = await measured(`${clients} clients`, sample, closedLoop(baseUrls, accounts, clients))
      results.push({ label: result.label, ...summarize(result) })
      log(`  ${JSON.stringify(results.at(-1))}`)
    }
    log(`${fixedRatePerSecond} transfers/s for ${fixedRateMs / 1000} s ...`)
    const fixed = await measured(`${fixedRatePerSecond}/s fixed`, sample, openLoop(baseUrls, accounts))
    results.push({ label: fixed.label, ...summarize(fixed) })
    log(`  ${JSON.stringify(results.at(-1))}`)
  } finally {
    await cluster?.stop()
    await dropDatabases(postgresServerUrl, [databases.api, databases.guardian]).catch((error: unknown) => log(`dropping the databases failed: ${String(error)}`))
    const nc = await connect({ servers: benchNatsUrl }).catch(() => undefined)
    if (nc !== undefined) {
      await (await jetstreamManager(nc)).streams.delete(stream).catch(() => false)
      await nc.close()
    }
  }

  const names = Object.keys(results[0]?.cpuMsPerTransfer ?? {})
  const services = names.filter((name) => /^(api|worker|guardian)-/.test(name))
  const cpu = os.cpus()
  process.stdout.write([
    "",
    `machine: ${cpu[0]?.model ?? "unknown"} (${cpu.length} vCPU), load average at the end ${os.loadavg().map((load) => load.toFixed(1)).join(" ")}, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}`,
    `command: npm run -s bench:throughput -- --mode distributed --api-nodes ${apiNodesCount} --workers ${workersCount} --guardians ${guardiansCount} --clients ${clientLevels.join(",")} --seconds ${windowMs / 1000} --accounts ${accountsCount} --rate ${fixedRatePerSecond} --rate-seconds ${fixedRateMs / 1000} --block-time-ms ${blockTimeMs}`,
    `cryptographic floor per transfer (mcl-wasm, libsecp256k1; measured in this run): ${format(floorMs, 2)} ms`,
    "",
    `| load | confirmed/s | answers | create → confirmed p50 / p99 ms | CPU ms per confirmed transfer: ${names.join(" / ")} | all | load generator | nodes + guardians ÷ floor |`,
    "|---|---:|---|---:|---:|---:|---:|---:|",
    `| idle, CPU ms per second | | | | ${names.map((name) => format((idle[name] ?? Number.NaN) / (idleWindowMs / 1000))).join(" / ")} | | | |`,
    ...results.map((row) => {
      const perProcess = names.map((name) => row.cpuMsPerTransfer[name] ?? Number.NaN)
      const all = perProcess.reduce((sum, ms) => sum + ms, 0)
      const ours = services.reduce((sum, name) => sum + (row.cpuMsPerTransfer[name] ?? Number.NaN), 0)
      return `| ${row.label} | ${format(row.perSecond)} | ${Object.entries(row.byStatus).map(([status, count]) => `${status}: ${count}`).join(", ")} | ${format(row.p50, 0)} / ${format(row.p99, 0)} | ${perProcess.map((ms) => format(ms)).join(" / ")} | ${format(all)} | ${format(row.cpuLoadMs)} | ${format(ours / floorMs)}× |`
    }),
    ""
  ].join("\n"))
  const serviceCpuMs = (row: (typeof results)[number]) => services.reduce((sum, name) => sum + (row.cpuMsPerTransfer[name] ?? Number.NaN), 0)
  recordResults("throughput-distributed", levelMetrics(results.map((row) => ({ ...row, serviceCpuMs: serviceCpuMs(row) })), floorMs))
  fs.rmSync(workDir, { recursive: true, force: true })
}

await (distributed ? mainDistributed() : values.otlp ? mainOtlp() : main())
