/**
 * D89: the server writes the on-demand embedded chain's state. A block with transactions is in
 * `chain/state.json.gz` once the chain rests; the empty blocks after it (the clock's) are not written;
 * and when anvil itself is then killed with SIGKILL, the next start finds the transaction and mines
 * back up to the height the chain had reached, so no block number a reader has passed is reused.
 *
 * Real anvil and a real server-side miner and writer (`DevChain.layer`), on the live clock; then
 * the writer's loop alone, with a write of the test's own, on the test clock.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Option, Ref } from "effect"
import { TestClock } from "effect/testing"
import * as fs from "node:fs"
import * as path from "node:path"
import * as zlib from "node:zlib"
import { DevChain } from "../src/settlement/DevChain.ts"
import { ChainError } from "../src/settlement/Chains.ts"
import {
  afterWrite,
  chainRestMs,
  noteCarried,
  nothingUnwritten,
  readMinedHeight,
  runStateWriter,
  stateCheckEveryMs,
  unwrittenMaxMs
} from "../src/settlement/DevChainState.ts"
import { clientsOf, devChainBlockTimeMs, devChainIn, withDataDir } from "./support/devChain.ts"

const blockTimeMs = devChainBlockTimeMs

/** The state the server wrote (gzipped, D89): its head, and the hashes of the transactions it keeps. */
const stateFile = (dataDir: string) => {
  const written = path.join(dataDir, "chain", "state.json.gz")
  const stat = fs.statSync(written)
  const state = JSON.parse(zlib.gunzipSync(fs.readFileSync(written)).toString("utf8")) as {
    readonly best_block_number: string | number
    readonly transactions: ReadonlyArray<{ readonly info: { readonly transaction_hash: string } }>
  }
  return {
    modifiedMs: stat.mtimeMs,
    head: BigInt(state.best_block_number),
    hashes: state.transactions.map((transaction) => transaction.info.transaction_hash.toLowerCase())
  }
}

describe("the server writes the embedded chain's state (D89)", () => {
  it.live("written once the chain rests, not for empty blocks; a crash of anvil loses neither the transaction nor the height", () =>
    withDataDir((dataDir) =>
      Effect.gen(function*() {
        const { hash, heightBeforeCrash } = yield* Effect.gen(function*() {
          const rpcUrl = Option.getOrThrow((yield* DevChain).rpcUrl)
          const { reader, wallet } = clientsOf(rpcUrl)
          const head = () => Effect.promise(() => reader.getBlockNumber({ cacheTime: 0 }))
          const hash = yield* Effect.promise(() => wallet.sendTransaction({ to: "0x000000000000000000000000000000000000dEaD", value: 1n }))
          const receipt = yield* Effect.promise(() => reader.waitForTransactionReceipt({ hash, pollingInterval: 20, timeout: 10_000 }))
          // The chain rests: the state is written with the transaction's block in it.
          yield* Effect.sleep(chainRestMs + 1_500)
          const written = stateFile(dataDir)
          assert.include(written.hashes, hash.toLowerCase())
          assert.isTrue(written.head >= receipt.blockNumber, `state head ${written.head} below the receipt's block`)

          // Twelve seconds after the last block the clock's empty block comes; it is not written.
          const top = yield* head()
          const lastBlock = yield* Effect.promise(() => reader.getBlock({ blockNumber: top }))
          yield* Effect.sleep(Math.max(0, Number(lastBlock.timestamp) * 1000 + 12_000 - Date.now()) + 2_000)
          const heightBeforeCrash = yield* head()
          assert.isTrue(heightBeforeCrash > written.head, "no empty block came after the write")
          assert.strictEqual(stateFile(dataDir).modifiedMs, written.modifiedMs, "an empty block was written")

          // Anvil itself crashes: what it held beyond the file is gone.
          const pid = Number.parseInt(fs.readFileSync(path.join(dataDir, "chain", "anvil.pid"), "utf8"), 10)
          process.kill(pid, "SIGKILL")
          return { hash, heightBeforeCrash }
        }).pipe(Effect.provide(devChainIn(dataDir, { chainConfirmations: 1 })))

        yield* Effect.gen(function*() {
          const { reader } = clientsOf(Option.getOrThrow((yield* DevChain).rpcUrl))
          const receipt = yield* Effect.promise(() => reader.getTransactionReceipt({ hash }))
          assert.strictEqual(receipt.status, "success")
          // Back up to the height before the crash, then the one block a start mines for the
          // clock (D88). Without the catch-up, that block alone would stand at the height of the
          // lost clock block, reused.
          yield* Effect.sleep(10 * blockTimeMs)
          const restartedHead = yield* Effect.promise(() => reader.getBlockNumber({ cacheTime: 0 }))
          assert.strictEqual(restartedHead, heightBeforeCrash + 1n)
        }).pipe(Effect.provide(devChainIn(dataDir, { chainConfirmations: 1 })))
      })
    ), { timeout: 60_000 })
})

