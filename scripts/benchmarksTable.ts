/**
 * docs/benchmarks.md's tables, written from docs/benchmarks/results.jsonl (the records every bench
 * script appends: scripts/benchRecord.ts). Two parts of the document are generated, each between
 * its markers: the current table of each benchmark (its latest run), and the history (one line
 * per run, newest first). Everything else in the document is written by hand.
 *
 * Run: `npm run -s bench:table` rewrites the document; `--check` only says whether it is up to
 * date (exit 1 if not). packages/server/test/benchmarksDocs.test.ts runs the same check.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { type BenchRecord, repositoryRoot, resultsFile } from "./benchRecord.ts"

export const documentFile = path.join(repositoryRoot, "docs", "benchmarks.md")

/** The generated parts, each between a start and an end marker. */
export const sections = ["current", "history"] as const
export type Section = (typeof sections)[number]
const startMarker = (section: Section) => `<!-- benchmarks:${section}:start (npm run -s bench:table writes this part; do not edit it by hand) -->`
const endMarker = (section: Section) => `<!-- benchmarks:${section}:end -->`

/**
 * The benchmarks in the order a reader meets them, each with what it measures; one not listed
 * here is shown after them, by name.
 */
const benchmarks: ReadonlyArray<readonly [string, string]> = [
  ["throughput", "The service loaded over loopback HTTP from another process, each mode run in turn: embedded (the server process with PGlite, its guardian child, anvil) and distributed with 1 and 2 api nodes (workers, guardian processes, PostgreSQL, NATS). Per mode and level (64, 256, 1,024 closed-loop clients, then a fixed rate, then half of the capacity that rate measured): confirmed/s and its share of the mode's capacity (cores × 1000 ms ÷ the CPU ms all the service's processes spent per confirmed transfer at the fixed rate; also counting the load generator), the machine's busy share (`/proc/stat`), CPU per process per transfer, server + guardian (nodes + guardians) ÷ the cryptographic floor measured in the same run, p50/p99, answers, peak resident memory; each store per transfer after the run. Goals (issue 49): ≥ 0.85 of capacity at 256 and 1,024 clients; ≤ 2.0× the floor at 64, 256 and 1,024, ≤ 3.0× at the fixed rate; p99 ≤ 3 block intervals at half of capacity. `packages/server/bench/throughput.ts`."],
  ["memory", "Resident memory (`VmRSS`) of the server, its guardian and anvil from the throughput bench's embedded run (idle after the set-up, and each level's peak), and each embedded store's size per transfer after the service's own `VACUUM`, and compacted (`VACUUM FULL`: what a long run approaches, D79); goals (issue 49, D67): server + guardian ≤ 400 MB idle and ≤ 700 MB at 256 clients, ≤ 3 KB of api database per transfer. `packages/server/bench/throughput.ts`, `storeSizes.ts`."],
  ["throughput-distributed", "The same figures from a run of the distributed mode alone (`throughput.ts --mode distributed[:N]`); a run with the embedded mode too records every mode under throughput. `packages/server/bench/throughput.ts`."],
  ["statements", "SQL statements per transfer in both embedded databases, sequential transfers: a machine-independent measure of the transfer path's database work. `packages/server/bench/statements.ts`."],
  ["spans", "Where a create's time goes, stage by stage, from the span log of a throughput run (`--span-log`; tracing on, so not a speed figure). `packages/server/bench/spans.ts`."],
  ["tracing", "What a span costs the process that records it, and exports it over OTLP (JSON, protobuf), per span and per create-shaped tree. `bench:spans -- --cost` (`packages/server/bench/spanCost.ts`); `bench:throughput -- --otlp` for the whole server."],
  ["guardian", "The guardian's CPU per authorize + settle pair, alone, beside its cryptographic floor. `packages/guardian/bench/authorizeSettle.ts`."],
  ["crypto", "Median time per operation of `@pps/crypto`, one core, both backends. `packages/crypto/bench/crypto.bench.ts`."],
  ["transfers", "`POST /v1/transfers` → `confirmed` with the clients in the server's process; its goals: ≥ 500/s and ≥ 0.5 of anvil's raw rate at 64 clients, p99 ≤ 250 ms at 100/s. `packages/server/bench/transfers.bench.ts`."],
  ["settlement", "The chain adapter alone: `Settlement.submit` → confirmed beside anvil's raw rate. `packages/server/bench/settlement.bench.ts`."],
  ["webhooks", "Webhook deliveries per second to a local HTTPS receiver, and commit → first attempt latency. `packages/server/bench/webhooks.bench.ts`."],
  ["listen", "`pps listen`: an event's commit → its arrival at the forwarded-to receiver, one node on PGlite and two api nodes on PostgreSQL (D58). `packages/server/bench/listen.bench.ts`."],
  ["webhook-rate", "The service's delivery rate (committed events → signed deliveries recorded, embedded default; since 2026-11-30 timed from the events' commit, D82, `--append-in-round` for the earlier timing that included the append) against a bare `node:https` client posting the same signed payloads with the same agent settings to the same receiver and recording nothing, alternating A B B A in one run, with 1 and with 50 subscriptions, and each side's CPU a delivery; goal (issue 49): ≥ 0.5 of the bare rate. `packages/server/bench/webhookRate.ts`."],
  ["contracts-gas", "Receipt `gasUsed` of each ConfidentialToken function on a fresh anvil. `packages/contracts/bench/gas.ts`."],
  ["contracts-rpc", "What one chain call costs the calling process, per transport. `packages/contracts/bench/rpc.ts`."],
  ["pglite", "What a PGlite statement costs, by shape (statements, transactions, round trips). `packages/server/bench/pgliteRoundTrips.ts`."],
  ["side-tables", "Partial indexes against side tables for the server's \"still to do\" sets. `packages/server/bench/sideTables.ts`."],
  ["fault", "The fault-injection harness: servers killed under load, invariants checked. `packages/server/bench/fault.ts`."],
  ["x402", "A paid HTTP request with the confidential x402 scheme (D57): 402 → paid → 200 beside the unpaid request and x402's public `exact`, and gas per payment beside `transferWithAuthorization`, on one anvil with 100 ms blocks. `packages/x402/bench/paid.ts`."]
]

