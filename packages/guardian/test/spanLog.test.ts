/**
 * The opt-in span log (SpanLog.ts): ended spans are written with their names, ids, parents
 * and times, never their attributes; without PPS_SPAN_LOG nothing is traced or written.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, References } from "effect"
import { SpanLog } from "../src/index.ts"

const canary = "canary-amount-4242.17"

/** Two nested spans, one failing, one carrying an attribute that must not be written. */
const traced = Effect.gen(function*() {
  yield* Effect.void.pipe(Effect.withSpan("inner", { attributes: { amount: canary } }))
  yield* Effect.exit(Effect.fail("refused").pipe(Effect.withSpan("refusal")))
}).pipe(Effect.withSpan("outer"))

const lines = (file: string) =>
  fs.readFileSync(file, "utf8").trim().split("\n").map((line) => {
    const [name, traceId, spanId, parentId, start, end, exit] = line.split("\t")
    return { name, traceId, spanId, parentId, start: BigInt(start!), end: BigInt(end!), exit }
  })

describe("span log", () => {
  it.effect("writes every ended span's name, trace, parent, times and exit, and no attribute", () =>
    Effect.gen(function*() {
      const directory = fs.mkdtempSync(path.join(os.tmpdir(), "pps-spanlog-"))
      const file = path.join(directory, "test-1.spans")
      const { flush, tracer } = SpanLog.fileTracer(file)
      yield* traced.pipe(Effect.withTracer(tracer), Effect.provideService(References.TracerEnabled, true))
      flush()
      const written = lines(file)
      assert.deepStrictEqual(written.map((span) => span.name).sort(), ["inner", "outer", "refusal"])
      const byName = Object.fromEntries(written.map((span) => [span.name, span]))
      const outer = byName["outer"]!
      assert.strictEqual(outer.parentId, "")
      for (const child of [byName["inner"]!, byName["refusal"]!]) {
        assert.strictEqual(child.traceId, outer.traceId)
        assert.strictEqual(child.parentId, outer.spanId)
        assert.isTrue(child.start >= outer.start && child.end <= outer.end)
      }
      assert.strictEqual(byName["refusal"]!.exit, "Failure")
      assert.strictEqual(outer.exit, "Success")
      assert.notInclude(fs.readFileSync(file, "utf8"), canary)
      assert.strictEqual(fs.statSync(file).mode & 0o777, 0o600)
      fs.rmSync(directory, { recursive: true, force: true })
    }))

  it.effect("a stage builds no span without a span log, even with tracing on", () =>
    Effect.gen(function*() {
      // These tests run without PPS_SPAN_LOG, as every process does unless a measurement asks.
      assert.isFalse(SpanLog.enabled)
      const directory = fs.mkdtempSync(path.join(os.tmpdir(), "pps-spanlog-"))
      const file = path.join(directory, "test-2.spans")
      const { flush, tracer } = SpanLog.fileTracer(file)
      yield* Effect.void.pipe(SpanLog.stage("a stage"), Effect.withSpan("around"), Effect.withTracer(tracer), Effect.provideService(References.TracerEnabled, true))
      flush()
      assert.deepStrictEqual(lines(file).map((span) => span.name), ["around"])
      fs.rmSync(directory, { recursive: true, force: true })
    }))

  it.live("fromEnvironment writes under the process's name with PPS_SPAN_LOG, and traces nothing without it", () =>
    Effect.gen(function*() {
      const directory = fs.mkdtempSync(path.join(os.tmpdir(), "pps-spanlog-"))
      const before = process.env[SpanLog.variable]
      try {
        delete process.env[SpanLog.variable]
        const off = yield* Effect.currentSpan.pipe(Effect.withSpan("off"), SpanLog.fromEnvironment("test"), Effect.result)
        // Tracing off: Effect hands out a span that is not sampled (nothing would export it).
        assert.isTrue(off._tag === "Success" && off.success.name === "off" && off.success.sampled === false)
        process.env[SpanLog.variable] = directory
        yield* traced.pipe(SpanLog.fromEnvironment("test"))
        // Written by the log's timer (every 250 ms) or at exit.
        yield* Effect.sleep("600 millis")
        const file = path.join(directory, `test-${process.pid}.spans`)
        assert.deepStrictEqual(lines(file).map((span) => span.name).sort(), ["inner", "outer", "refusal"])
      } finally {
        if (before === undefined) delete process.env[SpanLog.variable]
        else process.env[SpanLog.variable] = before
        fs.rmSync(directory, { recursive: true, force: true })
      }
    }))
})