/**
 * The writer's loop itself (`runStateWriter`) on the test clock (D89): what 30 s of continuous
 * transactions would show a live test, without them. Blocks with transactions every 100 ms (the
 * miner's note, as `runMiner` makes it) while the load lasts; a write takes 1.7 s (a 138 MB state
 * on a 2-vCPU VM) while blocks keep coming, or fails after `failTakesMs` when the test says so (a
 * full disk).
 */
describe("when the writer writes (D89)", () => {
  const blockEveryMs = 100
  const writeTakesMs = 1_700

  const runWriter = (options: {
    readonly load: ReadonlyArray<readonly [fromMs: number, untilMs: number]>
    readonly endMs: number
    readonly fails?: (startedAtMs: number) => boolean
    readonly failTakesMs?: number
  }) =>
    Effect.gen(function*() {
      const unwritten = yield* Ref.make(nothingUnwritten)
      const attempts: Array<{ readonly startedAtMs: number; readonly failed: boolean }> = []
      const write = Effect.gen(function*() {
        const startedAtMs = yield* Clock.currentTimeMillis
        const failed = options.fails?.(startedAtMs) ?? false
        attempts.push({ startedAtMs, failed })
        yield* Effect.sleep(Duration.millis(failed ? options.failTakesMs ?? 0 : writeTakesMs))
        if (failed) return yield* new ChainError({ message: "no room left on the device (test)" })
      })
      yield* runStateWriter(write, unwritten)
      let oldestUnwrittenMs = 0
      while ((yield* Clock.currentTimeMillis) <= options.endMs) {
        const nowMs = yield* Clock.currentTimeMillis
        if (options.load.some(([fromMs, untilMs]) => nowMs >= fromMs && nowMs < untilMs)) {
          yield* Ref.update(unwritten, (current) => noteCarried(current, nowMs))
        }
        const { unwrittenSinceMs } = yield* Ref.get(unwritten)
        if (unwrittenSinceMs !== undefined) oldestUnwrittenMs = Math.max(oldestUnwrittenMs, nowMs - unwrittenSinceMs)
        yield* TestClock.adjust(Duration.millis(blockEveryMs))
      }
      return { attempts, oldestUnwrittenMs, unwritten: yield* Ref.get(unwritten) }
    }).pipe(Effect.scoped)

  /** The wait before each attempt after the first. */
  const waitsOf = (attempts: ReadonlyArray<{ readonly startedAtMs: number }>) =>
    attempts.slice(1).map((attempt, index) => attempt.startedAtMs - attempts[index]!.startedAtMs)

  it.effect("under continuous load, about every unwrittenMaxMs: what a crash of anvil can lose stays bounded", () =>
    Effect.gen(function*() {
      const { attempts, oldestUnwrittenMs } = yield* runWriter({ load: [[0, 100_000]], endMs: 100_000 })
      // Blocks come during each write, so the next is due unwrittenMaxMs after that write's start,
      // and comes at the first look after it. Were the blocks of a write's time forgotten, it would
      // come a write later.
      assert.strictEqual(attempts[0]!.startedAtMs, unwrittenMaxMs)
      assert.isAtLeast(attempts.length, 3)
      for (const waitMs of waitsOf(attempts)) {
        assert.isAtLeast(waitMs, unwrittenMaxMs)
        assert.isAtMost(waitMs, unwrittenMaxMs + stateCheckEveryMs)
      }
      // The oldest block the file lacks: written once the write that began at the ceiling ends.
      assert.isAtMost(oldestUnwrittenMs, unwrittenMaxMs + stateCheckEveryMs + writeTakesMs)
    }))

  it.effect("once the load stops, at the first look chainRestMs after the last block, and then nothing is unwritten", () =>
    Effect.gen(function*() {
      const { attempts, unwritten } = yield* runWriter({ load: [[0, 10_100]], endMs: 40_000 })
      // The last block is mined at 10,000 ms and the chain rests from 12,000, a look's time
      // exactly (they fall every 500 ms): the write is at that look, not the next.
      assert.deepStrictEqual(attempts, [{ startedAtMs: 12_000, failed: false }])
      assert.isUndefined(unwritten.unwrittenSinceMs)
    }))

  it.effect("a failed write is tried again after a wait that doubles, up to unwrittenMaxMs; once one succeeds nothing is unwritten", () =>
    Effect.gen(function*() {
      const { attempts, unwritten } = yield* runWriter({
        load: [[0, 3_000]],
        endMs: 120_000,
        fails: (startedAtMs) => startedAtMs < 70_000
      })
      // At rest from 4,900 ms: the look at 5,000 fails at once, and each wait ends on a look.
      assert.strictEqual(attempts[0]!.startedAtMs, 5_000)
      assert.deepStrictEqual(waitsOf(attempts), [1_000, 2_000, 4_000, 8_000, 16_000, unwrittenMaxMs, unwrittenMaxMs])
      // Failures at 5, 6, 8, 12, 20, 36 and 66 s; the write at 96 s, past the failures' end, succeeds.
      assert.deepStrictEqual(attempts.map((attempt) => attempt.failed), [true, true, true, true, true, true, true, false])
      assert.isUndefined(unwritten.unwrittenSinceMs)
    }))

  it.effect("the wait counts from the failure, and after a success starts again from the first", () =>
    Effect.gen(function*() {
      const { attempts } = yield* runWriter({
        load: [[0, 3_000], [20_000, 21_000]],
        endMs: 40_000,
        // Two failures, a success, then one failure more; each failure takes 700 ms to come.
        fails: (startedAtMs) => startedAtMs < 7_000 || (startedAtMs >= 23_000 && startedAtMs < 24_000),
        failTakesMs: 700
      })
      assert.deepStrictEqual(attempts, [
        // At rest from 4,900; fails at 5,700: the next no earlier than 6,700 (not 6,000).
        { startedAtMs: 5_000, failed: true },
        // Fails at 7,400: the next no earlier than 9,400 (2 s), the look at 9,400.
        { startedAtMs: 6_700, failed: true },
        { startedAtMs: 9_400, failed: false },
        // Written by 11,100; the second load rests from 22,900, the look at 23,100 fails at 23,800:
        // the first wait again (1 s, not 4), the look at 24,800.
        { startedAtMs: 23_100, failed: true },
        { startedAtMs: 24_800, failed: false }
      ])
    }))

  it("a block mined during the write keeps the state unwritten, as old as the write's start", () => {
    const before = noteCarried(nothingUnwritten, 1_000)
    assert.isUndefined(afterWrite(before, before, 5_000).unwrittenSinceMs)
    assert.strictEqual(afterWrite(before, noteCarried(before, 5_500), 5_000).unwrittenSinceMs, 5_000)
  })
})

describe("the mined height kept for a crash of anvil (D89)", () => {
  it.effect("is read when it holds a number; none, with a warning, when it is missing, not a number or not readable", () =>
    withDataDir((dir) =>
      Effect.gen(function*() {
        const file = path.join(dir, "mined-height")
        assert.isUndefined(yield* readMinedHeight(file))
        fs.writeFileSync(file, "42\n")
        assert.strictEqual(yield* readMinedHeight(file), 42n)
        fs.writeFileSync(file, "4x2")
        assert.isUndefined(yield* readMinedHeight(file))
        // A directory in its place: reading it throws, which must not become a defect at start.
        fs.rmSync(file)
        fs.mkdirSync(file)
        assert.isUndefined(yield* readMinedHeight(file))
      })
    ))
})
