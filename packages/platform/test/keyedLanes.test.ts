/**
 * The per-key lane (src/KeyedLanes.ts): a key's work runs alone, in arrival order; different keys
 * in parallel; an interrupted wait runs nothing and a failed work frees the lane.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import * as KeyedLanes from "../src/KeyedLanes.ts"

/** Lets every runnable fiber go as far as it can. */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 50; i++) yield* Effect.yieldNow
})

/** A work that says it started, then runs until released. */
const work = (label: string, started: Array<string>, running: { now: number; most: number }, release: Deferred.Deferred<void>) =>
  Effect.gen(function*() {
    started.push(label)
    running.now++
    running.most = Math.max(running.most, running.now)
    yield* Deferred.await(release)
    running.now--
  })

describe("KeyedLanes", () => {
  it.effect("runs a key's work one at a time in arrival order, and other keys beside it", () =>
    Effect.scoped(Effect.gen(function*() {
      const lanes = yield* KeyedLanes.make
      const started: Array<string> = []
      const running = { now: 0, most: 0 }
      const releases = yield* Effect.forEach([0, 1, 2], () => Deferred.make<void>())
      const fibers = yield* Effect.forEach(releases, (release, i) => Effect.forkChild(lanes.alone("acct_1", work(`a${i}`, started, running, release))))
      const otherRelease = yield* Deferred.make<void>()
      const other = yield* Effect.forkChild(lanes.alone("acct_2", work("b0", started, { now: 0, most: 0 }, otherRelease)))
      yield* settle
      assert.deepStrictEqual(started, ["a0", "b0"])
      for (const [i, release] of releases.entries()) {
        yield* settle
        assert.deepStrictEqual(started.filter((label) => label.startsWith("a")), Array.from({ length: i + 1 }, (_, k) => `a${k}`))
        yield* Deferred.succeed(release, undefined)
      }
      yield* Deferred.succeed(otherRelease, undefined)
      yield* Fiber.joinAll([...fibers, other])
      assert.strictEqual(running.most, 1)
    })))

  it.effect("an interrupted wait runs nothing, and a failed work frees the lane", () =>
    Effect.scoped(Effect.gen(function*() {
      const lanes = yield* KeyedLanes.make
      const started: Array<string> = []
      const release = yield* Deferred.make<void>()
      const first = yield* Effect.forkChild(lanes.alone("acct_1", work("first", started, { now: 0, most: 0 }, release)))
      yield* settle
      const waiting = yield* Effect.forkChild(lanes.alone("acct_1", Effect.sync(() => started.push("interrupted"))))
      yield* settle
      yield* Fiber.interrupt(waiting)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(first)
      assert.strictEqual(yield* lanes.alone("acct_1", Effect.fail("no")).pipe(Effect.flip), "no")
      assert.strictEqual(yield* lanes.alone("acct_1", Effect.succeed("after")), "after")
      assert.deepStrictEqual(started, ["first"])
    })))
})
