/**
 * The benchmarks' results file: every bench script appends what it measured here, one JSON line
 * per metric per run, so that docs/benchmarks.md can show the current figure of each benchmark
 * (scripts/benchmarksTable.ts renders it) instead of a diary of hand-copied tables.
 *
 * A record carries what a reader needs to trust or redo the figure: the command line, the commit
 * (with `-dirty` when tracked files differed from it), the date and the machine. The machines
 * these benchmarks run on are shared, so the load average at the end of the run is kept too.
 *
 * Skipping: `--no-record` on the bench's command line, or `PPS_BENCH_RECORD=0` in its
 * environment (a run made while trying something out, not one to keep).
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

/** The repository's root, from this file's place in it (scripts/). */
export const repositoryRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

/** The one results file, in the repository so that a result is reviewed and merged with the change it measured. */
export const resultsFile = path.join(repositoryRoot, "docs", "benchmarks", "results.jsonl")

/**
 * A goal as text a reader and the table can both read: `>= 300` (at least) or `<= 5` (at most),
 * in the metric's unit.
 */
export type Goal = `${">=" | "<="} ${number}`

/** One metric of one run, as the bench script states it. */
export interface Metric {
  readonly metric: string
  readonly value: number
  readonly unit: string
  readonly goal?: Goal
  /** The value divided by the floor it is compared with (the throughput bench's cryptographic floor). */
  readonly ratioToFloor?: number
  /** Shown on the benchmark's line in the history (a run's few figures that matter most). */
  readonly headline?: boolean
}

/** One line of results.jsonl. */
export interface BenchRecord {
  readonly benchmark: string
  readonly metric: string
  readonly value: number
  readonly unit: string
  readonly goal?: Goal
  readonly ratio_to_floor?: number
  readonly headline?: boolean
  readonly command: string
  readonly commit: string
  readonly date: string
  readonly machine: string
  readonly load_average?: string
  /** Where a figure came from when no bench run wrote it (the figures copied from the old diary). */
  readonly source?: string
  /** A dated note that explains the run, relative to docs/ (`benchmarks/notes/<date>-<topic>.md`). */
  readonly note?: string
}

/** `--no-record` for a bench that parses its options with `parseArgs` (strict mode refuses unknown flags). */
export const recordOption = { "no-record": { type: "boolean", default: false } } as const

/** Whether this run writes its results: not with `--no-record`, nor with `PPS_BENCH_RECORD=0`. */
export const recording = (): boolean => !process.argv.includes("--no-record") && process.env["PPS_BENCH_RECORD"] !== "0"

const git = (args: ReadonlyArray<string>): string =>
  execFileSync("git", [...args], { cwd: repositoryRoot, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim()

/**
 * `git rev-parse --short HEAD`, plus `-dirty` when a tracked file differs from it. The results
 * file, the notes and the table rendered from them (docs/benchmarks.md) are left out of the
 * comparison: a run recorded a moment ago must not make the next one look dirty.
 */
export const currentCommit = (): string => {
  try {
    const head = git(["rev-parse", "--short", "HEAD"])
    const changed = git(["status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)docs/benchmarks", ":(exclude)docs/benchmarks.md"])
    return changed === "" ? head : `${head}-dirty`
  } catch {
    return "unknown"
  }
}

/**
 * The commit of the code that runs, taken when the bench starts (this module is imported before
 * the bench's body runs): a commit made during a long run must not be credited with it.
 */
const commitAtStart = currentCommit()

/** The CPU model as /proc/cpuinfo names it (os.cpus() is the same source, and works off Linux). */
export const currentMachine = (): string => {
  const cpus = os.cpus()
  const memoryGiB = os.totalmem() / 2 ** 30
  return `${cpus[0]?.model.trim() ?? "unknown CPU"}, ${cpus.length} cores, ${memoryGiB.toFixed(1)} GiB, Node ${process.version}`
}

/** Environment variables that change what a bench measures: shown in its command line, before the command. */
const settingsVariable = /^(BENCH_|SETTLEMENT_|PPS_BENCH_|SENDER_|EMBEDDED_)/

/**
 * The command line that ran this bench, as a reader would retype it: the npm or pnpm script when
 * one started it (npm sets `npm_lifecycle_event`), else `node <script>`; then its arguments
 * (`--no-record` aside) and, first, the settings it read from the environment.
 */
export const currentCommand = (): string => {
  const settings = Object.entries(process.env)
    .filter(([name, value]) => settingsVariable.test(name) && name !== "PPS_BENCH_RECORD" && value !== undefined)
    .map(([name, value]) => `${name}=${value}`)
    .sort()
  // pnpm passes its `--` separator on to the script; the launcher below writes its own.
  const args = process.argv.slice(2).filter((arg) => arg !== "--no-record" && arg !== "--")
  const script = process.env["npm_lifecycle_event"]
  const packageName = process.env["npm_package_name"]
  const launcher = script === undefined
    ? ["node", path.relative(repositoryRoot, process.argv[1] ?? "?")]
    : packageName === undefined || packageName === "private-payments-service"
    ? ["npm", "run", "-s", script]
    : ["pnpm", "--filter", packageName, script]
  const withArgs = args.length === 0 ? launcher : [...launcher, ...(script === undefined ? [] : ["--"]), ...args]
  return [...settings, ...withArgs].join(" ")
}

/** Finite values only: a metric the run could not measure (no transfer confirmed) is left out, not written as null. */
const measurable = (metric: Metric) => Number.isFinite(metric.value)

/** The records of one run, all with the same command, commit, date and machine. */
export const toRecords = (benchmark: string, metrics: ReadonlyArray<Metric>, date = new Date()): Array<BenchRecord> => {
  const run = {
    command: currentCommand(),
    commit: commitAtStart,
    date: date.toISOString(),
    machine: currentMachine(),
    load_average: os.loadavg().map((load) => load.toFixed(1)).join(" ")
  }
  return metrics.filter(measurable).map((metric) => ({
    benchmark,
    metric: metric.metric,
    // Three decimals are more than any of these measurements resolves.
    value: Number.isInteger(metric.value) ? metric.value : Number(metric.value.toFixed(3)),
    unit: metric.unit,
    ...(metric.goal === undefined ? {} : { goal: metric.goal }),
    ...(metric.ratioToFloor === undefined || !Number.isFinite(metric.ratioToFloor) ? {} : { ratio_to_floor: Number(metric.ratioToFloor.toFixed(2)) }),
    ...(metric.headline === true ? { headline: true } : {}),
    ...run
  }))
}

/**
 * Appends one run's metrics to the results file (unless recording is off) and says so on stderr,
 * so that stdout stays what each bench printed before.
 */
export const recordResults = (benchmark: string, metrics: ReadonlyArray<Metric>): void => {
  if (!recording()) return
  const records = toRecords(benchmark, metrics)
  fs.mkdirSync(path.dirname(resultsFile), { recursive: true })
  fs.appendFileSync(resultsFile, records.map((record) => `${JSON.stringify(record)}\n`).join(""))
  process.stderr.write(
    `recorded ${records.length} results of ${benchmark} in ${path.relative(process.cwd(), resultsFile)} (npm run -s bench:table to update docs/benchmarks.md; --no-record to skip)\n`
  )
}
