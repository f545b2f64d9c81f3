/**
 * The settlement watcher's pacing (engine/Watch.ts, `pauseBeforeRound`): while transactions are in
 * flight it sleeps until shortly before the next block can be made, polls the head in short steps
 * around the moment it is due, and falls back to its plain poll while the block is late.
 */
import { assert, describe, it } from "@effect/vitest"
import type { ChainView } from "../src/settlement/engine/EngineContext.ts"
import { pauseBeforeRound } from "../src/settlement/engine/Watch.ts"

/** A watcher that first read head 7 at `seenAtMs`, `withinMs` after its read before (which found head 7 - `step`). */
const watcher = (blockTimeMs: number, seenAtMs: number, withinMs: number, step = 1n) => {
  const view: ChainView = {
    baseFeeWei: 0n,
    latestTimestampSeconds: 0n,
    lastScanned: 7n,
    head: 7n,
    headSeenAtMs: seenAtMs,
    headSeenWithinMs: withinMs,
    headStep: step,
    headReadAtMs: seenAtMs,
    lagWarnedAtMs: 0,
    nonceGapsTriedAtMs: 0
  }
  return { blockTimeMs, view }
}

describe("the settlement watcher's pace", () => {
  it("polls every quarter block (25 ms at least) until it has seen a head", () => {
    assert.strictEqual(pauseBeforeRound(watcher(100, 0, 0), 5_000), 25)
    assert.strictEqual(pauseBeforeRound(watcher(2_000, 0, 0), 5_000), 500)
  })

  it("with 100 ms blocks seen to within 5 ms: sleeps until 10 ms before the next can be made, polls every 5 ms until 25 ms past due, then every 25 ms", () => {
    // Head 7 was made between 995 and 1,000: head 8 between 1,095 and 1,100.
    const seen = watcher(100, 1_000, 5)
    assert.strictEqual(pauseBeforeRound(seen, 1_010), 75, "one sleep to 1,085")
    assert.strictEqual(pauseBeforeRound(seen, 1_084), 1)
    for (const nowMs of [1_085, 1_100, 1_124]) assert.strictEqual(pauseBeforeRound(seen, nowMs), 5, `short polls at ${nowMs}`)
    for (const nowMs of [1_125, 1_400]) assert.strictEqual(pauseBeforeRound(seen, nowMs), 25, `late at ${nowMs}: the plain poll`)
  })

  it("after a long pause between head reads, polls finely over the whole window the next block may come in, once", () => {
    // A head read a block time after the read before it: head 7 was made anywhere in the 100 ms before 1,000.
    const idle = watcher(100, 1_000, 100)
    assert.strictEqual(pauseBeforeRound(idle, 1_001), 5)
    assert.strictEqual(pauseBeforeRound(idle, 1_124), 5)
    assert.strictEqual(pauseBeforeRound(idle, 1_125), 25)
  })

  it("blocks faster than the block time, or a round longer than a block: no timing, the plain poll", () => {
    const skipped = watcher(2_000, 10_000, 5, 2n)
    assert.strictEqual(pauseBeforeRound(skipped, 10_050), 500)
    assert.strictEqual(pauseBeforeRound(skipped, 11_900), 500)
  })

  it("scales with the block time: 2 s blocks sleep until 200 ms before, poll every 100 ms, then every 500 ms", () => {
    const seen = watcher(2_000, 10_000, 100)
    assert.strictEqual(pauseBeforeRound(seen, 10_050), 1_650)
    assert.strictEqual(pauseBeforeRound(seen, 11_800), 100)
    assert.strictEqual(pauseBeforeRound(seen, 12_499), 100)
    assert.strictEqual(pauseBeforeRound(seen, 12_500), 500)
  })
})
