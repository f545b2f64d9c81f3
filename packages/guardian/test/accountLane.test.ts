/**
 * The guardian's account lane (internal/accountLane.ts) serializes one account's writers and
 * lets other accounts' run beside them; a broken invariant is a defect that names its rule; a
 * storage failure says whether a retry can help.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber, Ref } from "effect"
import { GuardianError } from "../src/Domain.ts"
import * as AccountLane from "../src/internal/accountLane.ts"
import * as Invariant from "../src/internal/Invariant.ts"

const account = (name: string) => ({ chainId: "31337", contract: "0xc0", account: name })

describe("accountLane", () => {
  it.effect("one account's effects run one at a time; another account's run meanwhile", () =>
    Effect.scoped(Effect.gen(function*() {
      const lane = yield* AccountLane.make
      const running = yield* Ref.make(0)
      const most = yield* Ref.make(0)
      const release = yield* Deferred.make<void>()
      const started = { alice: yield* Deferred.make<void>(), bob: yield* Deferred.make<void>() }
      const held = (name: "alice" | "bob") =>
        lane.alone(account(name), Effect.gen(function*() {
          const now = yield* Ref.updateAndGet(running, (n) => n + 1)
          yield* Ref.update(most, (m) => Math.max(m, now))
          yield* Deferred.succeed(started[name], undefined)
          yield* Deferred.await(release)
          yield* Ref.update(running, (n) => n - 1)
        }))
      const alice = yield* Effect.forkChild(Effect.all([held("alice"), held("alice"), held("alice")], { concurrency: "unbounded" }))
      yield* Deferred.await(started.alice)
      // Bob's effect is not queued behind alice's: it runs while hers holds the lane (a lane
      // shared across accounts would leave this waiting, and the test would time out).
      const bob = yield* Effect.forkChild(held("bob"))
      yield* Deferred.await(started.bob)
      assert.strictEqual(yield* Ref.get(running), 2, "one of alice's and bob's")
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(alice)
      yield* Fiber.join(bob)
      assert.strictEqual(yield* Ref.get(most), 2, "never two of alice's at once")
    })))

  it.effect("a broken invariant is a defect naming its rule", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Invariant.check(false, "a reservation is within the reserved total"))
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isSuccess(exit)) return
      const defect = Cause.squash(exit.cause)
      if (!(defect instanceof Invariant.InvariantViolation)) return assert.fail(`not an invariant violation: ${String(defect)}`)
      assert.include(defect.message, "a reservation is within the reserved total")
      assert.isTrue(Exit.isSuccess(yield* Effect.exit(Invariant.check(true, "holds"))))
    }))

  it("a storage failure carries whether a retry can help; without the flag, the reason decides", () => {
    assert.isFalse(new GuardianError({ reason: "storage", message: "refused", retryable: false }).isRetryable)
    assert.isTrue(new GuardianError({ reason: "storage", message: "lost" }).isRetryable)
    assert.isFalse(new GuardianError({ reason: "unauthorized", message: "wrong secret" }).isRetryable)
  })
})
