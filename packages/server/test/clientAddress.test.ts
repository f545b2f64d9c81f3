/**
 * Goal: the client address behind trusted proxies, the IPv6 /64 bucket, and the
 * sign-in limiter's bounded map, without a server.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { TestClock } from "effect/testing"
import { addressBucket, clientAddress, makeTrustedProxies } from "../src/http/ClientAddress.ts"
import { makeSignInLimiter } from "../src/dashboard/http.ts"

describe("client address", () => {
  const balancer = makeTrustedProxies(["10.0.0.5", "fd00::/8"])
  const none = makeTrustedProxies([])

  it("is the socket's without trusted proxies, whatever X-Forwarded-For says", () => {
    assert.strictEqual(clientAddress("10.0.0.5", "198.51.100.1", none), "10.0.0.5")
    assert.strictEqual(clientAddress("::ffff:10.0.0.5", undefined, none), "10.0.0.5")
  })

  it("is the right-most untrusted X-Forwarded-For entry when the socket is a trusted proxy", () => {
    assert.strictEqual(clientAddress("10.0.0.5", "198.51.100.1", balancer), "198.51.100.1")
    assert.strictEqual(clientAddress("::ffff:10.0.0.5", "192.0.2.1, 198.51.100.1", balancer), "198.51.100.1")
    assert.strictEqual(clientAddress("10.0.0.5", "198.51.100.1, fd00::7", balancer), "198.51.100.1")
    // A socket that is no trusted proxy cannot pick its bucket with a header.
    assert.strictEqual(clientAddress("198.51.100.9", "192.0.2.1", balancer), "198.51.100.9")
    assert.strictEqual(clientAddress("10.0.0.5", undefined, balancer), "10.0.0.5")
  })

  it("buckets IPv6 by /64 and IPv4 by address", () => {
    assert.strictEqual(addressBucket("2001:db8:1:2::1"), addressBucket("2001:db8:1:2:ffff:ffff:ffff:ffff"))
    assert.notStrictEqual(addressBucket("2001:db8:1:2::1"), addressBucket("2001:db8:1:3::1"))
    assert.strictEqual(addressBucket("[2001:db8::1%eth0]"), "2001:db8:0:0::/64")
    assert.strictEqual(addressBucket("::ffff:192.0.2.1"), "192.0.2.1")
    assert.notStrictEqual(addressBucket("192.0.2.1"), addressBucket("192.0.2.2"))
  })

  it("refuses a TRUSTED_PROXIES entry that is no address or CIDR", () => {
    assert.throws(() => makeTrustedProxies(["balancer"]), /TRUSTED_PROXIES/)
    assert.throws(() => makeTrustedProxies(["10.0.0.0/33"]), /prefix/)
  })
})

describe("sign-in limiter", () => {
  it.effect("gives each address its own window, and past 10,000 addresses puts newcomers in one overflow bucket until the sweep", () =>
    Effect.gen(function*() {
      const limit = makeSignInLimiter()
      // 10,000 distinct addresses fill the map; each is allowed.
      for (let i = 0; i < 10_000; i++) assert.isTrue(Option.isNone(yield* limit(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`)))
      // Newcomers share one bucket: 30 pass, the 31st newcomer is limited.
      for (let i = 0; i < 30; i++) assert.isTrue(Option.isNone(yield* limit(`192.0.2.${i}`)))
      assert.isTrue(Option.isSome(yield* limit("198.51.100.1")))
      // A tracked address keeps its own window.
      assert.isTrue(Option.isNone(yield* limit("10.0.0.0")))
      // After the window the sweep frees the map: a newcomer gets its own bucket again.
      yield* TestClock.adjust("5 minutes")
      assert.isTrue(Option.isNone(yield* limit("198.51.100.1")))
    }))
})
