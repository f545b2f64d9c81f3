/**
 * Settlement's retries and deadlines on TestClock, against real embedded anvil and PGlite: the
 * engine (its watcher, its rebroadcast age) runs on a TestClock the test moves, and anvil's
 * `evm_setNextBlockTimestamp` moves the chain's own clock where the chain's time decides (an
 * attestation's deadline). Nothing here waits out the 15 s rebroadcast age in real time: the
 * goal is that a lost transaction is sent again exactly when the engine's clock says it is due,
 * not before, and that an unmined transfer fails `expired` only once the chain's time passed its
 * deadline.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, type Scope } from "effect"
import { SqlClient } from "effect/sql"
import type { Hex } from "viem"
import type { AppConfigShape } from "../src/config/AppConfig.ts"
import type { ChainContext } from "../src/settlement/Chains.ts"
import { SettlementLimits } from "../src/settlement/domain.ts"
import { Settlement } from "../src/settlement/Settlement.ts"
import {
  advanceEngineClock,
  engineClockTick,
  makeTestGuardian,
  onEmbeddedChainOnTestClock,
  transferBetweenParties
} from "./support/chainFixtures.ts"
import { eventually } from "./support/webhooks-receiver.ts"

const guardian = makeTestGuardian("settlement-clock-test")

/** How long (real time) a wait may take on a loaded two-core machine. */
const waitRealMs = 60_000

const onClockedChain = <A, E>(
  overrides: Partial<AppConfigShape>,
  body: (chain: ChainContext) => Effect.Effect<A, E, Settlement | SqlClient.SqlClient | Scope.Scope>
) =>
  // These tests hold blocks back themselves (`evm_setIntervalMining`), so the node mines on its interval.
  onEmbeddedChainOnTestClock(guardian, { embeddedChainMining: "interval", ...overrides }, body)
const advance = advanceEngineClock
const tick = engineClockTick

/** Anvil's own methods (and any other) on the chain's node. */
const anvilOf = (chain: ChainContext) => (method: string, params: ReadonlyArray<unknown>) =>
  Effect.promise(() => chain.client.request({ method: method as never, params: params as never }))

/** Transactions the node's pool holds pending. */
const pendingInPool = (chain: ChainContext) =>
  anvilOf(chain)("txpool_status", []).pipe(Effect.map((status) => Number((status as { readonly pending: Hex }).pending)))

/** A transfer of 100 between two parties named after `label`, attested by the test guardian. */
const transfer = (chain: ChainContext, label: string, deadlineSeconds: bigint) => transferBetweenParties(guardian, chain, label, deadlineSeconds)

/** With mining paused, submits `label`'s transfer, waits until the pool holds it, then has the node lose it. */
const submitThenLose = (chain: ChainContext, label: string, deadlineSeconds: bigint) =>
  Effect.gen(function*() {
    const settlement = yield* Settlement
    const anvil = anvilOf(chain)
    const request = transfer(chain, label, deadlineSeconds)
    yield* anvil("evm_setIntervalMining", [0])
    yield* settlement.submit(request)
    yield* eventually(pendingInPool(chain).pipe(Effect.map((n) => n === 1 ? n : undefined)), "the transfer in the pool")
    yield* anvil("anvil_removePoolTransactions", [chain.relayers[0]!.address])
    assert.strictEqual(yield* pendingInPool(chain), 0, "the node lost the transfer")
    return request
  })

/** The submission's outcome if it has one now (no wait). */
const outcomeOf = (settlement: Settlement["Service"], submissionId: string) =>
  settlement.awaitResolution(submissionId, 0).pipe(Effect.map(Option.getOrUndefined))

describe("settlement on TestClock", () => {
  it.live("a transaction the node lost is sent again once unseen for the rebroadcast age on the engine's clock, not before", () =>
    onClockedChain({ chainConfirmations: 1, relayerCount: 1 }, (chain) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const settlement = yield* Settlement
        const now = (yield* Effect.promise(() => chain.client.getBlock())).timestamp
        const request = yield* submitThenLose(chain, "clock-lost", now + 3_600n)

        // A second short of the rebroadcast age: rounds run (and look at the pool for a held
        // transaction), but the lost one is not sent again yet.
        yield* advance(SettlementLimits.rebroadcastAfterMs - 1_000)
        assert.strictEqual(yield* pendingInPool(chain), 0, "not sent again before the rebroadcast age")
        assert.isUndefined(yield* outcomeOf(settlement, request.submissionId))

        // Past the age: the same bytes go out again, and a block confirms them.
        yield* advance(2_000)
        yield* eventually(pendingInPool(chain).pipe(Effect.map((n) => n === 1 ? n : undefined)), "the transfer sent again", {
          tick,
          timeoutMs: waitRealMs
        })
        yield* anvilOf(chain)("anvil_mine", ["0x1"])
        const outcome = yield* eventually(outcomeOf(settlement, request.submissionId), "the transfer's outcome", { tick, timeoutMs: waitRealMs })
        assert.strictEqual(outcome._tag, "Confirmed")
        const rows = yield* sql<{ readonly broadcasts: number }>`
          SELECT broadcasts FROM chain_submissions WHERE submission_id = ${request.submissionId}`
        assert.strictEqual(Number(rows[0]?.broadcasts), 2, "sent once, then once again")
      })), 180_000)

  it.live("an unmined transfer fails `expired` once the chain's time passed its deadline, and only then", () =>
    onClockedChain({ chainConfirmations: 1, relayerCount: 1 }, (chain) =>
      Effect.gen(function*() {
        const anvil = anvilOf(chain)
        const settlement = yield* Settlement
        const now = (yield* Effect.promise(() => chain.client.getBlock())).timestamp
        const deadline = now + 3_600n
        const request = yield* submitThenLose(chain, "clock-expired", deadline)

        // The engine's clock passes the rebroadcast age while the chain's time is before the
        // deadline: the transfer is sent again, not failed.
        yield* advance(SettlementLimits.rebroadcastAfterMs + 1_000)
        yield* eventually(pendingInPool(chain).pipe(Effect.map((n) => n === 1 ? n : undefined)), "the transfer sent again", {
          tick,
          timeoutMs: waitRealMs
        })
        assert.isUndefined(yield* outcomeOf(settlement, request.submissionId), "not failed while the chain's time is before the deadline")

        // The node loses it again, and the chain's clock jumps past the deadline in an empty block.
        yield* anvil("anvil_removePoolTransactions", [chain.relayers[0]!.address])
        yield* anvil("evm_setNextBlockTimestamp", [Number(deadline) + 10])
        yield* anvil("anvil_mine", ["0x1"])
        const outcome = yield* eventually(outcomeOf(settlement, request.submissionId), "the transfer's outcome", { tick, timeoutMs: waitRealMs })
        assert.deepStrictEqual([outcome._tag, outcome._tag === "Failed" ? outcome.reason : "none"], ["Failed", "expired"])
      })), 180_000)
})
