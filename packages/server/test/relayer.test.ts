/**
 * A relayer's nonces against real embedded anvil. Signatures run ahead of their
 * broadcasts (the submission's record is written in between), so the node's count of
 * pending transactions lags the relayer's: a nonce must never be handed out twice on
 * the node's word, or two transactions share it, the node refuses one ("replacement
 * transaction underpriced") and its transfer is held up. A nonce signed and never sent
 * is handed out again, or filled, so the relayer's later transactions do not wait on it; so
 * is one an earlier process recorded and a restarted one adopts.
 * And a relayer's next transaction that anvil's pool holds "queued" although its nonce is
 * the one the chain expects (a race in the pool under load) is sent again in nonce order.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Option } from "effect"
import type { Hex } from "viem"
import { privateKeyToAccount, privateKeyToAddress } from "viem/accounts"
import { type Relayer, makeRelayer, type SignedCall } from "../src/settlement/Relayer.ts"
import type { ChainContext } from "../src/settlement/Chains.ts"
import { SettlementLimits } from "../src/settlement/domain.ts"
import { Settlement } from "../src/settlement/Settlement.ts"
import {
  advanceEngineClock,
  engineClockTick,
  keyPairFrom,
  makeTestGuardian,
  onEmbeddedChain,
  onEmbeddedChainOnTestClock,
  scalarFrom,
  signedConfidentialTransfer
} from "./support/chainFixtures.ts"
import { eventually } from "./support/webhooks-receiver.ts"

const guardian = makeTestGuardian("relayer-test")

/** How long (real time) a wait may take on a loaded two-core machine. */
const waitRealMs = 60_000

/** What the relayer tests do on the chain: fund an account of their own, send, wait for a receipt. */
const onChain = (chain: ChainContext) =>
  Effect.gen(function*() {
    const client = chain.client
    const baseFee = (yield* Effect.promise(() => client.getBlock())).baseFeePerGas ?? 1n
    const funded = (label: string) =>
      Effect.gen(function*() {
        const account = privateKeyToAccount(`0x${Buffer.from(scalarFrom(label)).toString("hex")}`)
        yield* Effect.promise(() =>
          client.request({ method: "anvil_setBalance" as never, params: [account.address, `0x${(10n ** 20n).toString(16)}`] as never })
        )
        return account
      })
    const send = (signed: SignedCall) => Effect.promise(() => client.sendRawTransaction({ serializedTransaction: signed.rawTx }))
    const mined = (signed: SignedCall) =>
      Effect.promise(() => client.waitForTransactionReceipt({ hash: signed.txHash, timeout: 20_000 })).pipe(
        Effect.map((receipt) => receipt.status)
      )
    const minedNonce = (address: Hex) => Effect.promise(() => client.getTransactionCount({ address, blockTag: "latest" }))
    return { baseFee, funded, send, mined, minedNonce }
  })

