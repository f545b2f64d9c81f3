/**
 * Reads span logs (packages/guardian/src/SpanLog.ts: `<process>-<pid>.spans`, one
 * tab-separated line per ended span) and sums up where the requests of one kind spend
 * their time: for each span name, per process, when it starts after its request began
 * and how long it lasts, over the traces that contain the chosen span.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { percentile } from "./stats.ts"

export interface SpanLine {
  readonly process: string
  readonly name: string
  readonly traceId: string
  readonly spanId: string
  readonly parentId: string
  readonly startNs: bigint
  readonly endNs: bigint
  readonly exit: string
}

/** The spans of every `*.spans` file in `directory`; a line that does not parse is skipped. */
export const readSpans = (directory: string): Array<SpanLine> =>
  fs.readdirSync(directory).filter((file) => file.endsWith(".spans")).flatMap((file) => {
    const process = file.slice(0, file.lastIndexOf("-"))
    return fs.readFileSync(path.join(directory, file), "utf8").split("\n").flatMap((line) => {
      const [name, traceId, spanId, parentId, start, end, exit] = line.split("\t")
      if (name === undefined || traceId === undefined || spanId === undefined || parentId === undefined || exit === undefined) return []
      if (start === undefined || end === undefined || !/^\d+$/.test(start) || !/^\d+$/.test(end)) return []
      return [{ process, name, traceId, spanId, parentId, startNs: BigInt(start), endNs: BigInt(end), exit }]
    })
  })

export interface StageRow {
  /** `<process> <span name>` */
  readonly stage: string
  /** How many such spans a trace has, on average. */
  readonly perTrace: number
  /** From the trace's first span's start to this span's start, p50 (ms). */
  readonly startP50Ms: number
  readonly durationP50Ms: number
  readonly durationP99Ms: number
}

const ms = (ns: bigint) => Number(ns) / 1e6

/**
 * One row per stage over the traces that contain a span named `anchor`, ordered by when the
 * stage starts; `traces` is how many there were.
 */
export const stages = (spans: ReadonlyArray<SpanLine>, anchor: string): { readonly traces: number; readonly rows: Array<StageRow> } => {
  const byTrace = new Map<string, Array<SpanLine>>()
  for (const span of spans) {
    const trace = byTrace.get(span.traceId)
    if (trace === undefined) byTrace.set(span.traceId, [span])
    else trace.push(span)
  }
  const chosen = [...byTrace.values()].filter((trace) => trace.some((span) => span.name === anchor))
  const byStage = new Map<string, { starts: Array<number>; durations: Array<number> }>()
  for (const trace of chosen) {
    const origin = trace.reduce((first, span) => (span.startNs < first ? span.startNs : first), trace[0]!.startNs)
    for (const span of trace) {
      const stage = `${span.process} ${span.name}`
      const row = byStage.get(stage) ?? { starts: [], durations: [] }
      row.starts.push(ms(span.startNs - origin))
      row.durations.push(ms(span.endNs - span.startNs))
      byStage.set(stage, row)
    }
  }
  const rows = [...byStage.entries()].map(([stage, { durations, starts }]) => ({
    stage,
    perTrace: starts.length / chosen.length,
    startP50Ms: percentile(starts, 0.5),
    durationP50Ms: percentile(durations, 0.5),
    durationP99Ms: percentile(durations, 0.99)
  }))
  rows.sort((a, b) => a.startP50Ms - b.startP50Ms || b.durationP50Ms - a.durationP50Ms)
  return { traces: chosen.length, rows }
}

/** The rows as a Markdown table. */
export const table = (rows: ReadonlyArray<StageRow>): string => {
  const f = (value: number) => value.toFixed(value < 10 ? 2 : 1)
  return [
    "| stage (process, span) | per request | starts at p50 ms | lasts p50 / p99 ms |",
    "|---|---:|---:|---:|",
    ...rows.map((row) => `| ${row.stage} | ${row.perTrace.toFixed(2)} | ${f(row.startP50Ms)} | ${f(row.durationP50Ms)} / ${f(row.durationP99Ms)} |`)
  ].join("\n")
}
