/**
 * Reads statement logs (packages/guardian/src/StatementLog.ts: `<process>-<pid>.statements`, the
 * totals so far as `StatementLog.Row`s) and turns two readings, taken before and after a measured
 * window, into what each process's embedded database did per transfer in it: calls, milliseconds
 * inside PGlite and the calls that prepared their text, in all and by statement.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type { StatementLog } from "@pps/guardian"

/** One statement text's totals: calls, milliseconds inside PGlite, and the calls that prepared it. */
export interface StatementTotal {
  readonly calls: number
  readonly ms: number
  readonly prepares: number
}

/** One process's totals by statement text. */
export type StatementTotals = ReadonlyMap<string, StatementTotal>

/** The totals of every `*.statements` file in `directory`, by process name (the file name before its pid). */
export const readStatements = (directory: string): Map<string, StatementTotals> => {
  const byProcess = new Map<string, StatementTotals>()
  if (!fs.existsSync(directory)) return byProcess
  for (const file of fs.readdirSync(directory).filter((name) => name.endsWith(".statements"))) {
    const rows: unknown = JSON.parse(fs.readFileSync(path.join(directory, file), "utf8"))
    const totals = new Map<string, StatementTotal>()
    if (Array.isArray(rows)) {
      for (const row of rows) {
        if (Array.isArray(row) && typeof row[0] === "string" && typeof row[1] === "number" && typeof row[2] === "number") {
          // A log written before prepares were counted has three fields.
          totals.set(row[0], { calls: row[1], ms: row[2], prepares: typeof row[3] === "number" ? row[3] : 0 })
        }
      }
    }
    byProcess.set(file.slice(0, file.lastIndexOf("-")), totals)
  }
  return byProcess
}

/** One process's totals from a snapshot in the log file's form (`StatementLog.snapshot()`). */
export const totalsOf = (rows: ReadonlyArray<StatementLog.Row>): StatementTotals =>
  new Map(rows.map(([text, calls, ms, prepares]) => [text, { calls, ms, prepares }]))

export interface StatementRow {
  readonly process: string
  readonly text: string
  readonly callsPerTransfer: number
  readonly msPerTransfer: number
  /** The calls that prepared the text (its first run, or one after the statement was closed or forgotten). */
  readonly preparesPerTransfer: number
}

/** What ran between two readings, per transfer, dearest first; one row per process and text. */
export const perTransfer = (
  before: ReadonlyMap<string, StatementTotals>,
  after: ReadonlyMap<string, StatementTotals>,
  transfers: number
): Array<StatementRow> =>
  [...after].flatMap(([process, totals]) =>
    [...totals].flatMap(([text, { calls, ms, prepares }]) => {
      const earlier = before.get(process)?.get(text)
      const addedCalls = calls - (earlier?.calls ?? 0)
      return addedCalls > 0
        ? [{
          process,
          text,
          callsPerTransfer: addedCalls / transfers,
          msPerTransfer: (ms - (earlier?.ms ?? 0)) / transfers,
          preparesPerTransfer: (prepares - (earlier?.prepares ?? 0)) / transfers
        }]
        : []
    })
  ).sort((a, b) => b.msPerTransfer - a.msPerTransfer)

const shownLength = 90

/** A statement's text as the table shows it: its first 90 characters (a batch's sizes, whose texts differ only in their VALUES or IN lists, fall together). */
const shown = (text: string) => (text.length > shownLength ? `${text.slice(0, shownLength - 1)}…` : text)

/**
 * A markdown table: each process's totals, then its `top` dearest statements by shown text, per
 * `unit` (what `perTransfer` divided by: a transfer, or a webhook delivery), with the calls that
 * prepared their text and how many texts ran (a batch's sizes are a text each).
 */
export const statementTable = (rows: ReadonlyArray<StatementRow>, top = 8, unit = "transfer"): string => {
  const processes = [...new Set(rows.map((row) => row.process))].sort()
  const lines = [
    `| process | statement | calls a ${unit} | of them prepared | texts | ms in PGlite a ${unit} |`,
    "|---|---|---:|---:|---:|---:|"
  ]
  for (const process of processes) {
    const byText = new Map<string, { calls: number; prepares: number; texts: number; ms: number }>()
    for (const row of rows.filter((row) => row.process === process)) {
      const entry = byText.get(shown(row.text)) ?? { calls: 0, prepares: 0, texts: 0, ms: 0 }
      entry.calls += row.callsPerTransfer
      entry.prepares += row.preparesPerTransfer
      entry.texts += 1
      entry.ms += row.msPerTransfer
      byText.set(shown(row.text), entry)
    }
    const own = [...byText].sort((a, b) => b[1].ms - a[1].ms)
    const sum = (field: "calls" | "prepares" | "texts" | "ms") => own.reduce((total, [, row]) => total + row[field], 0)
    lines.push(
      `| ${process} | **all** | **${sum("calls").toFixed(2)}** | **${sum("prepares").toFixed(3)}** | **${sum("texts")}** | **${sum("ms").toFixed(3)}** |`
    )
    for (const [text, row] of own.slice(0, top)) {
      const cells = [row.calls.toFixed(3), row.prepares.toFixed(3), String(row.texts), row.ms.toFixed(3)]
      lines.push(`| ${process} | \`${text.replaceAll("|", "\\|")}\` | ${cells.join(" | ")} |`)
    }
  }
  return `${lines.join("\n")}\n`
}
