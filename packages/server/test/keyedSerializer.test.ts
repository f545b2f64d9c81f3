/**
 * The per-account actor (platform/KeyedSerializer.ts): one piece of work per key at a time, in
 * arrival order; `withKeyUntilReleased` lets the key's next work in once the first releases it,
 * while the first goes on.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { KeyedSerializer } from "../src/platform/KeyedSerializer.ts"

const run = <A, E>(effect: Effect.Effect<A, E, KeyedSerializer>) => effect.pipe(Effect.provide(KeyedSerializer.layer))

describe("keyed serializer", () => {
  it.effect("a released key lets the next work start while the first goes on; unreleased, it waits", () =>
    run(Effect.gen(function*() {
      const actors = yield* KeyedSerializer
      const log: Array<string> = []
      const firstMayEnd = yield* Deferred.make<void>()
      const first = yield* Effect.forkChild(actors.withKeyUntilReleased("acct", (release) =>
        Effect.gen(function*() {
          log.push("first decided")
          yield* release
          yield* release // a second release gives nothing back twice
          yield* Deferred.await(firstMayEnd)
          log.push("first recorded")
        })))
      yield* Effect.yieldNow
      const secondMayEnd = yield* Deferred.make<void>()
      const second = yield* Effect.forkChild(actors.withKey("acct", Effect.gen(function*() {
        log.push("second decided")
        yield* Deferred.await(secondMayEnd)
      })))
      const third = yield* Effect.forkChild(actors.withKey("acct", Effect.sync(() => log.push("third decided"))))
      yield* Effect.yieldNow
      yield* Effect.yieldNow
      // One permit only: the double release did not let the third in beside the second.
      assert.deepStrictEqual(log, ["first decided", "second decided"])
      yield* Deferred.succeed(secondMayEnd, undefined)
      yield* Fiber.join(second)
      yield* Fiber.join(third)
      assert.deepStrictEqual(log, ["first decided", "second decided", "third decided"])
      yield* Deferred.succeed(firstMayEnd, undefined)
      yield* Fiber.join(first)
      assert.deepStrictEqual(log.at(-1), "first recorded")

      // Never released: the key is held to the end of the work, as `withKey` holds it.
      const holderMayEnd = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(actors.withKeyUntilReleased("acct", () =>
        Deferred.await(holderMayEnd).pipe(Effect.andThen(Effect.sync(() => log.push("holder done"))))))
      yield* Effect.yieldNow
      const waiter = yield* Effect.forkChild(actors.withKey("acct", Effect.sync(() => log.push("waiter ran"))))
      yield* Effect.yieldNow
      assert.notInclude(log, "waiter ran")
      yield* Deferred.succeed(holderMayEnd, undefined)
      yield* Fiber.join(holder)
      yield* Fiber.join(waiter)
      assert.deepStrictEqual(log.slice(-2), ["holder done", "waiter ran"])
    })))

  it.effect("work interrupted while it waits for the key never runs, and leaves the key free", () =>
    run(Effect.gen(function*() {
      const actors = yield* KeyedSerializer
      const holderMayEnd = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(actors.withKey("acct", Deferred.await(holderMayEnd)))
      yield* Effect.yieldNow
      let ran = false
      const waiting = yield* Effect.forkChild(actors.withKeyUntilReleased("acct", () => Effect.sync(() => (ran = true))))
      yield* Effect.yieldNow
      yield* Fiber.interrupt(waiting)
      yield* Deferred.succeed(holderMayEnd, undefined)
      yield* Fiber.join(holder)
      assert.isFalse(ran)
      // The key is free: the next work runs at once.
      assert.strictEqual(yield* actors.withKeyUntilReleased("acct", () => Effect.succeed("next")), "next")
    })))
})
