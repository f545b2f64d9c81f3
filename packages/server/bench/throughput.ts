/**
 * The throughput benchmark (its goals and results: docs/benchmarks.md, issue 49): the service
 * loaded over loopback HTTP from this separate process, in one or more modes per run:
 *
 * - `embedded`: the real server process (`src/main.ts`, the embedded default of `npm start`:
 *   PGlite, its guardian child, anvil with 100 ms blocks);
 * - `distributed:N`: the cluster topology (`npm run cluster`'s processes, scripts/cluster/): the
 *   machine's PostgreSQL (127.0.0.1:5432, fresh databases dropped afterwards) and NATS, anvil, the
 *   guardians as their own processes, N api nodes and `--workers` workers. Clients go round-robin
 *   straight to the api nodes (no balancer: its TLS would cost these two cores too).
 *
 * Each mode: set-up, a window without traffic (each process's fixed CPU cost), each level of
 * concurrent clients (closed loop: each client sends its next transfer when the last one is
 * answered), then a fixed arrival rate (open loop), then an open loop at half of the capacity that
 * fixed rate measured (goal 3's p99: a fixed 100/s is past capacity in a slow hour, and its p99
 * then measures a queue). For each window (loadGenerator.ts): confirmed
 * transfers per second (create → `confirmed`, counting transfers answered `pending` once they
 * confirm), answers by status (load shed with 429/503 included), create → confirmed p50/p99, the
 * CPU each process spent (`/proc/<pid>/stat`, user + system) per confirmed transfer, this
 * process's own ("load generator": it runs on the same cores), the machine's busy share
 * (machineBusy.ts) and each process's peak resident memory. The mode's capacity comes from its
 * fixed-rate window (throughputReport.ts: cores × 1000 ms ÷ all the service's processes' CPU per
 * transfer) and every level is printed as a share of it. The cryptographic floor of one transfer
 * (packages/crypto/bench/transferFloor.ts, mcl-wasm) is measured in this process once per run, and
 * the server's and guardian's CPU per transfer (the nodes' and guardians' in the distributed mode)
 * is printed as a multiple of it. After each mode, its stores per transfer (storeSizes.ts).
 *
 * In the distributed mode the processes are each api node, worker, guardian, anvil, the
 * PostgreSQL backends serving the run's databases (`/proc`, matched by the database name in their
 * title), the PostgreSQL server's own processes (WAL writer, checkpointer, autovacuum; shared by
 * every database) and the NATS server (shared by every client): on a machine shared with other
 * work, the last two count that work too.
 *
 * Run (Linux: it reads /proc):
 *   npm run -s bench:throughput -- [--mode embedded,distributed:1,distributed:2] [--clients 64,256,1024]
 *                                  [--seconds 15] [--rate 100] [--rate-seconds 15] [--idle-seconds 5] [--no-record]
 *   (`--help` lists the rest)
 *
 * Each run appends its figures to docs/benchmarks/results.jsonl (scripts/benchRecord.ts), the
 * source of docs/benchmarks.md's tables, unless `--no-record`: as `throughput` when the embedded
 * mode ran (and its resident memory and stores as `memory`), else as `throughput-distributed`.
 */
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { Backend } from "@pps/crypto"
import { GuardianKeys } from "@pps/guardian"
import { medianMs, transferCrypto } from "../../crypto/bench/transferFloor.ts"
import { mulberry32, type Prng } from "../test/fault/prng.ts"
import { freshServerTarget } from "../test/fault/processes.ts"
import { type Cluster, dropDatabases, startCluster } from "../scripts/cluster/cluster.ts"
import { readEnvFile, writeRunEnvFile } from "../scripts/cluster/envFile.ts"
import { defaultWorkerNodes } from "../scripts/cluster/topology.ts"
import { type Account, closedLoop, measured, openLoop, type OpenLoop, type Sampler, setUp, sleep, summarize } from "./loadGenerator.ts"
import {
  childrenOf,
  commandOf,
  cpuMs,
  type CpuSample,
  diffCpu,
  natsServerProcesses,
  postgresBackends,
  postgresServerProcesses,
  residentMb,
  type ResidentSample
} from "./processStats.ts"
import { readSpans, stages, table } from "./spanSummary.ts"
import { measurePostgresStore, measureStores } from "./storeSizes.ts"
import { perTransfer, readStatements, type StatementRow, statementTable } from "./statementSummary.ts"
import {
  capacityFrom,
  capacityLine,
  capacityOf,
  cautionLines,
  format,
  levelsTable,
  type LevelRow,
  memoryMetrics,
  type ModeResult,
  residentTable,
  storesText,
  type Stores,
  throughputMetrics
} from "./throughputReport.ts"
import { type Metric, recordOption, recordResults } from "../../../scripts/benchRecord.ts"

