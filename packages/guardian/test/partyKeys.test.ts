/**
 * The guardian's party-key cache (steps/PartyKeys.ts) against a rotation's forget (D55), with the
 * interleavings forced by hand: a registry lookup that started before `forgetKnownKey` and ends
 * after it answers its own caller but is not remembered, a caller after the forget does not join
 * it, and a key check that a forget overtook is stale.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { cachedKeyOf, forgetKnownKey, keysForgottenSince, makePartyKeyCache } from "../src/steps/PartyKeys.ts"

const contract = "0x00000000000000000000000000000000000000c0"
const bob = "0x00000000000000000000000000000000000000b0"
const carol = "0x00000000000000000000000000000000000000ca"
const bobRef = { chainId: "31337", contract, account: bob }
const oldKey = "0x01"
const newKey = "0x02"

/** A registry read that reports it started and answers `key` once released. */
const gatedLookup = Effect.gen(function*() {
  const started = yield* Deferred.make<void>()
  const release = yield* Deferred.make<void>()
  const lookup = Deferred.succeed(started, undefined).pipe(
    Effect.andThen(Deferred.await(release)),
    Effect.as({ key: oldKey, source: "registered" as const })
  )
  return { started, release, lookup }
})

const registered = (key: string) => Effect.succeed({ key, source: "registered" as const })

describe("party keys and a rotation's forget (D55)", () => {
  it.effect("a lookup that read the old key before the forget answers it but does not remember it", () =>
    Effect.gen(function*() {
      const cache = makePartyKeyCache()
      const gate = yield* gatedLookup
      const before = yield* Effect.forkChild(cachedKeyOf(cache, bobRef, gate.lookup))
      yield* Deferred.await(gate.started)
      forgetKnownKey(cache, bobRef)
      yield* Deferred.succeed(gate.release, undefined)
      assert.strictEqual(yield* Fiber.join(before), oldKey)
      assert.isFalse(cache.known.has(`31337/${contract}/${bob}`), "the old key was remembered after its forget")
      // The next lookup reads the registry again, and its answer is remembered.
      assert.strictEqual(yield* cachedKeyOf(cache, bobRef, registered(newKey)), newKey)
      assert.strictEqual(yield* cachedKeyOf(cache, bobRef, Effect.die("read again")), newKey)
    }))

  it.effect("a caller after the forget does not join the lookup under way; the old one ending later changes nothing", () =>
    Effect.gen(function*() {
      const cache = makePartyKeyCache()
      const gate = yield* gatedLookup
      const before = yield* Effect.forkChild(cachedKeyOf(cache, bobRef, gate.lookup))
      yield* Deferred.await(gate.started)
      forgetKnownKey(cache, bobRef)
      assert.strictEqual(yield* cachedKeyOf(cache, bobRef, registered(newKey)), newKey)
      yield* Deferred.succeed(gate.release, undefined)
      assert.strictEqual(yield* Fiber.join(before), oldKey)
      assert.strictEqual(yield* cachedKeyOf(cache, bobRef, Effect.die("read again")), newKey)
    }))

  it.effect("a key check that a forget of one of its parties overtook is stale; one of other parties is not", () =>
    Effect.sync(() => {
      const cache = makePartyKeyCache()
      const toBob = { chainId: 31337n, contract, from: carol, to: bob }
      const checkedBefore = cache.generations.current
      assert.isFalse(keysForgottenSince(cache, toBob, checkedBefore))
      forgetKnownKey(cache, bobRef)
      assert.isTrue(keysForgottenSince(cache, toBob, checkedBefore))
      assert.isFalse(keysForgottenSince(cache, toBob, cache.generations.current), "a check started after the forget")
      assert.isFalse(keysForgottenSince(cache, { chainId: 31337n, contract, from: carol, to: contract }, checkedBefore))
    }))
})