const requiredText = ["benchmark", "metric", "unit", "command", "commit", "date", "machine"] as const

/** One line of the results file, checked: a malformed line is an error, not a gap in the table. */
const parseRecord = (line: string, lineNumber: number): BenchRecord => {
  const value: unknown = JSON.parse(line)
  const fail = (why: string): never => {
    throw new Error(`${path.relative(repositoryRoot, resultsFile)}:${lineNumber}: ${why}`)
  }
  if (typeof value !== "object" || value === null) return fail("not a JSON object")
  const fields = value as Record<string, unknown>
  for (const name of requiredText) if (typeof fields[name] !== "string") fail(`"${name}" is not a string`)
  if (typeof fields["value"] !== "number" || !Number.isFinite(fields["value"])) fail(`"value" is not a finite number`)
  if (fields["goal"] !== undefined && (typeof fields["goal"] !== "string" || !/^(<=|>=) -?\d+(\.\d+)?$/.test(fields["goal"]))) {
    fail(`"goal" is not "<= N" or ">= N"`)
  }
  if (Number.isNaN(Date.parse(String(fields["date"])))) fail(`"date" is not a date`)
  return value as BenchRecord
}

export const readRecords = (file = resultsFile): Array<BenchRecord> =>
  fs.existsSync(file)
    ? fs.readFileSync(file, "utf8").split("\n").flatMap((line, index) => (line.trim() === "" ? [] : [parseRecord(line, index + 1)]))
    : []

/** A run: the records of one benchmark written together (same date, command and commit). */
interface Run {
  readonly benchmark: string
  readonly records: ReadonlyArray<BenchRecord>
  readonly first: BenchRecord
}