const { values } = parseArgs({
  // pnpm passes its `--` separator on: after it every option would be read as a positional.
  args: process.argv.slice(2).filter((arg) => arg !== "--"),
  options: {
    clients: { type: "string", default: "64,256,1024" },
    seconds: { type: "string", default: "15" },
    accounts: { type: "string", default: "16" },
    rate: { type: "string", default: "100" },
    "rate-seconds": { type: "string", default: "15" },
    "block-time-ms": { type: "string", default: "100" },
    "idle-seconds": { type: "string", default: "5" },
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
  --mode embedded         the modes to run, in order, comma-separated, each with its own rows and capacity:
                          embedded (npm start's default), distributed (the cluster topology with --api-nodes
                          api nodes), distributed:N (with N api nodes); e.g. embedded,distributed:1,distributed:2.
                          The distributed mode uses PostgreSQL at PPS_BENCH_POSTGRES_URL (default
                          postgres://postgres@127.0.0.1:5432) and NATS at PPS_BENCH_NATS_URL (default nats://127.0.0.1:4222)
  --clients 64,256,1024   closed-loop client levels
  --seconds 15            window per level
  --accounts 16           accounts created and funded
  --rate 100              fixed arrival rate (transfers/s) of the open-loop run, the source of each mode's capacity;
                          then half of that capacity for as long
  --rate-seconds 15       its duration
  --block-time-ms 100     the chain's block time (goal 3: p99 ≤ 3 of them at half of capacity)
  --idle-seconds 5        a window without traffic first, for each process's fixed CPU cost
  --seed 16               the clients' pseudo-random choices (each mode from the same seed)
  --api-nodes 1           distributed: api nodes, loaded round-robin (distributed:N overrides)
  --workers ${defaultWorkerNodes}             distributed: worker nodes
  --guardians 2           distributed: guardian processes (one serves)
  --keep                  embedded: keep the work folder (data, server.log) for a post-mortem
                          (kept anyway when a transfer is still pending after the drain)
  --span-log DIR          embedded: the server and the guardian write their spans to DIR
                          (PPS_SPAN_LOG; tracing costs CPU, so not for the headline figures);
                          its stages are printed at the end (npm run -s bench:spans -- DIR)
  --statement-log DIR     embedded: the server and the guardian count their database statements
                          into DIR (PPS_STATEMENT_LOG); calls and ms in PGlite per transfer of each
                          window are printed at the end (a window's reading includes the rest before it)
  --cpu-prof DIR          embedded: the server and the guardian run under node's --cpu-prof (sampled
                          every 500 µs, written into DIR when they stop), and DIR/windows.json names
                          the processes and each window; summary: npm run -s bench:cpu-profile -- DIR
                          (the profiler costs CPU, so not for the headline figures)
  --otlp                  embedded only: what exporting traces and metrics costs. Runs everything twice, on two
                          fresh servers: without export (span recording off, as by default), then with
                          OTEL_EXPORTER_OTLP_ENDPOINT set to a receiver in this process (which only counts
                          what it gets); records the difference as the \`tracing\` benchmark, not as throughput
  --otlp-protocol P       with --otlp: http/json (the default, as the server's) or http/protobuf
  --no-record             do not append the figures to docs/benchmarks/results.jsonl
`)
  process.exit(0)
}

const usage = (why: string): never => {
  process.stderr.write(`throughput: ${why}\n`)
  process.exit(2)
}
const positive = (name: string, text: string | undefined): number => {
  const value = Number(text)
  return Number.isSafeInteger(value) && value >= 1 ? value : usage(`--${name} must be a whole number >= 1, got ${text}`)
}
const clientLevels = (values.clients ?? "").split(",").map((text) => positive("clients", text))
const windowMs = positive("seconds", values.seconds) * 1000
const accountsCount = Math.max(2, positive("accounts", values.accounts))
const fixedRatePerSecond = positive("rate", values.rate)
const fixedRateMs = positive("rate-seconds", values["rate-seconds"]) * 1000
const blockTimeMs = positive("block-time-ms", values["block-time-ms"])
const idleMs = positive("idle-seconds", values["idle-seconds"]) * 1000
const seed = positive("seed", values.seed)
const workersCount = positive("workers", values.workers)
const guardiansCount = positive("guardians", values.guardians)

type Mode = { readonly kind: "embedded" } | { readonly kind: "distributed"; readonly apiNodes: number }

/** `--mode`: `embedded`, `distributed` (with `--api-nodes`) or `distributed:N`, comma-separated. */
const parseModes = (text: string): ReadonlyArray<Mode> =>
  text.split(",").map((part): Mode => {
    if (part === "embedded") return { kind: "embedded" }
    const distributed = /^distributed(?::(\d+))?$/.exec(part)
    if (distributed === null) return usage(`--mode takes embedded, distributed or distributed:N, comma-separated; got ${part}`)
    return { kind: "distributed", apiNodes: positive("mode distributed:N", distributed[1] ?? values["api-nodes"]) }
  })
const modes = parseModes(values.mode ?? "embedded")
if (values.otlp && modes.some((mode) => mode.kind !== "embedded")) usage("--otlp runs the embedded mode only")

const modeLabel = (mode: Mode) =>
  mode.kind === "embedded" ? "embedded" : `distributed, ${mode.apiNodes} api node${mode.apiNodes === 1 ? "" : "s"}`

const log = (line: string) => process.stdout.write(`${new Date().toISOString()} ${line}\n`)
const fixedRateLabel = `${fixedRatePerSecond}/s fixed`

/**
 * What a stop by SIGINT or SIGTERM still undoes: the running mode's processes, databases and
 * stream. Without it a stopped run leaves them behind (an exit hook SIGKILLs the processes'
 * groups only when this process exits, which a signal's default action skips; nothing drops the
 * databases), on a machine shared with other work.
 */
const undoOnInterrupt = new Set<() => Promise<unknown>>()
/** How long the undoing may take before this process exits anyway (a cluster stops in ≤ 15 s a process). */
const interruptUndoMs = 60_000
const interrupted = (signal: NodeJS.Signals) => {
  log(`${signal}: stopping what this run started ...`)
  void Promise.race([Promise.allSettled([...undoOnInterrupt].map((undo) => undo())), sleep(interruptUndoMs)])
    .finally(() => process.exit(signal === "SIGINT" ? 130 : 143))
}
process.once("SIGINT", interrupted)
process.once("SIGTERM", interrupted)

/** The pause between the fixed rate and the half-capacity window. */
const halfCapacitySettleMs = 5_000

/**
 * An open loop at `perSecond` for the fixed rate's duration: the fixed rate itself, or half of the
 * capacity it measured (goal 3: the p99 with half of the machine asked, not of a queue; a caution
 * says when the CPU per transfer there rose past the fixed rate's, `cautionLines`).
 */
const runOpenLoop = async (prng: Prng, window: OpenLoop["window"], label: string, perSecond: number, baseUrls: ReadonlyArray<string>, accounts: ReadonlyArray<Account>, sampler: Sampler) => {
  log(`${label}: ${format(perSecond)} transfers/s for ${fixedRateMs / 1000} s ...`)
  const row = summarize(
    await measured(label, undefined, sampler, openLoop(prng, perSecond, fixedRateMs, baseUrls, accounts)),
    { window, askedPerSecond: perSecond }
  )
  log(`  ${JSON.stringify(row)}`)
  return row
}

/**
 * Each level, then the fixed rate, then half of the capacity that rate measured, against
 * `baseUrls`: the rows of a mode. `processes` are those the capacity counts (capacityFrom).
 * `onLevel` runs after each window, closed or open (the embedded mode's statement log reads each).
 */
const runLevels = async (
  baseUrls: ReadonlyArray<string>,
  accounts: ReadonlyArray<Account>,
  sampler: Sampler,
  processes: (row: LevelRow) => ReadonlyArray<string>,
  onLevel: (row: LevelRow) => Promise<void> = async () => {}
): Promise<Array<LevelRow>> => {
  // Each mode from the same seed: the same senders and recipients in the same order.
  const prng = mulberry32(seed)
  const rows: Array<LevelRow> = []
  for (const clients of clientLevels) {
    log(`${clients} clients for ${windowMs / 1000} s ...`)
    rows.push(summarize(await measured(`${clients} clients`, clients, sampler, closedLoop(prng, windowMs, baseUrls, accounts, clients))))
    log(`  ${JSON.stringify(rows.at(-1))}`)
    await onLevel(rows.at(-1)!)
  }
  const fixed = await runOpenLoop(prng, "fixed rate", fixedRateLabel, fixedRatePerSecond, baseUrls, accounts, sampler)
  rows.push(fixed)
  await onLevel(fixed)
  const half = capacityFrom(fixed, processes(fixed)).perSecond / 2
  if (Number.isFinite(half) && half > 0) {
    // The fixed rate's work (group commits, the chain's blocks, the collector) winds down first,
    // so that the window starts from the service at rest rather than inside the last one's tail.
    log(`${halfCapacitySettleMs / 1000} s without traffic before the half-capacity window ...`)
    await sleep(halfCapacitySettleMs)
    rows.push(await runOpenLoop(prng, "half capacity", "half capacity", half, baseUrls, accounts, sampler))
    await onLevel(rows.at(-1)!)
  } else log(`no capacity measured at ${fixedRateLabel}: no half-capacity window`)
  return rows
}

/** The window without traffic: CPU ms a second per process, the machine's busy share, resident memory at its end. */
const idleWindow = async (sampler: Sampler) => {
  log(`no traffic for ${idleMs / 1000} s ...`)
  const idle = await measured("idle", undefined, sampler, () => sleep(idleMs).then(() => []))
  const cpuPerSecond = Object.fromEntries(Object.entries(idle.cpu).map(([name, ms]) => [name, ms / (idle.elapsedMs / 1000)]))
  const resident = sampler.resident()
  log(`  idle CPU ms per second: ${JSON.stringify(cpuPerSecond)}; machine busy ${format(idle.busyShare * 100, 0)} %; resident MB ${JSON.stringify(resident)}`)
  return { cpuPerSecond, busyShare: idle.busyShare, resident }
}

// ---- the embedded mode ----

/** The embedded mode's processes, every one counted in its capacity (not `serverEventLoop`, a part of `server`). */
const embeddedProcesses = ["server", "guardian", "anvil"]

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

const embeddedSampler = (processes: Processes): Sampler => ({
  cpu: () => ({
    server: cpuMs(processes.server) ?? Number.NaN,
    // Not a process: the part of the server's CPU its event loop spent (the rest is its other
    // threads': the sealing thread, the garbage collector's helpers, libuv's pool).
    serverEventLoop: cpuMs(processes.server, processes.server) ?? Number.NaN,
    guardian: processes.guardian === undefined ? 0 : cpuMs(processes.guardian) ?? Number.NaN,
    anvil: processes.anvil === undefined ? Number.NaN : cpuMs(processes.anvil) ?? Number.NaN
  }),
  resident: () => ({ server: residentMb(processes.server), guardian: residentMb(processes.guardian), anvil: residentMb(processes.anvil) })
})

/**
 * Now on the clock of V8's CPU profiles (CLOCK_MONOTONIC in µs on Linux, as `process.hrtime`),
 * so that `--cpu-prof`'s samples can be cut to a window.
 */
const monotonicUs = () => Number(process.hrtime.bigint() / 1000n)

/** A window as `--cpu-prof` writes it into windows.json for cpuProfile.ts. */
interface ProfileWindow {
  readonly label: string
  readonly startUs: number
  readonly endUs: number
  readonly confirmed: number
  /** CPU ms each process (and the server's event loop) spent in the window, from /proc. */
  readonly cpuMs: CpuSample
}

/**
 * `sampler`, keeping the time of each CPU reading: a window (`measured`) reads once at its start
 * and once at its end, so the readings pair up into the idle window, the levels and the fixed rate.
 */
const timedSampler = (sampler: Sampler) => {
  const readings: Array<{ readonly atUs: number; readonly cpu: CpuSample }> = []
  return {
    sampler: { ...sampler, cpu: () => {
      const cpu = sampler.cpu()
      readings.push({ atUs: monotonicUs(), cpu })
      return cpu
    } } satisfies Sampler,
    windows: (windows: ReadonlyArray<{ readonly label: string; readonly confirmed: number }>): Array<ProfileWindow> =>
      windows.map(({ confirmed, label }, index) => {
        const start = readings[2 * index]!
        const end = readings[2 * index + 1]!
        return { label, confirmed, startUs: start.atUs, endUs: end.atUs, cpuMs: diffCpu(start.cpu, end.cpu) }
      })
  }
}

interface EmbeddedRun {
  readonly result: ModeResult
  readonly startResident: ResidentSample | undefined
  /** Per window, in order (with --statement-log). */
  readonly statementRows: ReadonlyArray<{ readonly label: string; readonly rows: ReadonlyArray<StatementRow> }>
  readonly statementLog: string | undefined
  readonly workDir: string
}

/** One server from start to stop: set-up, the idle window, the client levels, the fixed rate, half capacity; then its stores. */
const runEmbedded = async (extraEnv: Record<string, string>): Promise<EmbeddedRun> => {
  const statementLog = values["statement-log"] === undefined ? undefined : path.resolve(values["statement-log"])
  const cpuProfileDir = values["cpu-prof"] === undefined ? undefined : path.resolve(values["cpu-prof"])
  if (cpuProfileDir !== undefined) fs.mkdirSync(cpuProfileDir, { recursive: true })
  const statementRows: Array<EmbeddedRun["statementRows"][number]> = []
  const { adminPort, dataDir, port, server, workDir } = await freshServerTarget("pps-throughput-", {
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
  })
  const baseUrl = `http://127.0.0.1:${port}`
  let startResident: ResidentSample | undefined
  let idle: Awaited<ReturnType<typeof idleWindow>> | undefined
  let rows: Array<LevelRow> = []
  const stopServer = () => server.stop()
  undoOnInterrupt.add(stopServer)
  try {
    log(`starting the server (embedded default, ${blockTimeMs} ms blocks) in ${workDir}`)
    await server.start()
    startResident = embeddedSampler(findProcesses(dataDir)).resident()
    log(`  resident MB once ready: ${JSON.stringify(startResident)}`)
    const adminToken = (JSON.parse(fs.readFileSync(path.join(dataDir, "secrets.json"), "utf8")) as { admin_token: string }).admin_token
    const accounts = await setUp(accountsCount, baseUrl, `http://127.0.0.1:${adminPort}`, adminToken)
    const processes = findProcesses(dataDir)
    log(`${accounts.length} accounts funded; pids: server ${processes.server}, guardian ${processes.guardian ?? "in process"}, anvil ${processes.anvil ?? "not found"}`)
    const timed = timedSampler(embeddedSampler(processes))
    const sampler = timed.sampler
    // What each process spends with nothing to do (watchers, relays, sweeps): under load it is
    // part of every transfer's CPU, and at a low rate most of it.
    idle = await idleWindow(sampler)
    // The statement logs are rewritten every second: the reading after the window waits for one more.
    let statementsBefore = statementLog === undefined ? undefined : readStatements(statementLog)
    rows = await runLevels([baseUrl], accounts, sampler, () => embeddedProcesses, async (row) => {
      if (statementLog === undefined || statementsBefore === undefined) return
      await sleep(1_200)
      const statementsAfter = readStatements(statementLog)
      statementRows.push({ label: row.label, rows: perTransfer(statementsBefore, statementsAfter, row.confirmed) })
      statementsBefore = statementsAfter
    })
    if (cpuProfileDir !== undefined) {
      const windows = timed.windows([{ label: "idle", confirmed: 0 }, ...rows])
      fs.writeFileSync(path.join(cpuProfileDir, "windows.json"), JSON.stringify({ processes, windows }, null, 2))
    }
  } finally {
    undoOnInterrupt.delete(stopServer)
    await server.stop()
  }
  log("the stores, once the service's maintenance has run over them ...")
  const stores = await measureStores(dataDir)
  const result: ModeResult = {
    mode: "embedded",
    rows,
    processes: embeddedProcesses,
    service: ["server", "guardian"],
    residentProcesses: ["server", "guardian", "anvil"],
    idleMs,
    idleCpuPerSecond: idle?.cpuPerSecond ?? {},
    idleBusyShare: idle?.busyShare ?? Number.NaN,
    idleResident: idle?.resident,
    stores
  }
  return { result, startResident, statementRows, statementLog, workDir }
}

/** The embedded mode's own output: resident memory once ready, statements, spans; its work folder kept or removed. */
const embeddedExtras = (run: EmbeddedRun) => {
  process.stdout.write(`${residentTable(run.startResident, run.result)}\n\n`)
  for (const { label, rows } of run.statementRows) {
    process.stdout.write(`database statements per confirmed transfer, ${label} (PPS_STATEMENT_LOG in ${run.statementLog}):\n\n${statementTable(rows)}\n`)
  }
  if (values["span-log"] !== undefined) {
    const { rows, traces } = stages(readSpans(values["span-log"]), "Transfers.create")
    process.stdout.write(`stages of ${traces} creates, every level together (spans in ${values["span-log"]}):\n\n${table(rows.filter((row) => row.perTrace >= 0.05))}\n`)
  }
  // A transfer still pending after the drain is a stall seen rarely ("A stall seen once" in
  // docs/benchmarks/notes/2026-11-26-spans-off-records-batched.md): its server log is what would
  // explain it, so the folder is kept for it unasked.
  const stalled = run.result.rows.some((row) => (row.byStatus["201 pending"] ?? 0) > 0)
  if (values.keep || stalled) log(`kept ${run.workDir}${stalled ? " (transfers still pending after the drain: see server.log)" : ""}`)
  else fs.rmSync(run.workDir, { recursive: true, force: true })
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

/** A row's rate and its server's and guardian's CPU per confirmed transfer. */
const cpuOf = (row: LevelRow) => ({
  perSecond: row.perSecond,
  cpuServerMs: row.cpuMsPerTransfer["server"] ?? Number.NaN,
  cpuGuardianMs: row.cpuMsPerTransfer["guardian"] ?? Number.NaN
})

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
    const confirmedWithExport = on.result.rows.reduce((sum, row) => sum + row.confirmed, 0)
    // Rows of the same load in both runs, paired by label: not the half-capacity window, whose rate
    // each run sets from its own capacity (export lowers it), so the two would differ in load too.
    const rows = off.result.rows.flatMap((row) => {
      const withExport = on.result.rows.find((other) => other.label === row.label)
      return row.window === "half capacity" || withExport === undefined ? [] : [{ label: row.label, off: cpuOf(row), on: cpuOf(withExport) }]
    })
    const idle = { off: off.result.idleCpuPerSecond["server"] ?? Number.NaN, on: on.result.idleCpuPerSecond["server"] ?? Number.NaN }
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

/** The cluster's processes, every one a process the sampler reads (each counted in its capacity). */
const clusterProcesses = (row: LevelRow) => Object.keys(row.cpuMsPerTransfer)

const postgresServerUrl = (process.env["PPS_BENCH_POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432").replace(/\/+$/, "")
const benchNatsUrl = process.env["PPS_BENCH_NATS_URL"] ?? "nats://127.0.0.1:4222"
const clusterTemplate = fileURLToPath(new URL("../../../deploy/cluster.env.example", import.meta.url))

interface RunDatabases {
  readonly api: string
  readonly guardian: string
}

/** Each cluster process by name, the PostgreSQL backends of the run's databases, the PostgreSQL and NATS servers. */
const clusterSampler = (cluster: Cluster, databases: RunDatabases): Sampler => {
  const members = () => [...cluster.apiNodes, ...cluster.workers, ...cluster.guardians, { name: "anvil", pid: cluster.chain.pid }]
  return {
    cpu: (): CpuSample => {
      const sample: Record<string, number> = {}
      for (const member of members()) {
        const pid = member.pid()
        sample[member.name] = pid === undefined ? Number.NaN : cpuMs(pid) ?? Number.NaN
      }
      const groups = [
        ["postgres-api", postgresBackends(databases.api)],
        ["postgres-guardian", postgresBackends(databases.guardian)],
        ["postgres-server", postgresServerProcesses()],
        ["nats", natsServerProcesses()]
      ] as const
      for (const [group, pids] of groups) {
        sample[group] = 0
        for (const pid of pids) sample[`${group}:${pid}`] = cpuMs(pid) ?? 0
      }
      return sample
    },
    // The PostgreSQL and NATS servers' memory is theirs, not a run's: only the cluster's own processes.
    resident: () => Object.fromEntries(members().map((member) => [member.name, residentMb(member.pid())]))
  }
}

/** The run's databases sized (storeSizes.ts), then dropped, and its NATS stream deleted; a failure is logged, not thrown. */
const cleanUpDistributed = async (databases: RunDatabases, stream: string): Promise<Stores | undefined> => {
  const databaseUrl = (name: string) => `${postgresServerUrl}/${name}`
  const stores = await Promise.all([measurePostgresStore(databaseUrl(databases.api)), measurePostgresStore(databaseUrl(databases.guardian))])
    .then(([api, guardian]) => ({ api, guardian }))
    .catch((error: unknown) => {
      log(`sizing the databases failed: ${String(error)}`)
      return undefined
    })
  await dropDatabases(postgresServerUrl, [databases.api, databases.guardian]).catch((error: unknown) => log(`dropping the databases failed: ${String(error)}`))
  const nc = await connect({ servers: benchNatsUrl }).catch(() => undefined)
  if (nc !== undefined) {
    await (await jetstreamManager(nc)).streams.delete(stream).catch(() => false)
    await nc.close()
  }
  return stores
}

/** One cluster from start to stop: set-up, the idle window, the client levels, the fixed rate, half capacity; then its databases. */
const runDistributed = async (apiNodes: number): Promise<ModeResult> => {
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
  let cluster: Cluster | undefined
  let sampler: Sampler | undefined
  let idle: Awaited<ReturnType<typeof idleWindow>> | undefined
  let rows: Array<LevelRow> = []
  let stores: Stores | undefined
  const undo = async () => {
    await cluster?.stop()
    await cleanUpDistributed(databases, stream)
  }
  undoOnInterrupt.add(undo)
  try {
    log(`starting the cluster (${apiNodes} api node(s), ${workersCount} worker(s), ${guardiansCount} guardian(s), ${blockTimeMs} ms blocks) in ${workDir}`)
    cluster = await startCluster({
      envFile,
      dir: workDir,
      apiNodes,
      workers: workersCount,
      guardians: guardiansCount,
      postgresUrl: postgresServerUrl,
      natsUrl: benchNatsUrl,
      chainBlockTimeMs: blockTimeMs,
      log: (line) => log(`  cluster: ${line}`)
    })
    const nodes = cluster.apiNodes
    const adminToken = readEnvFile(envFile).get("ADMIN_TOKEN")!
    const accounts = await setUp(accountsCount, nodes[0]!.baseUrl, nodes[0]!.adminUrl, adminToken)
    sampler = clusterSampler(cluster, databases)
    log(`${accounts.length} accounts funded; processes: ${Object.keys(sampler.cpu()).filter((name) => !name.includes(":")).join(", ")}`)
    // Before any load: what each process spends with nothing to do (pollers, heartbeats,
    // leases), which a per-transfer figure at a low rate also carries.
    idle = await idleWindow(sampler)
    rows = await runLevels(nodes.map((node) => node.baseUrl), accounts, sampler, clusterProcesses)
  } finally {
    undoOnInterrupt.delete(undo)
    await cluster?.stop()
    stores = await cleanUpDistributed(databases, stream)
  }
  fs.rmSync(workDir, { recursive: true, force: true })
  const processes = rows[0] === undefined ? [] : clusterProcesses(rows[0])
  const residentProcesses = Object.keys(rows[0]?.resident ?? {})
  return {
    mode: modeLabel({ kind: "distributed", apiNodes }),
    rows,
    processes,
    service: processes.filter((name) => /^(api|worker|guardian)-/.test(name)),
    residentProcesses,
    idleMs,
    idleCpuPerSecond: idle?.cpuPerSecond ?? {},
    idleBusyShare: idle?.busyShare ?? Number.NaN,
    idleResident: idle?.resident,
    stores
  }
}

// ---- the run ----

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

const machineLine = () => {
  const cpu = os.cpus()
  return `machine: ${cpu[0]?.model ?? "unknown"} (${cpu.length} vCPU), load average at the end ${os.loadavg().map((load) => load.toFixed(1)).join(" ")}, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}`
}

const commandLine = () =>
  `command: npm run -s bench:throughput -- --mode ${modes.map((mode) => (mode.kind === "embedded" ? "embedded" : `distributed:${mode.apiNodes}`)).join(",")}` +
  ` --clients ${clientLevels.join(",")} --seconds ${windowMs / 1000} --accounts ${accountsCount} --rate ${fixedRatePerSecond} --rate-seconds ${fixedRateMs / 1000}` +
  ` --block-time-ms ${blockTimeMs} --idle-seconds ${idleMs / 1000}` +
  (modes.some((mode) => mode.kind === "distributed") ? ` --workers ${workersCount} --guardians ${guardiansCount}` : "")

/** Every mode in turn, then one report of them all, recorded as one run. */
const main = async () => {
  const floorMs = await measureFloorMs()
  const results: Array<ModeResult> = []
  let embedded: EmbeddedRun | undefined
  for (const mode of modes) {
    log(`== ${modeLabel(mode)} ==`)
    if (mode.kind === "embedded") {
      embedded = await runEmbedded({})
      results.push(embedded.result)
    } else {
      results.push(await runDistributed(mode.apiNodes))
    }
  }
  const cautions = cautionLines(results)
  process.stdout.write([
    "",
    machineLine(),
    commandLine(),
    `cryptographic floor per transfer (mcl-wasm, libsecp256k1; measured in this run): ${format(floorMs, 2)} ms`,
    "",
    levelsTable(results, floorMs),
    "",
    "service ÷ floor: the CPU per confirmed transfer of the server and guardian (the api nodes, workers and guardians) ÷ the floor.",
    ...results.map((mode) => capacityLine(mode, capacityOf(mode))),
    ...(cautions.length === 0 ? [] : ["", ...cautions]),
    "",
    storesText(results),
    ""
  ].join("\n"))
  if (embedded !== undefined) embeddedExtras(embedded)
  recordResults(embedded === undefined ? "throughput-distributed" : "throughput", throughputMetrics(results, floorMs, blockTimeMs))
  if (embedded !== undefined) recordResults("memory", memoryMetrics(embedded.result))
}

await (values.otlp ? mainOtlp() : main())
