/**
 * The per-key lane (src/KeyedLanes.ts): an actor's turns drain the items queued while the key was
 * busy, in arrival order, into one turn each answered on its own; what runs alone runs by itself;
 * and work starts in arrival order, so that work running alone is never overtaken by items that
 * arrive after it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, type Scope } from "effect"
import * as KeyedLanes from "../src/KeyedLanes.ts"

/** Lets every runnable fiber go as far as it can. */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 50; i++) yield* Effect.yieldNow
})

/**
 * A turn runner that records each turn's items, waits for `release` of its turn (by number), and
 * answers each item with its label, or fails the ones named "bad".
 */
const recorder = () => {
  const turns: Array<ReadonlyArray<string>> = []
  const releases: Array<Deferred.Deferred<void>> = []
  const release = (turn: number) =>
    Effect.gen(function*() {
      while (releases.length <= turn) yield* settle
      yield* Deferred.succeed(releases[turn]!, undefined)
    })
  const run = (_key: string, items: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      turns.push(items)
      const gate = yield* Deferred.make<void>()
      releases.push(gate)
      yield* Deferred.await(gate)
      return items.map((item) => (item === "bad" ? Exit.fail(`refused ${item}`) : Exit.succeed(`done ${item}`)))
    })
  return { turns, release, run }
}

/** Runs a test with lanes closed when it ends. */
const scoped = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>) => Effect.scoped(effect)

describe("KeyedLanes", () => {
  it.effect("drains the items that arrive while a turn runs into the next turn, in arrival order, each answered on its own", () =>
    scoped(Effect.gen(function*() {
      const lanes = yield* KeyedLanes.make
      const actor = recorder()
      const submit = lanes.turns(actor.run, 3)
      const first = yield* Effect.forkChild(submit("acct_1", "a"))
      yield* settle
      assert.deepStrictEqual(actor.turns, [["a"]])
      // While turn 0 runs: five more arrive; a turn takes three at most.
      const rest = yield* Effect.forEach(["b", "bad", "c", "d", "e"], (item) => Effect.forkChild(Effect.exit(submit("acct_1", item))))
      // Another key's turn runs beside it.
      const other = yield* Effect.forkChild(submit("acct_2", "x"))
      yield* settle
      assert.deepStrictEqual(actor.turns, [["a"], ["x"]])
      yield* actor.release(1)
      assert.strictEqual(yield* Fiber.join(other), "done x")
      yield* actor.release(0)
      assert.strictEqual(yield* Fiber.join(first), "done a")
      yield* actor.release(2)
      yield* actor.release(3)
      const exits = yield* Fiber.joinAll(rest)
      assert.deepStrictEqual(actor.turns, [["a"], ["x"], ["b", "bad", "c"], ["d", "e"]])
      assert.deepStrictEqual(exits, [
        Exit.succeed("done b"),
        Exit.fail("refused bad"),
        Exit.succeed("done c"),
        Exit.succeed("done d"),
        Exit.succeed("done e")
      ])
    })))

  it.effect("runs alone work by itself; an item that arrives after it joins no turn queued before it", () =>
    scoped(Effect.gen(function*() {
      const lanes = yield* KeyedLanes.make
      const actor = recorder()
      const submit = lanes.turns(actor.run, 64)
      const events: Array<string> = []
      const a = yield* Effect.forkChild(submit("acct_1", "a"))
      yield* settle
      const b = yield* Effect.forkChild(submit("acct_1", "b"))
      yield* settle
      const aloneDone = yield* Deferred.make<void>()
      const alone = yield* Effect.forkChild(lanes.alone("acct_1", Effect.sync(() => events.push(`alone after ${actor.turns.length} turns`)).pipe(
        Effect.andThen(Deferred.await(aloneDone))
      )))
      yield* settle
      // Arrives after the alone work: a turn of its own after it, not b's (queued before it).
      const c = yield* Effect.forkChild(submit("acct_1", "c"))
      yield* settle
      yield* actor.release(0)
      assert.strictEqual(yield* Fiber.join(a), "done a")
      yield* actor.release(1)
      assert.strictEqual(yield* Fiber.join(b), "done b")
      yield* settle
      assert.deepStrictEqual(events, ["alone after 2 turns"])
      assert.deepStrictEqual(actor.turns, [["a"], ["b"]], "c waits behind the alone work")
      yield* Deferred.succeed(aloneDone, undefined)
      yield* Fiber.join(alone)
      yield* actor.release(2)
      assert.strictEqual(yield* Fiber.join(c), "done c")
      assert.deepStrictEqual(actor.turns, [["a"], ["b"], ["c"]])
    })))

  it.effect("a caller that hangs up while its turn waits leaves it; once its turn has started, it waits for its outcome", () =>
    scoped(Effect.gen(function*() {
      const lanes = yield* KeyedLanes.make
      const actor = recorder()
      const submit = lanes.turns(actor.run, 64)
      const a = yield* Effect.forkChild(submit("acct_1", "a"))
      yield* settle
      const gone = yield* Effect.forkChild(submit("acct_1", "gone"))
      const kept = yield* Effect.forkChild(submit("acct_1", "kept"))
      yield* settle
      yield* Fiber.interrupt(gone)
      yield* actor.release(0)
      yield* Fiber.join(a)
      // Turn 1 started without the item whose caller left.
      yield* settle
      assert.deepStrictEqual(actor.turns, [["a"], ["kept"]])
      // Its caller hangs up now: the turn has started, so the interruption waits for the outcome.
      const interrupted = yield* Effect.forkChild(Fiber.interrupt(kept))
      yield* settle
      assert.isUndefined(kept.pollUnsafe(), "still waiting for its started turn")
      yield* actor.release(1)
      yield* Fiber.join(interrupted)
      // The turn ran to its end: the item's work was done, whatever its caller did.
      assert.deepStrictEqual(actor.turns, [["a"], ["kept"]])
    })))
})
