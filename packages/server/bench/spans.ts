/**
 * `npm run -s bench:spans -- <dir> [--anchor Transfers.create] [--min-per-request 0.05]`:
 * where a kind of request spends its time, from the span logs a run with
 * `PPS_SPAN_LOG=<dir>` wrote (`bench:throughput -- --span-log <dir>`). See spanSummary.ts.
 * The shown stages' durations are appended to docs/benchmarks/results.jsonl
 * (scripts/benchRecord.ts) unless `--no-record`: tracing costs CPU, so they say where a request's
 * time goes, not how fast the service is.
 */
import { parseArgs } from "node:util"
import { readSpans, stages, table } from "./spanSummary.ts"
import { recordOption, recordResults } from "../../../scripts/benchRecord.ts"

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    anchor: { type: "string", default: "Transfers.create" },
    "min-per-request": { type: "string", default: "0.05" },
    ...recordOption
  }
})
const directory = positionals[0]
if (directory === undefined) {
  process.stderr.write("usage: npm run -s bench:spans -- <dir> [--anchor Transfers.create] [--min-per-request 0.05]\n")
  process.exit(2)
}
const { rows, traces } = stages(readSpans(directory), values.anchor)
const shown = rows.filter((row) => row.perTrace >= Number(values["min-per-request"]))
process.stdout.write(`${traces} requests with a \`${values.anchor}\` span; times from each request's first span\n\n${table(shown)}\n`)
recordResults("spans", [
  { metric: `requests with a ${values.anchor} span`, value: traces, unit: "requests" },
  ...shown.flatMap((row) => [
    { metric: `${row.stage}: lasts p50`, value: row.durationP50Ms, unit: "ms", headline: row.stage.endsWith(` ${values.anchor}`) },
    { metric: `${row.stage}: lasts p99`, value: row.durationP99Ms, unit: "ms", headline: row.stage.endsWith(` ${values.anchor}`) }
  ])
])