const runsOf = (records: ReadonlyArray<BenchRecord>): Array<Run> => {
  const byKey = new Map<string, Array<BenchRecord>>()
  for (const record of records) {
    const key = JSON.stringify([record.benchmark, record.date, record.command, record.commit, record.source ?? ""])
    const group = byKey.get(key)
    if (group === undefined) byKey.set(key, [record])
    else group.push(record)
  }
  return [...byKey.values()].map((group) => ({ benchmark: group[0]!.benchmark, records: group, first: group[0]! }))
}

/** Benchmarks in the reader's order (the list above, then the rest by name), each with its runs newest first. */
const byBenchmark = (records: ReadonlyArray<BenchRecord>): Array<readonly [string, Array<Run>]> => {
  const runs = runsOf(records).sort((a, b) => Date.parse(b.first.date) - Date.parse(a.first.date))
  const known = benchmarks.map(([name]) => name)
  const names = [...new Set(runs.map((run) => run.benchmark))].sort((a, b) => {
    const [ia, ib] = [known.indexOf(a), known.indexOf(b)]
    return ia === -1 && ib === -1 ? a.localeCompare(b) : ia === -1 ? 1 : ib === -1 ? -1 : ia - ib
  })
  return names.map((name) => [name, runs.filter((run) => run.benchmark === name)] as const)
}

/** Digits by magnitude: what these measurements resolve, no more. */
export const formatValue = (value: number): string => {
  const size = Math.abs(value)
  const digits = size >= 1000 || Number.isInteger(value) ? 0 : size >= 10 ? 1 : size >= 0.1 ? 2 : 3
  return value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })
}

const goalMet = (record: BenchRecord): boolean | undefined => {
  if (record.goal === undefined) return undefined
  const [comparison, bound] = record.goal.split(" ")
  return comparison === ">=" ? record.value >= Number(bound) : record.value <= Number(bound)
}

const goalText = (record: BenchRecord): string => {
  if (record.goal === undefined) return ""
  const [comparison, bound] = record.goal.split(" ")
  return `${comparison === ">=" ? "≥" : "≤"} ${formatValue(Number(bound))}: ${goalMet(record) === true ? "met" : "**not met**"}`
}

/**
 * A minute's resolution: the runs of one benchmark are minutes apart at least. A figure copied
 * from the old diary may carry its day alone (`2026-11-25`), when the diary gave no time.
 */
const dateText = (date: string) => (date.length <= 10 ? date : `${date.slice(0, 10)} ${date.slice(11, 16)} UTC`)

const cell = (text: string) => text.replaceAll("|", "\\|")

const describe = (name: string) => benchmarks.find(([known]) => known === name)?.[1]

const anchorOf = (name: string) => `bench-${name}`

const sourceText = (run: Run) =>
  [
    run.first.source === undefined ? "" : ` Copied from the ${run.first.source}, not written by a bench run.`,
    run.first.note === undefined ? "" : ` Notes: [${path.basename(run.first.note)}](${run.first.note}).`
  ].join("")

const currentTable = (name: string, runs: ReadonlyArray<Run>): string => {
  const latest = runs[0]!
  const { first } = latest
  const withRatio = latest.records.some((record) => record.ratio_to_floor !== undefined)
  const withGoal = latest.records.some((record) => record.goal !== undefined)
  const header = ["metric", "value", ...(withGoal ? ["goal"] : []), ...(withRatio ? ["÷ floor"] : [])]
  const rows = latest.records.map((record) =>
    [
      cell(record.metric),
      `${formatValue(record.value)} ${record.unit}`,
      ...(withGoal ? [goalText(record)] : []),
      ...(withRatio ? [record.ratio_to_floor === undefined ? "" : `${formatValue(record.ratio_to_floor)}×`] : [])
    ]
  )
  const description = describe(name)
  return [
    `<a id="${anchorOf(name)}"></a>`,
    `### ${name}`,
    "",
    ...(description === undefined ? [] : [description, ""]),
    `Latest run: ${dateText(first.date)}, commit \`${first.commit}\`, ${first.machine}${first.load_average === undefined ? "" : ` (load average ${first.load_average})`}.${sourceText(latest)}`,
    `Command: \`${first.command}\``,
    "",
    `| ${header.join(" | ")} |`,
    `|---|---:|${withGoal ? "---|" : ""}${withRatio ? "---:|" : ""}`,
    ...rows.map((row) => `| ${row.join(" | ")} |`),
    ""
  ].join("\n")
}

