/**
 * `npm run -s bench:spans -- <dir> [--anchor Transfers.create] [--min-per-request 0.05]`:
 * where a kind of request spends its time, from the span logs a run with
 * `PPS_SPAN_LOG=<dir>` wrote (`bench:throughput -- --span-log <dir>`). See spanSummary.ts.
 * The shown stages' durations are appended to docs/benchmarks/results.jsonl
 * (scripts/benchRecord.ts) unless `--no-record`: tracing costs CPU, so they say where a request's
 * time goes, not how fast the service is.
 *
 * `npm run -s bench:spans -- --cost [--requests 20000]`: what a span costs to record and to
 * export over OTLP, and what a create's metric updates cost, in this process (spanCost.ts),
 * recorded as the `tracing` benchmark.
 */
import { parseArgs } from "node:util"
import { measureMetricCost, measureSpanCost, spansPerRequest } from "./spanCost.ts"
import { readSpans, stages, table } from "./spanSummary.ts"
import { recordOption, recordResults } from "../../../scripts/benchRecord.ts"

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    anchor: { type: "string", default: "Transfers.create" },
    "min-per-request": { type: "string", default: "0.05" },
    cost: { type: "boolean", default: false },
    requests: { type: "string", default: "20000" },
    ...recordOption
  }
})

const cost = async () => {
  const requests = Number(values.requests)
  const cpuMs = await measureSpanCost(requests)
  const spans = requests * spansPerRequest
  const usPerSpan = (name: string) => (((cpuMs[name] ?? Number.NaN) - (cpuMs["off"] ?? Number.NaN)) * 1000) / spans
  const rows = ["dropped", "otlp protobuf", "otlp json"].map((name) => ({ name, usPerSpan: usPerSpan(name) }))
  const metricsUs = await measureMetricCost(requests * 10)
  process.stdout.write([
    `${requests} request-shaped trees of ${spansPerRequest} spans each; CPU ms of this process, the lower of two rounds:`,
    ...Object.entries(cpuMs).map(([name, ms]) => `  ${name}: ${ms.toFixed(0)} ms`),
    "",
    "| spans | CPU µs per span over recording off | per tree of " + spansPerRequest + " spans (ms) |",
    "|---|---:|---:|",
    ...rows.map((row) => `| ${row.name} | ${row.usPerSpan.toFixed(2)} | ${((row.usPerSpan * spansPerRequest) / 1000).toFixed(3)} |`),
    "",
    `metrics a create updates (its request's counter and histogram, two guardian calls timed, four stages): ${metricsUs.toFixed(2)} µs a create`,
    ""
  ].join("\n"))
  recordResults("tracing", rows.flatMap((row) => [
    { metric: `CPU per span, ${row.name} (over recording off)`, value: row.usPerSpan, unit: "µs", headline: row.name === "otlp protobuf" },
    { metric: `CPU per ${spansPerRequest}-span request tree, ${row.name}`, value: (row.usPerSpan * spansPerRequest) / 1000, unit: "ms" }
  ]).concat([{ metric: "CPU per create of the metrics it updates (always on)", value: metricsUs, unit: "µs", headline: true }]))
}

const summary = () => {
  const directory = positionals[0]
  if (directory === undefined) {
    process.stderr.write("usage: npm run -s bench:spans -- <dir> [--anchor Transfers.create] [--min-per-request 0.05] | --cost [--requests 20000]\n")
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
}

if (values.cost) await cost()
else summary()
