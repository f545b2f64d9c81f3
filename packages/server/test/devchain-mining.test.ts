/**
 * D88: the embedded chain mines on demand. An idle chain gets one block every 12 s, for its clock,
 * instead of one every block time (so neither it nor the state file anvil rewrites every 5 s grows
 * with the wall clock); a transaction is mined within a block time or so, followed by the blocks
 * `CHAIN_CONFIRMATIONS` needs on top, and then nothing; and a
 * transaction left waiting in a leftover node (its server killed before the next mining round) is
 * mined before that node is stopped, so the next start finds it in a block.
 *
 * Real anvil and a real server-side miner (`DevChain.layer`), on the live clock.
 */
import { assert, describe, it } from "@effect/vitest"
import { Anvil } from "@pps/contracts"
import { Effect, Option } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { chainIdOfMode } from "@pps/api/ApiKeys"
import { DevChain } from "../src/settlement/DevChain.ts"
import { clientsOf, devChainBlockTimeMs, devChainIn, withDataDir } from "./support/devChain.ts"

const blockTimeMs = devChainBlockTimeMs

describe("the embedded chain mines on demand (D88)", () => {
  it.live("idle: no blocks but the clock's; a transaction: its block and the confirmations' blocks on top, then none", () =>
    withDataDir((dataDir) =>
      Effect.gen(function*() {
        const rpcUrl = Option.getOrThrow((yield* DevChain).rpcUrl)
        const { reader, wallet } = clientsOf(rpcUrl)
        const head = () => Effect.promise(() => reader.getBlockNumber({ cacheTime: 0 }))
        // At start the miner mines the clock's block and the blocks owed on top of whatever came
        // before (two at CHAIN_CONFIRMATIONS 3), a block time apart.
        yield* Effect.sleep(10 * blockTimeMs)
        const idleFrom = yield* head()
        // Fifteen block times: an interval-mining node would have mined ~15 blocks.
        yield* Effect.sleep(15 * blockTimeMs)
        assert.strictEqual(yield* head(), idleFrom, "an idle chain mined")

        const hash = yield* Effect.promise(() => wallet.sendTransaction({ to: "0x000000000000000000000000000000000000dEaD", value: 1n }))
        const receipt = yield* Effect.promise(() => reader.waitForTransactionReceipt({ hash, pollingInterval: 20, timeout: 10_000 }))
        assert.strictEqual(receipt.status, "success")
        // CHAIN_CONFIRMATIONS 3: two blocks on top of it, a block time apart, then none.
        yield* Effect.sleep(20 * blockTimeMs)
        const settled = yield* head()
        assert.strictEqual(settled, receipt.blockNumber + 2n)
        yield* Effect.sleep(10 * blockTimeMs)
        assert.strictEqual(yield* head(), settled)

        // Twelve seconds after the last block, one empty block for the chain's clock, and only one.
        const lastBlock = yield* Effect.promise(() => reader.getBlock({ blockNumber: settled }))
        yield* Effect.sleep(Math.max(0, Number(lastBlock.timestamp) * 1000 + 12_000 - Date.now()) + 2_000)
        assert.strictEqual(yield* head(), settled + 1n)
        const clockBlock = yield* Effect.promise(() => reader.getBlock({ blockNumber: settled + 1n }))
        assert.strictEqual(clockBlock.transactions.length, 0)
        assert.isAtLeast(Number(clockBlock.timestamp - lastBlock.timestamp), 11)
      }).pipe(Effect.provide(devChainIn(dataDir, { chainConfirmations: 3 })))
    ), { timeout: 60_000 })

  it.live("a transaction left waiting in a leftover node is mined before the node is stopped, and kept", () =>
    withDataDir((dataDir) =>
      Effect.gen(function*() {
        // What a server killed between a send and its miner's next round leaves: an on-demand node
        // with a transaction in its pool, and its pid file.
        const chainDir = path.join(dataDir, "chain")
        fs.mkdirSync(chainDir, { recursive: true })
        const leftover = yield* Effect.promise(() =>
          Anvil.start({ chainId: chainIdOfMode.test, mining: "onDemand", statePath: path.join(chainDir, "state.json"), stateIntervalSeconds: 5 })
        )
        fs.writeFileSync(path.join(chainDir, "anvil.pid"), String(leftover.pid))
        const hash = yield* Effect.promise(() =>
          clientsOf(leftover.rpcUrl).wallet.sendTransaction({ to: "0x000000000000000000000000000000000000dEaD", value: 1n })
        )
        yield* Effect.gen(function*() {
          const rpcUrl = Option.getOrThrow((yield* DevChain).rpcUrl)
          assert.notStrictEqual(rpcUrl, leftover.rpcUrl)
          const receipt = yield* Effect.promise(() => clientsOf(rpcUrl).reader.getTransactionReceipt({ hash }))
          assert.strictEqual(receipt.status, "success")
        }).pipe(Effect.provide(devChainIn(dataDir, {})))
        yield* Effect.promise(() => leftover.stop())
      })
    ), { timeout: 60_000 })
})
