/**
 * The per-key lane (src/KeyedLanes.ts): how many of a key's works run at once, what runs alone,
 * and that work starts in arrival order, so that work running alone is never starved by a stream
 * of work running alongside.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, type Scope } from "effect"
import * as KeyedLanes from "../src/KeyedLanes.ts"

/** Places a key, as `SENDER_CONCURRENCY` sets them. */
const alongsideMax = 8

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

/** Runs a test with lanes of `alongsideMax` places a key, closed when it ends. */
const inTurns = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>) => Effect.scoped(effect)

describe("KeyedLanes", () => {
  it.effect("runs up to alongsideMax works of a key alongside each other, the rest after, in arrival order", () =>
    inTurns(Effect.gen(function*() {
      const turns = yield* KeyedLanes.make(alongsideMax)
      const started: Array<string> = []
      const running = { now: 0, most: 0 }
      const releases = yield* Effect.forEach(Array.from({ length: alongsideMax + 3 }), () => Deferred.make<void>())
      const fibers = yield* Effect.forEach(releases, (release, i) =>
        Effect.forkChild(turns.alongside("acct_1", work(`a${i}`, started, running, release))))
      yield* settle
      assert.strictEqual(running.now, alongsideMax)
      assert.deepStrictEqual(started, Array.from({ length: alongsideMax }, (_, i) => `a${i}`))
      // Another key is not held up by this one's.
      const other = yield* Deferred.make<void>()
      const otherFiber = yield* Effect.forkChild(turns.alongside("acct_2", work("b0", started, { now: 0, most: 0 }, other)))
      yield* settle
      assert.include(started, "b0")
      yield* Deferred.succeed(other, undefined)
      yield* Fiber.join(otherFiber)
      // A place given back goes to the first work waiting for one.
      yield* Deferred.succeed(releases[2]!, undefined)
      yield* settle
      assert.strictEqual(started.at(-1), `a${alongsideMax}`)
      for (const release of releases) yield* Deferred.succeed(release, undefined)
      yield* Fiber.joinAll(fibers)
      assert.strictEqual(running.most, alongsideMax)
      assert.strictEqual(started.length, alongsideMax + 4)
    })))

  it.effect("runs alone work by itself, after what arrived before it and before what arrived after it", () =>
    inTurns(Effect.gen(function*() {
      const turns = yield* KeyedLanes.make(alongsideMax)
      const started: Array<string> = []
      const running = { now: 0, most: 0 }
      const [first, second, alone, later] = yield* Effect.forEach([0, 1, 2, 3], () => Deferred.make<void>())
      const a = yield* Effect.forkChild(turns.alongside("acct_1", work("first", started, running, first!)))
      const b = yield* Effect.forkChild(turns.alongside("acct_1", work("second", started, running, second!)))
      yield* settle
      let aloneSaw = -1
      const c = yield* Effect.forkChild(turns.alone(
        "acct_1",
        Effect.gen(function*() {
          aloneSaw = running.now
          yield* work("alone", started, running, alone!)
        })
      ))
      yield* settle
      // A place is free, but the work that arrives now waits behind the one waiting to run alone.
      const d = yield* Effect.forkChild(turns.alongside("acct_1", work("later", started, running, later!)))
      yield* settle
      assert.deepStrictEqual(started, ["first", "second"])
      yield* Deferred.succeed(first!, undefined)
      yield* settle
      assert.deepStrictEqual(started, ["first", "second"], "it waits for every work of the key to end")
      yield* Deferred.succeed(second!, undefined)
      yield* settle
      assert.deepStrictEqual(started, ["first", "second", "alone"])
      assert.strictEqual(aloneSaw, 0)
      yield* Deferred.succeed(alone!, undefined)
      yield* settle
      assert.deepStrictEqual(started, ["first", "second", "alone", "later"])
      yield* Deferred.succeed(later!, undefined)
      yield* Fiber.joinAll([a, b, c, d])
    })))

  it.effect("with one place (SENDER_CONCURRENCY=1, the guardian's account lane), alongside work runs one at a time in arrival order", () =>
    Effect.scoped(Effect.gen(function*() {
      const turns = yield* KeyedLanes.make(1)
      const started: Array<string> = []
      const running = { now: 0, most: 0 }
      const releases = yield* Effect.forEach([0, 1, 2], () => Deferred.make<void>())
      const fibers = yield* Effect.forEach(releases, (release, i) =>
        Effect.forkChild(turns.alongside("acct_1", work(`a${i}`, started, running, release))))
      for (const [i, release] of releases.entries()) {
        yield* settle
        assert.deepStrictEqual(started, Array.from({ length: i + 1 }, (_, k) => `a${k}`))
        yield* Deferred.succeed(release, undefined)
      }
      yield* Fiber.joinAll(fibers)
      assert.strictEqual(running.most, 1)
    })))

  it.effect("an interrupted wait takes no place, and a failed work gives its place back", () =>
    inTurns(Effect.gen(function*() {
      const turns = yield* KeyedLanes.make(alongsideMax)
      const started: Array<string> = []
      const running = { now: 0, most: 0 }
      const releases = yield* Effect.forEach(Array.from({ length: alongsideMax }), () => Deferred.make<void>())
      const fibers = yield* Effect.forEach(releases, (release, i) =>
        Effect.forkChild(turns.alongside("acct_1", work(`a${i}`, started, running, release))))
      yield* settle
      const waiting = yield* Effect.forkChild(turns.alongside("acct_1", Effect.sync(() => started.push("interrupted"))))
      yield* settle
      yield* Fiber.interrupt(waiting)
      const failed = yield* turns.alongside("acct_2", Effect.fail("no")).pipe(Effect.flip)
      assert.strictEqual(failed, "no")
      for (const release of releases) yield* Deferred.succeed(release, undefined)
      yield* Fiber.joinAll(fibers)
      assert.notInclude(started, "interrupted")
      // Every place is free again: alongsideMax works run at once on both keys, and then one alone.
      for (const key of ["acct_1", "acct_2"]) {
        const more = yield* Effect.forEach(Array.from({ length: alongsideMax }), () => Deferred.make<void>())
        const counted = { now: 0, most: 0 }
        const moreFibers = yield* Effect.forEach(more, (release, i) =>
          Effect.forkChild(turns.alongside(key, work(`${key}-m${i}`, started, counted, release))))
        yield* settle
        assert.strictEqual(counted.now, alongsideMax, key)
        for (const release of more) yield* Deferred.succeed(release, undefined)
        yield* Fiber.joinAll(moreFibers)
        assert.strictEqual(yield* turns.alone(key, Effect.succeed("alone")), "alone")
      }
    })))
})
