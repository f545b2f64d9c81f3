/**
 * The agent's day: local days in the policy's time zone (DST days of 23 and 25 hours, a
 * zone whose clocks skip midnight), and the daily total across a day boundary, read in
 * whatever zone the policy names at decision time.
 */
import { assert, describe, it, layer } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { dayWindow } from "../src/internal/dayWindow.ts"
import type { Domain } from "../src/index.ts"
import { makeTarget, TestGuardian } from "./support/targets.ts"
import { confidentialRequest, newParty } from "./support/transfers.ts"

const hours = (window: { readonly startMs: number; readonly endMs: number }) => (window.endMs - window.startMs) / 3_600_000
const iso = (ms: number) => new Date(ms).toISOString()

describe("dayWindow", () => {
  it("reads the local day of the zone, DST and skipped midnights included", () => {
    const spring = dayWindow(Date.parse("2026-03-08T12:00:00Z"), "America/New_York")
    const autumn = dayWindow(Date.parse("2026-11-01T12:00:00Z"), "America/New_York")
    const kolkata = dayWindow(Date.parse("2026-06-01T23:30:00Z"), "Asia/Kolkata")
    const santiago = dayWindow(Date.parse("2026-09-06T12:00:00Z"), "America/Santiago")
    assert.isDefined(spring && autumn && kolkata && santiago)
    if (!spring || !autumn || !kolkata || !santiago) return
    assert.deepStrictEqual([iso(spring.startMs), iso(spring.endMs), hours(spring)], ["2026-03-08T05:00:00.000Z", "2026-03-09T04:00:00.000Z", 23])
    assert.deepStrictEqual([iso(autumn.startMs), hours(autumn)], ["2026-11-01T04:00:00.000Z", 25])
    // 23:30 UTC is already 05:00 on the next day in India (+05:30).
    assert.deepStrictEqual([kolkata.date, iso(kolkata.startMs)], [20260602, "2026-06-01T18:30:00.000Z"])
    // Chile skips 00:00-01:00 on its spring-forward day: the day starts at 01:00 local (04:00Z).
    assert.deepStrictEqual([iso(santiago.startMs), hours(santiago)], ["2026-09-06T04:00:00.000Z", 23])
    assert.isUndefined(dayWindow(Date.now(), "Not/A_Zone"))
  })
})

const fixedClock = (iso: string): Clock.Clock => {
  const ms = Date.parse(iso)
  return {
    currentTimeMillisUnsafe: () => ms,
    currentTimeMillis: Effect.succeed(ms),
    currentTimeNanosUnsafe: () => BigInt(ms) * 1_000_000n,
    currentTimeNanos: Effect.succeed(BigInt(ms) * 1_000_000n),
    monotonicTimeNanosUnsafe: () => BigInt(ms) * 1_000_000n,
    monotonicTimeNanos: Effect.succeed(BigInt(ms) * 1_000_000n),
    sleep: () => Effect.void
  }
}

describe("daily limit across day boundaries", () => {
  // The requests' deadlines lie in March 2026 (the decisions' fixed clocks), so by the sweeper's real
  // clock every reservation here is past due: an expiry sweep during the test would release the 80
  // and make the daily totals depend on timing. The sweep is off here.
  layer(makeTarget("in-process/pglite", { timing: { sweepIntervalMs: 0 } }), { timeout: "60 seconds", excludeTestServices: true })("in-process", (it) => {
    it.effect("the daily total resets at local midnight of the policy's zone, and follows a zone change", () =>
      Effect.gen(function*() {
        const guardian = yield* TestGuardian
        const owner = newParty()
        const agent = newParty()
        const bob = newParty()
        yield* guardian.client.credit({ chainId: 46630n, contract: "0x00000000000000000000000000000000c0ffee01", account: agent.address, amount: 10_000n, creditId: `tz-${agent.address}` })
        const policy = (timeZone: string): Domain.PolicySnapshot => ({ perTransactionLimit: 100n, dailyLimit: 100n, hitlThreshold: null, timeZone })
        const at = (when: string, amount: bigint, timeZone: string) =>
          guardian.client.authorize(confidentialRequest({
            guardianKey: guardian.encryptionKey,
            from: agent,
            fromKeyOwner: owner,
            to: bob,
            amount,
            deadline: BigInt(Math.floor(Date.parse(when) / 1000) + 600),
            agent: { policy: policy(timeZone), approved: false }
          })).pipe(
            Effect.provideService(Clock.Clock, fixedClock(when)),
            Effect.map((result) => (result._tag === "PolicyViolation" ? result.reason : result._tag))
          )
        // 23:30 on 7 March in New York.
        assert.strictEqual(yield* at("2026-03-08T04:30:00Z", 80n, "America/New_York"), "Authorized")
        // 23:50, same local day: 80 + 30 > 100.
        assert.strictEqual(yield* at("2026-03-08T04:50:00Z", 30n, "America/New_York"), "daily_limit_exceeded")
        // Read in UTC the 80 belongs to 8 March as well, so the same 30 is over the limit there too.
        assert.strictEqual(yield* at("2026-03-08T04:50:00Z", 30n, "UTC"), "daily_limit_exceeded")
        // 00:10 on 8 March in New York: a new day, 30 fits.
        assert.strictEqual(yield* at("2026-03-08T05:10:00Z", 30n, "America/New_York"), "Authorized")
        // In UTC (the 80 at 04:30Z and the 30 at 05:10Z are both 8 March) 100 is reached: 1 more is over.
        assert.strictEqual(yield* at("2026-03-08T05:20:00Z", 1n, "UTC"), "daily_limit_exceeded")
        // In Tokyo it is already 9 March (UTC+9): nothing spent yet that day.
        assert.strictEqual(yield* at("2026-03-08T15:00:00Z", 100n, "Asia/Tokyo"), "Authorized")
      }))
  })
})
