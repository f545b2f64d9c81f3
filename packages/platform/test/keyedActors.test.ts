/**
 * Per-key actors (src/KeyedActors.ts, D73): a key's mail is taken in turns, each turn all the mail
 * that waited for it, in arrival order; one turn at a time per key, keys in parallel; each mail
 * answered on its own; a caller that left before its turn is not handled.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Fiber } from "effect"
import * as KeyedActors from "../src/KeyedActors.ts"

/** Something a caller's context holds (as a request holds its idempotency key). */
const Caller = Context.Reference<string>("test/Caller", { defaultValue: () => "nobody" })

/** Lets every runnable fiber go as far as it can. */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 50; i++) yield* Effect.yieldNow
})

/** Turns that record what each took, and wait for `gate` (if set) before answering. */
const recorder = () => {
  const turns: Array<{ readonly key: string; readonly items: ReadonlyArray<number> }> = []
  const running = { now: 0, most: 0 }
  let gate: Deferred.Deferred<void> | undefined
  const turn: KeyedActors.Turn<number, number, string> = (key, items) =>
    Effect.gen(function*() {
      turns.push({ key, items })
      running.now++
      running.most = Math.max(running.most, running.now)
      if (gate !== undefined) yield* Deferred.await(gate)
      running.now--
      // Odd items fail, each on its own; 13 is a broken invariant of the whole turn.
      if (items.includes(13)) return yield* Effect.die(new Error("thirteen"))
      return items.map((item) => item % 2 === 1 ? Exit.fail(`odd ${item}`) : Exit.succeed(item * 10))
    })
  return { turns, running, turn, hold: () => (gate = Deferred.makeUnsafe<void>()), release: () => gate && Deferred.doneUnsafe(gate, Exit.void) }
}

describe("KeyedActors", () => {
  it.effect("takes the mail that waited in one turn, in arrival order, one turn at a time per key", () =>
    Effect.scoped(Effect.gen(function*() {
      const { hold, release, running, turn, turns } = recorder()
      const actors = yield* KeyedActors.make(turn, 3)
      hold()
      const first = yield* Effect.forkChild(actors.send("a", 0))
      yield* settle
      // While the first turn runs, five more arrive: the next turns take 3, then 2, in order.
      const later = yield* Effect.forEach([2, 4, 6, 8, 10], (item) => Effect.forkChild(actors.send("a", item)))
      const other = yield* Effect.forkChild(actors.send("b", 100))
      yield* settle
      assert.deepStrictEqual(turns, [{ key: "a", items: [0] }, { key: "b", items: [100] }])
      assert.strictEqual(running.now, 2)
      release()
      assert.strictEqual(yield* Fiber.join(first), 0)
      assert.deepStrictEqual(yield* Fiber.joinAll(later), [20, 40, 60, 80, 100])
      assert.strictEqual(yield* Fiber.join(other), 1000)
      assert.deepStrictEqual(turns.filter((t) => t.key === "a").map((t) => t.items), [[0], [2, 4, 6], [8, 10]])
    })))

  it.effect("answers each mail on its own; a turn that dies answers its mail with the defect and the actor goes on", () =>
    Effect.scoped(Effect.gen(function*() {
      const { hold, release, turn, turns } = recorder()
      const actors = yield* KeyedActors.make(turn, 8)
      hold()
      const blocker = yield* Effect.forkChild(actors.send("a", 0))
      yield* settle
      const fibers = yield* Effect.forEach([1, 2, 13], (item) => Effect.forkChild(Effect.exit(actors.send("a", item))))
      yield* settle
      release()
      yield* Fiber.join(blocker)
      const [one, two, thirteen] = yield* Fiber.joinAll(fibers)
      // 13 broke the turn it shared with 1 and 2: all three die.
      assert.isTrue(Exit.hasDies(one!) && Exit.hasDies(two!) && Exit.hasDies(thirteen!))
      assert.deepStrictEqual(yield* Effect.exit(actors.send("a", 3)), Exit.fail("odd 3"))
      assert.strictEqual(yield* actors.send("a", 4), 40)
      assert.deepStrictEqual(turns.map((t) => t.items), [[0], [1, 2, 13], [3], [4]])
    })))

  it.effect("a caller that stops waiting before its turn is not handled; one that stops during its turn waits for the turn to end", () =>
    Effect.scoped(Effect.gen(function*() {
      const { hold, release, turn, turns } = recorder()
      const actors = yield* KeyedActors.make(turn, 8)
      const gate = hold()
      const during = yield* Effect.forkChild(actors.send("a", 0))
      yield* settle
      const before = yield* Effect.forkChild(actors.send("a", 2))
      const after = yield* Effect.forkChild(actors.send("a", 4))
      yield* settle
      yield* Fiber.interrupt(before)
      // The interruption of a caller whose mail is taken ends only once its turn has answered.
      const interrupting = yield* Effect.forkChild(Fiber.interrupt(during))
      yield* settle
      assert.isUndefined(interrupting.pollUnsafe(), "the caller's interruption waits for its turn")
      release()
      yield* Fiber.join(interrupting)
      assert.isTrue(yield* Deferred.isDone(gate))
      assert.strictEqual(yield* Fiber.join(after), 40)
      assert.deepStrictEqual(turns.map((t) => t.items), [[0], [4]])
    })))

  it.effect("turns run in the actors' context, never in the caller's that started the actor", () =>
    Effect.scoped(Effect.gen(function*() {
      const actors = yield* KeyedActors.make<number, string, never>(
        (_, items) => Effect.map(Effect.service(Caller), (caller) => items.map(() => Exit.succeed(caller))),
        8
      )
      assert.strictEqual(yield* actors.send("a", 1).pipe(Effect.provideService(Caller, "the first caller")), "the actors'")
    }).pipe(Effect.provideService(Caller, "the actors'"))))

  it.effect("callers still waiting when the scope closes are answered with an interruption", () =>
    Effect.gen(function*() {
      const { hold, turn } = recorder()
      hold()
      const waiting = yield* Effect.scoped(Effect.gen(function*() {
        const actors = yield* KeyedActors.make(turn, 8)
        const fibers = yield* Effect.forEach([0, 2], (item) => Effect.forkDetach(Effect.exit(actors.send("a", item))))
        yield* settle
        return fibers
      }))
      const exits = yield* Fiber.joinAll(waiting)
      assert.isTrue(exits.every(Exit.hasInterrupts))
    }))
})
