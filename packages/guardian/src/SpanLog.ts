/**
 * An opt-in record of where a request's time goes: with `PPS_SPAN_LOG` set to a directory,
 * the process traces (Effect's spans, off otherwise: tracing costs throughput, docs/benchmarks.md) and
 * appends every ended span to `<dir>/<process>-<pid>.spans`, one tab-separated line:
 * name, trace id, span id, parent span id, start and end (Unix epoch, nanoseconds), exit.
 * The api server and the guardian share trace ids (the RPC carries them), so one request's
 * stages are joined across the two processes (`packages/server/bench/spans.ts`).
 *
 * Only names, ids and times are written: never a span's attributes, which may carry a
 * request's fields. Lines are buffered and written every `flushEveryMs`, and at exit.
 *
 * For measurements, not for operations: it costs what tracing costs (about 5 % of CPU).
 *
 * @since 0.8.0
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, type Exit, Option, References, Tracer } from "effect"

/** The environment variable naming the directory; unset, tracing stays off. */
export const variable = "PPS_SPAN_LOG"

const flushEveryMs = 250

/** One ended span as a line of the log. */
const lineOf = (span: Tracer.NativeSpan, endTime: bigint, exit: string): string => {
  const parent = Option.match(span.parent, { onNone: () => "", onSome: (p) => p.spanId })
  return `${span.name}\t${span.traceId}\t${span.spanId}\t${parent}\t${span.startTime}\t${endTime}\t${exit}\n`
}

/**
 * A tracer that writes ended spans to `file` (created with mode 0600), and the function
 * that writes what is buffered. Spans are Effect's own (ids, parents, sampling), only
 * their end is recorded.
 */
export const fileTracer = (file: string): { readonly tracer: Tracer.Tracer; readonly flush: () => void } => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  const fd = fs.openSync(file, "a", 0o600)
  let buffered: Array<string> = []
  const flush = () => {
    if (buffered.length === 0) return
    const text = buffered.join("")
    buffered = []
    fs.writeSync(fd, text)
  }
  const timer = setInterval(flush, flushEveryMs)
  timer.unref()
  process.once("exit", flush)
  class LoggedSpan extends Tracer.NativeSpan {
    override end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
      if (this.status._tag === "Ended") return
      super.end(endTime, exit)
      buffered.push(lineOf(this, endTime, exit._tag))
    }
  }
  const tracer = Tracer.make({ span: (options) => new LoggedSpan(options) })
  return { tracer, flush }
}

/** Whether this process writes a span log: `PPS_SPAN_LOG` set when it started. */
export const enabled = (process.env[variable] ?? "") !== ""

/**
 * A span only a span log reads: a named stage of a hot path (a transfer's record, its
 * signature). Without the log it is not built at all: even with tracing off, a span costs
 * its stack trace, a no-op span and a context per call, which the transfer path measurably
 * paid for (docs/benchmarks.md).
 *
 * @since 0.8.0
 * @category combinators
 */
export const stage = (name: string) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  enabled ? Effect.withSpan(self, name) : self

/**
 * Runs `self` with tracing off, or, when `PPS_SPAN_LOG` names a directory, with spans
 * written there under `processName`.
 *
 * @since 0.8.0
 * @category combinators
 */
export const fromEnvironment = (processName: string) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
  const directory = process.env[variable]
  if (directory === undefined || directory === "") return Effect.provideService(self, References.TracerEnabled, false)
  const { tracer } = fileTracer(path.join(directory, `${processName}-${process.pid}.spans`))
  return self.pipe(Effect.withTracer(tracer), Effect.provideService(References.TracerEnabled, true))
}