/** The run's headline figures, on one line. */
const headline = (run: Run): string =>
  headlineRecords(run).map((record) => `${record.metric} ${formatValue(record.value)} ${record.unit}`).join("; ")

const historyLine = (run: Run): string => {
  const { first } = run
  const note = first.note === undefined ? "" : ` ([notes](${first.note}))`
  const source = first.source === undefined ? "" : " (from the old diary)"
  return `- ${dateText(first.date)}, \`${first.commit}\`, ${first.machine.split(",").slice(0, 2).join(",")}: ${cell(headline(run))}${source}${note}; \`${first.command}\``
}

/** The headline records of a run, or its first three when it marks none. */
const headlineRecords = (run: Run): ReadonlyArray<BenchRecord> => {
  const marked = run.records.filter((record) => record.headline === true)
  return marked.length === 0 ? run.records.slice(0, 3) : marked
}

/** One row per benchmark: its latest run's headline figures, each with its goal; the full table follows. */
const overview = (benchmarksRuns: ReadonlyArray<readonly [string, ReadonlyArray<Run>]>): string =>
  [
    "| benchmark | latest run | headline figures |",
    "|---|---|---|",
    ...benchmarksRuns.map(([name, runs]) => {
      const latest = runs[0]!
      const figures = headlineRecords(latest).map((record) => {
        const goal = goalText(record)
        return `${cell(record.metric)} ${formatValue(record.value)} ${record.unit}${goal === "" ? "" : ` (${goal})`}`
      })
      const copied = latest.first.source === undefined ? "" : ", from the old diary"
      return `| [${name}](#${anchorOf(name)}) | ${dateText(latest.first.date)}, \`${latest.first.commit}\`${copied} | ${figures.join("; ")} |`
    }),
    ""
  ].join("\n")

export const renderCurrent = (records: ReadonlyArray<BenchRecord>): string => {
  const grouped = byBenchmark(records)
  return [overview(grouped), ...grouped.map(([name, runs]) => currentTable(name, runs))].join("\n")
}

export const renderHistory = (records: ReadonlyArray<BenchRecord>): string =>
  byBenchmark(records).map(([name, runs]) => [`### ${name}`, "", ...runs.map(historyLine), ""].join("\n")).join("\n")

const render: Record<Section, (records: ReadonlyArray<BenchRecord>) => string> = { current: renderCurrent, history: renderHistory }

/** The document with each generated part replaced; the hand-written rest as it was. */
export const rewriteDocument = (document: string, records: ReadonlyArray<BenchRecord>): string =>
  sections.reduce((text, section) => {
    const [start, end] = [startMarker(section), endMarker(section)]
    const from = text.indexOf(start)
    const to = text.indexOf(end)
    if (from === -1 || to < from) throw new Error(`docs/benchmarks.md has no "${start}" ... "${end}" part`)
    return `${text.slice(0, from + start.length)}\n\n${render[section](records)}\n${text.slice(to)}`
  }, document)

const main = () => {
  const document = fs.readFileSync(documentFile, "utf8")
  const rewritten = rewriteDocument(document, readRecords())
  if (process.argv.includes("--check")) {
    if (rewritten !== document) {
      process.stderr.write("docs/benchmarks.md is not what docs/benchmarks/results.jsonl gives: npm run -s bench:table\n")
      process.exit(1)
    }
    return
  }
  fs.writeFileSync(documentFile, rewritten)
  process.stdout.write(`docs/benchmarks.md: ${readRecords().length} records rendered\n`)
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main()
