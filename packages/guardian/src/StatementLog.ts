/**
 * An opt-in count of the embedded database's work, for throughput measurements: with
 * `PPS_STATEMENT_LOG` set to a directory, every statement a `PreparedStatementPGlite` runs is
 * counted by its text (whitespace folded), with the milliseconds spent inside PGlite's call
 * (its CPU: PGlite runs on the calling thread), and the totals so far are written to
 * `<dir>/<process>-<pid>.statements` (mode 0600) every second and at exit, as one JSON array of
 * `Row`s: `[text, calls, milliseconds, prepares]`, prepares being the calls that prepared the
 * text first (its first run, or a run after `PreparedStatementPGlite` closed it past its bound or
 * forgot it when it failed). `packages/server/bench/statementSummary.ts` turns two such
 * readings into statements and milliseconds per transfer (`bench:throughput --statement-log`).
 *
 * Statement texts hold placeholders, never values: every statement of the service is
 * parameterized (`statementLog.test.ts` runs one with a canary value and finds it only in the
 * parameters). Not counted: statements of a database on its own thread
 * (`EMBEDDED_DATABASE_THREAD=own`: the worker's module state is its own), and `exec` calls
 * (migrations, vacuums). The benchmarks' documents quoted such counts from a hook that was never
 * committed; this is that hook.
 *
 * @since 0.8.0
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"

/** The environment variable naming the directory; unset, nothing is counted. */
export const variable = "PPS_STATEMENT_LOG"

const writeEveryMs = 1_000

/**
 * One statement text's totals as the log file holds them: `[text, calls, milliseconds, prepares]`.
 *
 * @since 0.16.0
 * @category models
 */
export type Row = readonly [text: string, calls: number, ms: number, prepares: number]

/** Calls, milliseconds and prepares by statement text. */
type Totals = Map<string, { calls: number; ms: number; prepares: number }>

let totals: Totals | undefined

/**
 * The recorder `PreparedStatementPGlite` calls after each statement, or undefined when no log is
 * kept (the statement path then reads no clock).
 *
 * @since 0.8.0
 */
export const recorder = (): ((text: string, ms: number, prepared: boolean) => void) | undefined =>
  totals === undefined ? undefined : record

const record = (text: string, ms: number, prepared: boolean): void => {
  if (totals === undefined) return
  const key = text.replace(/\s+/g, " ").trim()
  const entry = totals.get(key)
  if (entry === undefined) totals.set(key, { calls: 1, ms, prepares: prepared ? 1 : 0 })
  else {
    entry.calls += 1
    entry.ms += ms
    if (prepared) entry.prepares += 1
  }
}

/** The totals so far, as the log file holds them. */
export const snapshot = (): Array<Row> =>
  totals === undefined ? [] : [...totals].map(([text, { calls, ms, prepares }]) => [text, calls, ms, prepares] as const)

/**
 * Starts counting into `file` (mode 0600), rewritten every second and at exit; returns the
 * function that writes it now.
 *
 * @since 0.8.0
 */
export const start = (file: string): (() => void) => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  totals ??= new Map()
  const write = () => {
    try {
      fs.writeFileSync(file, JSON.stringify(snapshot()), { mode: 0o600 })
    } catch {
      // A measurement's folder removed under it (or a full disk) must not stop the process:
      // the next write tries again, and the count goes on in memory.
    }
  }
  const timer = setInterval(write, writeEveryMs)
  timer.unref()
  process.once("exit", write)
  return write
}

/**
 * Counts this process's statements under `processName` when `PPS_STATEMENT_LOG` names a
 * directory; does nothing otherwise.
 *
 * @since 0.8.0
 * @category combinators
 */
export const fromEnvironment = (processName: string) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.suspend(() => {
    const directory = process.env[variable]
    if (directory !== undefined && directory !== "") start(path.join(directory, `${processName}-${process.pid}.statements`))
    return self
  })
