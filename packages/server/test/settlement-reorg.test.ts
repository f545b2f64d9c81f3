/**
 * A chain reorganisation under the settlement watcher, on real embedded anvil
 * (`anvil_reorg` replaces the latest blocks; the replaced block's transactions are not put
 * back in the pool). `CHAIN_CONFIRMATIONS` is the depth that guards against a shallow
 * reorganisation, so a transfer seen mined in a block the chain then replaced must not count
 * as confirmed once blocks of the new chain pile up at that height: it is watched again, sent
 * again (the same signed bytes: its relayer nonce is free again) and confirmed from a block
 * the chain keeps.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import type { Hex } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import type { ChainContext } from "../src/settlement/Chains.ts"
import { Settlement } from "../src/settlement/Settlement.ts"
import { SettlementLimits } from "../src/settlement/domain.ts"
import {
  advanceEngineClock,
  engineClockTick,
  makeTestGuardian,
  onEmbeddedChain,
  onEmbeddedChainOnTestClock,
  realPause,
  scalarFrom,
  transferBetweenParties
} from "./support/chainFixtures.ts"
import { eventually } from "./support/webhooks-receiver.ts"

const guardian = makeTestGuardian("reorg-test")

describe("a chain reorganisation under the settlement watcher", () => {
  it.live("a transfer seen mined in a replaced block is not confirmed from it: watched again, sent again, confirmed on the new chain", () =>
    onEmbeddedChain(guardian, { chainConfirmations: 3, relayerCount: 1, embeddedChainMining: "interval" }, (chain) => Effect.gen(function*() {
      const settlement = yield* Settlement
      const client = chain.client
      const anvil = anvilOf(chain)
      const now = (yield* Effect.promise(() => client.getBlock())).timestamp
      const request = transfer(chain, "reorg", now + 600n)

      // Mining paused: the transfer reaches the pool, one block carries it, the watcher sees it.
      yield* anvil("evm_setIntervalMining", [0])
      yield* settlement.submit(request)
      yield* poolHolds(anvil, 1)
      yield* anvil("anvil_mine", ["0x1"])
      const carrier = yield* Effect.promise(() => client.getBlock({ blockTag: "latest" }))
      assert.strictEqual(carrier.transactions.length, 1, "one block carries the transfer")
      // The watcher reads a new block within a round (25 ms here); nothing outside it shows the
      // transfer seen mined, so the test gives it ample time (a shorter wait could only make the
      // test pass without the fix, never fail with it).
      yield* Effect.sleep(3_000)

      // The chain replaces that block with an empty one, then grows: by number the old block
      // would now be three deep.
      yield* anvil("anvil_reorg", [1, []])
      const replaced = yield* Effect.promise(() => client.getBlock({ blockNumber: carrier.number }))
      assert.notStrictEqual(replaced.hash, carrier.hash)
      assert.strictEqual(replaced.transactions.length, 0, "the new chain does not carry the transfer")
      yield* anvil("anvil_mine", ["0x3"])
      const early = yield* settlement.awaitResolution(request.submissionId, 3_000)
      assert.isTrue(Option.isNone(early), `not resolved from a block the chain replaced (${Option.isSome(early) ? early.value._tag : "pending"})`)

      // Blocks again: the transfer, unseen on the new chain, is sent again and confirmed there.
      yield* anvil("evm_setIntervalMining", [1])
      const outcome = yield* settlement.awaitResolution(request.submissionId, 60_000)
      assert.isTrue(Option.isSome(outcome) && outcome.value._tag === "Confirmed", Option.isSome(outcome) ? outcome.value._tag : "still pending")
      const txHash = Option.isSome(outcome) && outcome.value._tag === "Confirmed" ? outcome.value.txHash : undefined
      const receipt = yield* Effect.promise(() => client.getTransactionReceipt({ hash: txHash! }))
      assert.strictEqual(receipt.status, "success", "the confirming transaction is on the chain")
    })), 120_000)

  // On TestClock: the rebroadcast age the relayer's transaction must be unseen for passes on the
  // engine's clock, not in real time.
  it.live("a transfer applied by another transaction counts only at the depth, and not once that transaction's block is replaced", () =>
    onEmbeddedChainOnTestClock(guardian, { chainConfirmations: 3, relayerCount: 1, embeddedChainMining: "interval" }, (chain) => Effect.gen(function*() {
      const settlement = yield* Settlement
      const client = chain.client
      const anvil = anvilOf(chain)
      const deadline = (yield* Effect.promise(() => client.getBlock())).timestamp + 120n
      const request = transfer(chain, "elsewhere", deadline)

      // Mining paused. The relayer's transaction reaches the pool and the node loses it.
      yield* anvil("evm_setIntervalMining", [0])
      yield* settlement.submit(request)
      yield* poolHolds(anvil, 1)
      yield* anvil("anvil_removePoolTransactions", [chain.relayers[0]!.address])
      // Anyone may send an attested call: another account sends the same one, and a block applies it.
      const other = privateKeyToAccount(`0x${Buffer.from(scalarFrom("elsewhere-other")).toString("hex")}`)
      yield* anvil("anvil_setBalance", [other.address, `0x${(10n ** 20n).toString(16)}`])
      const raw = yield* Effect.promise(() =>
        other.signTransaction({
          type: "eip1559",
          chainId: chain.chainId,
          nonce: 0,
          to: request.target,
          data: request.data,
          gas: request.gasLimit,
          maxFeePerGas: 10n ** 11n,
          maxPriorityFeePerGas: 10n ** 9n
        })
      )
      yield* Effect.promise(() => client.sendRawTransaction({ serializedTransaction: raw }))
      yield* anvil("anvil_mine", ["0x1"])
      const applying = yield* Effect.promise(() => client.getBlock({ blockTag: "latest" }))
      assert.strictEqual(applying.transactions.length, 1, "a block applies the transfer")
      // The chain's time passes the deadline one block later: the other transaction is 2 deep of 3.
      yield* anvil("evm_setNextBlockTimestamp", [Number(deadline) + 10])
      yield* anvil("anvil_mine", ["0x1"])
      // Unseen for the rebroadcast age (15 s on the engine's clock) and past its deadline, the
      // relayer's transaction is looked into: the transfer was applied by the other transaction,
      // only 2 deep. The rounds then run on for a few real seconds, time for that look to end.
      yield* advanceEngineClock(SettlementLimits.rebroadcastAfterMs + 1_000)
      for (let round = 0; round < 30; round++) yield* Effect.andThen(engineClockTick, realPause(100))
      const early = yield* settlement.awaitResolution(request.submissionId, 0)
      assert.isTrue(Option.isNone(early), `not resolved from a transaction short of the depth (${Option.isSome(early) ? early.value._tag : "pending"})`)

      // The chain replaces both blocks, the other transaction's with them, and grows past the deadline.
      yield* anvil("anvil_reorg", [2, []])
      const latest = (yield* Effect.promise(() => client.getBlock({ blockTag: "latest" }))).timestamp
      yield* anvil("evm_setNextBlockTimestamp", [Number(latest > deadline ? latest : deadline) + 20])
      yield* anvil("anvil_mine", ["0x3"])
      const outcome = yield* eventually(
        settlement.awaitResolution(request.submissionId, 0).pipe(Effect.map(Option.getOrUndefined)),
        "the transfer's outcome",
        { tick: engineClockTick, timeoutMs: 60_000 }
      )
      assert.strictEqual(outcome._tag, "Failed")
    })), 120_000)
})

/** Anvil's own methods (and any other) on the chain's node. */
const anvilOf = (chain: ChainContext) => (method: string, params: ReadonlyArray<unknown>) =>
  Effect.promise(() => chain.client.request({ method: method as never, params: params as never }))

/** A transfer of 100 between two parties named after `label`, attested by the test guardian. */
const transfer = (chain: ChainContext, label: string, deadlineSeconds: bigint) => transferBetweenParties(guardian, chain, label, deadlineSeconds)

/** Waits until the node's pool holds `count` pending transactions. */
const poolHolds = (anvil: (method: string, params: ReadonlyArray<unknown>) => Effect.Effect<unknown>, count: number) =>
  Effect.gen(function*() {
    for (let tries = 0; tries < 100; tries++) {
      const status = (yield* anvil("txpool_status", [])) as { readonly pending: Hex }
      if (Number(status.pending) === count) return
      yield* realPause(50)
    }
    assert.fail(`the pool never held ${count} pending`)
  })
