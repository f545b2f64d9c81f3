/**
 * D63's walk (balances/RecentCiphertexts.ts) on a chain made of arrays: it reads nothing when
 * the latest ciphertext is the one a proof names, walks back one block at a time only on a
 * mismatch and stops at the first match, and refuses what lies past either bound (32 blocks, or
 * a ciphertext replaced longer ago than a proof lives) or before the contract existed. The reads
 * are counted, so a walk that read more than it needs fails here.
 */
import { assert, describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { locate, lookbackBlocksMax, prunedNodeStateBlocks } from "../src/balances/RecentCiphertexts.ts"

interface Ciphertext {
  readonly ciphertextVersion: bigint
}

/**
 * A chain of `length` blocks, block n at timestamp `startSeconds + n`; `versionAt(n)` is the
 * account's ciphertext version at block n, or undefined before the contract had code.
 */
const chain = (length: bigint, versionAt: (blockNumber: bigint) => bigint | undefined, startSeconds = 1_000_000n) => {
  const reads: Array<string> = []
  const latestBlock = length - 1n
  const view = {
    ciphertextAt: (blockNumber: bigint) =>
      Effect.sync(() => {
        reads.push(`ciphertext ${blockNumber}`)
        assert.isTrue(blockNumber >= 0n && blockNumber < latestBlock, `a past block is read, not ${blockNumber}`)
        const version = versionAt(blockNumber)
        return version === undefined ? Option.none<Ciphertext>() : Option.some({ ciphertextVersion: version })
      }),
    timestampOf: (blockNumber: bigint) =>
      Effect.sync(() => {
        reads.push(`timestamp ${blockNumber}`)
        return startSeconds + blockNumber
      })
  }
  const latestVersion = versionAt(latestBlock)
  if (latestVersion === undefined) throw new Error("the latest block holds a ciphertext")
  const latest = { ciphertext: { ciphertextVersion: latestVersion }, blockNumber: latestBlock }
  return { reads, view, latest, nowSeconds: startSeconds + latestBlock }
}

/** Versions that change at the given blocks: 1 until the first change, 2 from it, and so on. */
const changingAt = (...changes: ReadonlyArray<bigint>) => (blockNumber: bigint) =>
  1n + BigInt(changes.filter((change) => change <= blockNumber).length)

describe("D63: finding a proof's ciphertext among recent blocks", () => {
  it("keeps the look-back inside the state a node without an archive keeps", () => {
    assert.isTrue(lookbackBlocksMax > 0n && lookbackBlocksMax < prunedNodeStateBlocks)
  })

  it.effect("the latest ciphertext named: no read at all", () =>
    Effect.gen(function*() {
      const { reads, view, latest, nowSeconds } = chain(100n, changingAt(90n))
      const found = yield* locate(view, { version: 2n, latest, currentSinceSeconds: nowSeconds - 300n })
      expect(found).toEqual(Option.some(latest))
      expect(reads).toEqual([])
    }))

  it.effect("replaced three blocks ago: walks back to the newest block holding it, reads its successor's time, stops", () =>
    Effect.gen(function*() {
      const { reads, view, latest, nowSeconds } = chain(100n, changingAt(50n, 97n))
      const found = yield* locate(view, { version: 2n, latest, currentSinceSeconds: nowSeconds - 300n })
      expect(found).toEqual(Option.some({ ciphertext: { ciphertextVersion: 2n }, blockNumber: 96n }))
      expect(reads).toEqual(["ciphertext 98", "ciphertext 97", "ciphertext 96", "timestamp 97"])
    }))

  it.effect("the oldest block of the window is found; one block further is not", () =>
    Effect.gen(function*() {
      const latestBlock = 99n
      const inside = chain(100n, changingAt(latestBlock - lookbackBlocksMax + 1n))
      const atEdge = yield* locate(inside.view, { version: 1n, latest: inside.latest, currentSinceSeconds: inside.nowSeconds - 300n })
      expect(atEdge).toEqual(Option.some({ ciphertext: { ciphertextVersion: 1n }, blockNumber: latestBlock - lookbackBlocksMax }))

      const past = chain(100n, changingAt(latestBlock - lookbackBlocksMax))
      const beyond = yield* locate(past.view, { version: 1n, latest: past.latest, currentSinceSeconds: past.nowSeconds - 300n })
      expect(beyond).toEqual(Option.none())
      // Every block of the window read once, nothing older, no timestamp.
      expect(past.reads).toEqual(Array.from({ length: Number(lookbackBlocksMax) }, (_, i) => `ciphertext ${latestBlock - 1n - BigInt(i)}`))
    }))

  it.effect("a version that never was on chain: the window read once, then none", () =>
    Effect.gen(function*() {
      const { reads, view, latest, nowSeconds } = chain(100n, changingAt(10n, 80n))
      expect(yield* locate(view, { version: 12345n, latest, currentSinceSeconds: nowSeconds - 300n })).toEqual(Option.none())
      expect(reads.length).toBe(Number(lookbackBlocksMax))
    }))

  it.effect("within 32 blocks but replaced longer ago than a proof lives: none", () =>
    Effect.gen(function*() {
      // Slow blocks: one every 12 s, so 32 blocks span over six minutes.
      const versionAt = changingAt(80n)
      const reads: Array<string> = []
      const view = {
        ciphertextAt: (blockNumber: bigint) => Effect.sync(() => (reads.push(`ciphertext ${blockNumber}`), Option.some({ ciphertextVersion: versionAt(blockNumber) }))),
        timestampOf: (blockNumber: bigint) => Effect.sync(() => (reads.push(`timestamp ${blockNumber}`), 12n * blockNumber))
      }
      const latest = { ciphertext: { ciphertextVersion: versionAt(99n) }, blockNumber: 99n }
      const nowSeconds = 12n * 99n
      // Replaced at block 80, 228 s before now: inside a 300 s lifetime, outside a 200 s one.
      expect(yield* locate(view, { version: 1n, latest, currentSinceSeconds: nowSeconds - 300n }))
        .toEqual(Option.some({ ciphertext: { ciphertextVersion: 1n }, blockNumber: 79n }))
      expect(yield* locate(view, { version: 1n, latest, currentSinceSeconds: nowSeconds - 200n })).toEqual(Option.none())
    }))

  it.effect("a block before the contract had code ends the walk", () =>
    Effect.gen(function*() {
      const { reads, view, latest, nowSeconds } = chain(100n, (n) => (n < 95n ? undefined : changingAt(98n)(n)))
      expect(yield* locate(view, { version: 7n, latest, currentSinceSeconds: nowSeconds - 300n })).toEqual(Option.none())
      expect(reads).toEqual(["ciphertext 98", "ciphertext 97", "ciphertext 96", "ciphertext 95", "ciphertext 94"])
    }))

  it.effect("a chain shorter than the window: the walk stops at block 0", () =>
    Effect.gen(function*() {
      const { reads, view, latest, nowSeconds } = chain(5n, changingAt(3n))
      expect(yield* locate(view, { version: 9n, latest, currentSinceSeconds: nowSeconds - 300n })).toEqual(Option.none())
      expect(reads).toEqual(["ciphertext 3", "ciphertext 2", "ciphertext 1", "ciphertext 0"])
    }))
})