describe("relayer nonces on embedded anvil", () => {
  it.live("never twice while a transaction may still be broadcast; a released nonce is taken again or filled", () =>
    onEmbeddedChain(guardian, {}, (chain) => Effect.gen(function*() {
      const client = chain.client
      const { baseFee, funded, mined, send } = yield* onChain(chain)
      // An account of its own: the settlement's relayers never sign for it.
      const account = yield* funded("relayer-test-account")
      const relayer: Relayer = yield* makeRelayer(client, chain.chainId, account, () => baseFee)
      const call = { to: account.address, data: "0x" as Hex, gas: 21_000n }

      // Signed, not yet broadcast; then the node says a nonce of ours is taken (another
      // transaction's "nonce too low"). The node counts 0 pending: the next signature must
      // still not reuse the first one's nonce.
      const first = yield* relayer.sign(call)
      yield* relayer.catchUp
      const second = yield* relayer.sign(call)
      assert.strictEqual(second.nonce, first.nonce + 1, "a nonce held by a transaction not yet broadcast is not handed out again")
      // Broadcast out of order, as concurrent sends may be: both are taken and mined.
      yield* send(second)
      yield* send(first)
      assert.deepStrictEqual([yield* mined(first), yield* mined(second)], ["success", "success"])

      // Signed and never sent (its record failed): released, the next signature takes it.
      const unsent = yield* relayer.sign(call)
      const after = yield* relayer.sign(call)
      yield* relayer.release(unsent)
      const reused = yield* relayer.sign(call)
      assert.strictEqual(reused.nonce, unsent.nonce, "the released nonce is handed out again")
      const next = yield* relayer.sign(call)
      assert.strictEqual(next.nonce, after.nonce + 1, "and then the relayer goes on where it was")
      yield* send(after)
      yield* send(next)
      yield* send(reused)
      assert.deepStrictEqual([yield* mined(reused), yield* mined(after), yield* mined(next)], ["success", "success", "success"])

      // Released with no signature coming: the later transaction waits on it until a filler takes it.
      const lost = yield* relayer.sign(call)
      const waiting = yield* relayer.sign(call)
      yield* relayer.release(lost)
      yield* send(waiting)
      assert.isTrue(relayer.hasGaps(), "the released nonce is a gap to fill")
      const minedNonce = yield* Effect.promise(() => client.getTransactionCount({ address: account.address, blockTag: "latest" }))
      assert.strictEqual(minedNonce, lost.nonce, "the chain waits on the released nonce")
      yield* relayer.fillGaps(minedNonce, 4, (filler) => send(filler).pipe(Effect.asVoid))
      assert.strictEqual(yield* mined(waiting), "success")
      const afterFill = yield* relayer.sign(call)
      assert.strictEqual(afterFill.nonce, waiting.nonce + 1, "a filled nonce is not handed out again")
    })), 120_000)

  it.live("after a restart: an adopted transaction keeps its nonce, its expiry is a gap filled, and a nonce never recorded below it is taken again or filled", () =>
    onEmbeddedChain(guardian, {}, (chain) => Effect.gen(function*() {
      const client = chain.client
      const { baseFee, funded, mined, minedNonce, send } = yield* onChain(chain)

      // The earlier process signed and recorded a transaction, and died before its broadcast.
      const account = yield* funded("relayer-restart-account")
      const call = { to: account.address, data: "0x" as Hex, gas: 21_000n }
      const earlier = yield* makeRelayer(client, chain.chainId, account, () => baseFee)
      const recorded = yield* earlier.sign(call)
      // The new process adopts it (recovery) and signs: the node counts no pending transaction,
      // yet the recorded one's nonce is not handed out again.
      const later = yield* makeRelayer(client, chain.chainId, account, () => baseFee)
      yield* later.adopt(recorded)
      const next = yield* later.sign(call)
      assert.strictEqual(next.nonce, recorded.nonce + 1, "the adopted transaction's nonce is not handed out again")
      yield* send(next)
      // The recorded one expires unsent: a gap this process knows, filled so the next is mined.
      yield* later.noteGap(recorded.txHash)
      assert.isTrue(later.hasGaps(), "an adopted transaction's expiry is a gap")
      assert.strictEqual(yield* minedNonce(account.address), recorded.nonce, "the chain waits on the adopted transaction's nonce")
      yield* later.fillGaps(yield* minedNonce(account.address), 4, (filler) => send(filler).pipe(Effect.asVoid))
      assert.strictEqual(yield* mined(next), "success")

      // The earlier process signed a nonce it never recorded (its record failed) and the next
      // one, recorded; a restarted relayer adopts the recorded one, which is sent.
      const afterLostRecord = (signer: typeof account, signed: typeof call) =>
        Effect.gen(function*() {
          const earlierProcess = yield* makeRelayer(client, chain.chainId, signer, () => baseFee)
          const lostNonce = yield* earlierProcess.sign(signed)
          const recordedOne = yield* earlierProcess.sign(signed)
          const restartedOne = yield* makeRelayer(client, chain.chainId, signer, () => baseFee)
          yield* restartedOne.adopt(recordedOne)
          yield* send(recordedOne)
          return { lost: lostNonce, recorded: recordedOne, restarted: restartedOne }
        })
      // The recorded one waits on the lost nonce: the next signature takes that nonce.
      const { lost, recorded: recordedAbove, restarted } = yield* afterLostRecord(account, call)
      const taken = yield* restarted.sign(call)
      assert.strictEqual(taken.nonce, lost.nonce, "the nonce nothing known holds is handed out again first")
      const after = yield* restarted.sign(call)
      assert.strictEqual(after.nonce, recordedAbove.nonce + 1, "then the relayer goes on above the adopted one")
      yield* send(taken)
      yield* send(after)
      assert.deepStrictEqual([yield* mined(taken), yield* mined(recordedAbove), yield* mined(after)], ["success", "success", "success"])

      // The same with no signature coming: the filler takes the lost nonce.
      const other = yield* funded("relayer-restart-other")
      const otherCall = { to: other.address, data: "0x" as Hex, gas: 21_000n }
      const { lost: otherLost, recorded: otherRecorded, restarted: otherLater } = yield* afterLostRecord(other, otherCall)
      assert.strictEqual(yield* minedNonce(other.address), otherLost.nonce, "the recorded transaction waits on the lost nonce")
      yield* otherLater.fillGaps(yield* minedNonce(other.address), 4, (filler) => send(filler).pipe(Effect.asVoid))
      assert.strictEqual(yield* mined(otherRecorded), "success", "filled, the recorded transaction is mined")
    })), 120_000)

  it.live("a relayer's next transaction the node's pool holds is sent again in nonce order, and every transfer confirms", () =>
    // The engine on a TestClock (the node and the database on the live one): its held-pool check
    // and its rebroadcast age pass when the test moves its clock, not in real seconds.
    onEmbeddedChainOnTestClock(guardian, { relayerCount: 1, embeddedChainMining: "interval" }, (chain) => Effect.gen(function*() {
      const settlement = yield* Settlement
      const client = chain.client
      const anvil = (method: string, params: ReadonlyArray<unknown>) =>
        Effect.promise(() => client.request({ method: method as never, params: params as never }))
      /** Waits (in real time; with `tick`, moving the engine's clock too) until the node's pool holds `count` `kind`. */
      const poolHolds = (kind: "pending" | "queued", count: number, tick?: Effect.Effect<void>) =>
        eventually(
          anvil("txpool_status", []).pipe(
            Effect.map((status) => Number((status as { readonly pending: Hex; readonly queued: Hex })[kind]) === count ? true : undefined)
          ),
          `the pool holding ${count} ${kind}`,
          { timeoutMs: waitRealMs, ...(tick === undefined ? {} : { tick }) }
        )
      const relayer = chain.relayers[0]!.address
      const address = (label: string) => privateKeyToAddress(`0x${Buffer.from(scalarFrom(label)).toString("hex")}`)
      const now = (yield* Effect.promise(() => client.getBlock())).timestamp
      const request = (i: number) =>
        signedConfidentialTransfer({
          label: `held-${i}`,
          guardian,
          chainId: chain.chainId,
          contract: chain.contracts.confidentialUsdg,
          from: address("held-sender"),
          to: address("held-recipient"),
          fromKey: keyPairFrom("held-sender"),
          fromSigningKey: scalarFrom("held-sender"),
          toKey: keyPairFrom("held-recipient"),
          amount: BigInt(100 + i),
          nonce: BigInt(i),
          deadlineSeconds: now + 600n
        })
      const engineStartedMs = yield* Clock.currentTimeMillis

      // Mining paused. The first transaction reaches the pool, and the node loses it.
      yield* anvil("evm_setIntervalMining", [0])
      const first = request(0)
      yield* settlement.submit(first)
      yield* poolHolds("pending", 1)
      const lostNonce = yield* Effect.promise(() => client.getTransactionCount({ address: relayer, blockTag: "latest" }))
      yield* anvil("anvil_removePoolTransactions", [relayer])
      // The next two wait for the lost one: queued.
      const second = request(1)
      const third = request(2)
      yield* settlement.submit(second)
      yield* poolHolds("queued", 1)
      yield* settlement.submit(third)
      yield* poolHolds("queued", 2)
      // The chain passes the lost nonce without it: the second now carries the very nonce the chain
      // expects, and the pool still holds it queued, as anvil's race leaves a transaction.
      yield* anvil("anvil_setNonce", [relayer, `0x${(lostNonce + 1).toString(16)}`])
      yield* anvil("anvil_mine", ["0x2"])
      yield* poolHolds("queued", 2)

      // Past the held check's age (SettlementLimits.heldCheckAfterMs), well before the 15-s
      // rebroadcast age, the second and third are sent again in nonce order: the node takes them
      // (pending), a block mines them, and they confirm while the engine's clock is still short
      // of the rebroadcast age.
      yield* advanceEngineClock(SettlementLimits.heldCheckAfterMs + 1_000)
      yield* poolHolds("pending", 2, engineClockTick)
      yield* anvil("anvil_mine", ["0x1"])
      const outcomeOf = (r: typeof first) => settlement.awaitResolution(r.submissionId, 0).pipe(Effect.map(Option.getOrUndefined))
      const confirmed = (r: typeof first, what: string) =>
        eventually(outcomeOf(r), what, { tick: engineClockTick, timeoutMs: waitRealMs }).pipe(
          Effect.map((outcome) => assert.strictEqual(outcome._tag, "Confirmed", what))
        )
      yield* confirmed(second, "the second's outcome")
      yield* confirmed(third, "the third's outcome")
      const heldResentAfterMs = (yield* Clock.currentTimeMillis) - engineStartedMs
      assert.isBelow(heldResentAfterMs, SettlementLimits.rebroadcastAfterMs, "sent again and confirmed before the rebroadcast age")

      // The first, its nonce spent, is signed anew once it reaches the rebroadcast age, and confirms.
      yield* anvil("evm_setIntervalMining", [1])
      yield* advanceEngineClock(SettlementLimits.rebroadcastAfterMs)
      yield* confirmed(first, "the first's outcome")
    })), 180_000)
})

