/**
 * The attempt-result writer's disk waits (D72): a write waits for the disk when the writer goes
 * idle, and under a backlog that never lets it go idle, at least once a second, so a crash of
 * the embedded database (no WAL writer) sends again at most about a second of deliveries. The
 * store here answers at once and only notes each write's `waitForDisk`: this is the writer's
 * batching rule, not the database (the store's own test is commitDurability.test.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { recordBatchMax } from "../src/webhooks/dispatch/DispatchContext.ts"
import { makeAttemptRecorder } from "../src/webhooks/dispatch/recordAttempts.ts"
import type { AttemptRecord, WebhookStore } from "../src/webhooks/WebhookStore.ts"

const attempt = (index: number): AttemptRecord => ({
  deliveryId: `del_${index}`,
  attemptNumber: 1,
  nodeId: "node",
  startedAt: new Date(0).toISOString(),
  durationMs: 1,
  statusCode: 200,
  error: undefined,
  status: "succeeded",
  webhookId: "wh",
  leaseUntil: new Date(0).toISOString()
})

interface Write {
  readonly atMs: number
  readonly waitForDisk: boolean
  readonly size: number
}

/** A store that notes each write's size and whether it was asked to wait for the disk. */
const notingStore = (writes: Array<Write>) =>
  ({
    recordAttempts: (attempts: ReadonlyArray<AttemptRecord>, waitForDisk = true) =>
      Effect.sync(() => {
        writes.push({ atMs: performance.now(), waitForDisk, size: attempts.length })
        return attempts.map(() => ({ recorded: true, leaseHeld: true }))
      })
  }) as unknown as WebhookStore["Service"]

describe("webhook attempt writer (D72)", () => {
  it.live("waits for the disk when idle, and at least once a second under a backlog that never lets it idle", () =>
    Effect.gen(function*() {
      const writes: Array<Write> = []
      const recorder = yield* makeAttemptRecorder(notingStore(writes))
      // One request always in flight for 2.5 s, a result queued every 2 ms: never idle.
      const stop = yield* Deferred.make<void>()
      const inFlight = yield* Effect.forkChild(recorder.sending(Deferred.await(stop)))
      const startedMs = performance.now()
      let index = 0
      while (performance.now() - startedMs < 2_500) {
        yield* recorder.record(attempt(index++))
        yield* Effect.sleep("2 millis")
      }
      const busyWrites = writes.length
      yield* Deferred.succeed(stop, undefined)
      yield* Fiber.join(inFlight)
      const last = yield* Deferred.await(yield* recorder.record(attempt(index)))
      assert.isTrue(last.recorded)
      const busy = writes.slice(0, busyWrites)
      const waited = busy.filter((write) => write.waitForDisk)
      assert.isAbove(busy.length, 20, "the backlog made many writes")
      assert.isAtLeast(waited.length, 2, "a write waited for the disk at least once a second")
      assert.isBelow(waited.length, busy.length / 4, "most busy writes did not wait")
      assert.isTrue(writes.at(-1)!.waitForDisk, "the write before going idle waited")
    }).pipe(Effect.scoped), 20_000)

  // The linger made an hour long: only what ends it early can get a result written (the test
  // would time out otherwise).
  it.live("ends its linger when a batch is full, when a sender hurries it, or when the last request ends", () =>
    Effect.gen(function*() {
      const writes: Array<Write> = []
      const recorder = yield* makeAttemptRecorder(notingStore(writes), 3_600_000)
      const stop = yield* Deferred.make<void>()
      const started = yield* Deferred.make<void>()
      const inFlight = yield* Effect.forkChild(recorder.sending(Deferred.succeed(started, undefined).pipe(Effect.andThen(Deferred.await(stop)))))
      yield* Deferred.await(started)
      // Results arrive one by one while a request is in flight: written once a batch is full.
      const first = yield* recorder.record(attempt(0))
      yield* Effect.sleep("5 millis")
      for (let index = 1; index < recordBatchMax; index++) yield* recorder.record(attempt(index))
      assert.isTrue((yield* Deferred.await(first)).recorded)
      assert.strictEqual(writes.reduce((sum, write) => sum + write.size, 0), recordBatchMax)
      // One result, a request still in flight: written as soon as a sender hurries.
      const lone = yield* recorder.record(attempt(recordBatchMax))
      yield* Effect.sleep("5 millis")
      recorder.hurry()
      assert.isTrue((yield* Deferred.await(lone)).recorded)
      assert.strictEqual(writes.at(-1)!.size, 1)
      // One result, a request still in flight, no hurry: written as soon as that request ends.
      const last = yield* recorder.record(attempt(recordBatchMax + 1))
      yield* Effect.sleep("5 millis")
      assert.isFalse(yield* Deferred.isDone(last), "lingering while the request is in flight")
      yield* Deferred.succeed(stop, undefined)
      yield* Fiber.join(inFlight)
      assert.isTrue((yield* Deferred.await(last)).recorded)
    }).pipe(Effect.scoped), 20_000)
})
