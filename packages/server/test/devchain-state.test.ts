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
  stateRetryFirstMs,
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
 * miner's note, as `runMiner` makes it); a write takes 1.7 s (a 138 MB state on a 2-vCPU VM) while
 * blocks keep coming, or fails at once while the test says so (a full disk).
 */
describe("when the writer writes (D89)", () => {
  const blockEveryMs = 100
  const writeTakesMs = 1_700

  const runWriter = (options: { readonly loadUntilMs: number; readonly endMs: number; readonly failUntilMs?: number }) =>
    Effect.gen(function*() {
      const unwritten = yield* Ref.make(nothingUnwritten)
      const attempts: Array<{ readonly startedAtMs: number; readonly failed: boolean }> = []
      const write = Effect.gen(function*() {
        const startedAtMs = yield* Clock.currentTimeMillis
        const failed = startedAtMs < (options.failUntilMs ?? 0)
        attempts.push({ startedAtMs, failed })
        if (failed) return yield* new ChainError({ message: "no room left on the device (test)" })
        yield* Effect.sleep(Duration.millis(writeTakesMs))
      })
      yield* runStateWriter(write, unwritten)
      let oldestUnwrittenMs = 0
      while ((yield* Clock.currentTimeMillis) <= options.endMs) {
        const nowMs = yield* Clock.currentTimeMillis
        if (nowMs < options.loadUntilMs) yield* Ref.update(unwritten, (current) => noteCarried(current, nowMs))
        const { unwrittenSinceMs } = yield* Ref.get(unwritten)
        if (unwrittenSinceMs !== undefined) oldestUnwrittenMs = Math.max(oldestUnwrittenMs, nowMs - unwrittenSinceMs)
        yield* TestClock.adjust(Duration.millis(blockEveryMs))
      }
      return { attempts, oldestUnwrittenMs, unwritten: yield* Ref.get(unwritten) }
    }).pipe(Effect.scoped)

  it.effect("under continuous load, about every unwrittenMaxMs: what a crash of anvil can lose stays bounded", () =>
    Effect.gen(function*() {
      const { attempts, oldestUnwrittenMs } = yield* runWriter({ loadUntilMs: 100_000, endMs: 100_000 })
      const writes = attempts.map((attempt) => attempt.startedAtMs)
      // Each write waits for the ceiling, from the start of the one before (blocks came during it),
      // and comes at most a look and a write after it.
      assert.strictEqual(writes[0], unwrittenMaxMs)
      assert.isAtLeast(writes.length, Math.floor(100_000 / (unwrittenMaxMs + stateCheckEveryMs + writeTakesMs)))
      for (const [index, startedAtMs] of writes.slice(1).entries()) {
        assert.isAtLeast(startedAtMs - writes[index]!, unwrittenMaxMs)
        assert.isAtMost(startedAtMs - writes[index]!, unwrittenMaxMs + stateCheckEveryMs + writeTakesMs)
      }
      assert.isAtMost(oldestUnwrittenMs, unwrittenMaxMs + stateCheckEveryMs + writeTakesMs)
    }))

  it.effect("once the load stops, at the first look chainRestMs after the last block, and then nothing is unwritten", () =>
    Effect.gen(function*() {
      const { attempts, unwritten } = yield* runWriter({ loadUntilMs: 10_000, endMs: 40_000 })
      // The last block is mined at 9,900 ms; the looks fall every 500 ms, so 12,000 is the first at rest.
      assert.deepStrictEqual(attempts, [{ startedAtMs: 9_900 + chainRestMs + 100, failed: false }])
      assert.isUndefined(unwritten.unwrittenSinceMs)
    }))

  it.effect("a failed write is tried again after a wait that doubles, up to unwrittenMaxMs; once one succeeds nothing is unwritten", () =>
    Effect.gen(function*() {
      const { attempts, unwritten } = yield* runWriter({ loadUntilMs: 3_000, endMs: 120_000, failUntilMs: 70_000 })
      const waits = attempts.slice(1).map((attempt, index) => attempt.startedAtMs - attempts[index]!.startedAtMs)
      // At rest from 4,900 ms: the look at 5,000 fails, and each wait ends on a look (every 500 ms).
      assert.strictEqual(attempts[0]!.startedAtMs, 5_000)
      assert.deepStrictEqual(waits, [1, 2, 4, 8, 16, 30, 30].map((seconds) => seconds * stateRetryFirstMs))
      // Failures at 5, 6, 8, 12, 20, 36 and 66 s; the write at 96 s, past the failures' end, succeeds.
      assert.deepStrictEqual(attempts.map((attempt) => attempt.failed), [true, true, true, true, true, true, true, false])
      assert.isUndefined(unwritten.unwrittenSinceMs)
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
