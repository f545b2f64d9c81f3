/**
 * Settlement against real embedded anvil and PGlite: the contracts are deployed
 * once per data directory, guardian-signed confidential transfers submitted
 * concurrently through the relayer pool are all mined and add up on chain, a
 * resubmission of the same id sends nothing, a transfer the contract refuses
 * ends `failed`, and calls recorded in a caller's transaction commit or roll back
 * with it and are signed after a restart if they were never sent.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ConfidentialTokenArtifact, RootHints } from "@pps/contracts"
import { ElGamal, Point } from "@pps/crypto"
import { assert, describe as suite, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { SqlClient } from "effect/sql"
import { decodeFunctionData, type Hex } from "viem"
import { privateKeyToAddress } from "viem/accounts"
import type { ChainContext } from "../src/settlement/Chains.ts"
import type { SubmissionRequest } from "../src/settlement/domain.ts"
import { Settlement } from "../src/settlement/Settlement.ts"
import { keyPairFrom, makeTestGuardian, scalarFrom, settlementLayer, signedConfidentialTransfer } from "./support/chainFixtures.ts"

const guardian = makeTestGuardian("settlement-test")
const describe = (outcome: Option.Option<{ readonly _tag: string }>) =>
  Option.match(outcome, { onNone: () => "still pending", onSome: (o) => o._tag })
const address = (label: string) => privateKeyToAddress(`0x${Buffer.from(scalarFrom(label)).toString("hex")}`)

/** Each transfer id has exactly one ConfidentialTransfer event on chain. */
const expectAppliedOnce = (chain: ChainContext, transferIds: ReadonlyArray<Hex>) =>
  Effect.gen(function*() {
    const logs = yield* Effect.promise(() =>
      chain.client.getContractEvents({
        address: chain.contracts.confidentialUsdg,
        abi: ConfidentialTokenArtifact.abi,
        eventName: "ConfidentialTransfer",
        fromBlock: 0n
      })
    )
    for (const transferId of transferIds) {
      assert.strictEqual(logs.filter((log) => log.args.transferId === transferId).length, 1, transferId)
    }
  })

suite("settlement on embedded anvil", () => {
  it.live("deploys once per data dir, mines concurrent transfers exactly once, and records failures", () =>
    Effect.gen(function*() {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-settle-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true })))

      const firstRun = yield* Effect.gen(function*() {
        const settlement = yield* Settlement
        const chain = Option.getOrThrow(settlement.chain("test"))
        assert.isTrue(Option.isNone(settlement.chain("live")), "no mainnet without RPC_URL_MAINNET")
        assert.strictEqual(chain.chainId, 46630)
        const now = (yield* Effect.promise(() => chain.client.getBlock())).timestamp
        const recipient = address("recipient")
        const recipientKey = keyPairFrom("recipient")
        const senders = Array.from({ length: 8 }, (_, i) => ({ address: address(`sender-${i}`), key: keyPairFrom(`sender-${i}`), signingKey: scalarFrom(`sender-${i}`) }))
        /** A confidential USDG transfer from `sender` to the recipient, attested by `signer`. */
        const transfer = (options: {
          readonly label: string
          readonly sender: (typeof senders)[number]
          readonly amount: bigint
          readonly nonce: bigint
          readonly deadlineSeconds: bigint
          readonly signer?: typeof guardian
        }) =>
          signedConfidentialTransfer({
            label: options.label,
            guardian: options.signer ?? guardian,
            chainId: chain.chainId,
            contract: chain.contracts.confidentialUsdg,
            from: options.sender.address,
            to: recipient,
            fromKey: options.sender.key,
            fromSigningKey: options.sender.signingKey,
            toKey: recipientKey,
            amount: options.amount,
            nonce: options.nonce,
            deadlineSeconds: options.deadlineSeconds
          })
        const requests = Array.from({ length: 32 }, (_, i) =>
          transfer({
            label: `batch-${i}`,
            sender: senders[i % senders.length]!,
            amount: BigInt(1_000 + i),
            nonce: BigInt(Math.floor(i / senders.length)),
            deadlineSeconds: now + 600n
          }))
        yield* Effect.forEach(requests, (request) => settlement.submit(request), { concurrency: 16, discard: true })
        // The same ids again: recorded already, nothing is sent.
        yield* Effect.forEach(requests.slice(0, 4), (request) => settlement.submit(request), { discard: true })
        const outcomes = yield* Effect.forEach(requests, (request) => settlement.awaitResolution(request.submissionId, 30_000), {
          concurrency: "unbounded"
        })
        for (const outcome of outcomes) {
          assert.isTrue(Option.isSome(outcome) && outcome.value._tag === "Confirmed", describe(outcome))
        }
        // An outcome already written is read back from the store at once, not waited for.
        const again = yield* Effect.forEach(requests.slice(0, 4), (request) => settlement.awaitResolution(request.submissionId, 0))
        assert.deepStrictEqual(again, outcomes.slice(0, 4))
        // The recipient's on-chain balance decrypts to the sum of the amounts.
        const balance = yield* Effect.promise(() =>
          chain.client.readContract({
            address: chain.contracts.confidentialUsdg,
            abi: ConfidentialTokenArtifact.abi,
            functionName: "encryptedBalanceOf",
            args: [recipient]
          })
        )
        const point = (p: { x: bigint; y: bigint }) =>
          new Uint8Array(Buffer.from(p.x.toString(16).padStart(64, "0") + p.y.toString(16).padStart(64, "0"), "hex")) as Point.Point
        const expected = requests.reduce((sum, _r, i) => sum + BigInt(1_000 + i), 0n)
        const triple = balance as unknown as { commitment: { x: bigint; y: bigint }; ownerHandle: { x: bigint; y: bigint } }
        assert.isTrue(
          ElGamal.matches(recipientKey.secretKey, point(triple.commitment), point(triple.ownerHandle), expected),
          "the on-chain balance decrypts to the sum"
        )
        // Exactly one applied event per transfer, and each submission confirmed by the transaction
        // that carries it (batches put several transfers in one transaction).
        yield* expectAppliedOnce(chain, requests.map((request) => request.replayKey!.transferId))
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ n: string }>`SELECT count(DISTINCT tx_hash)::text AS n FROM chain_submissions WHERE status = 'confirmed'`
        assert.isTrue(Number(rows[0]?.n) >= 1 && Number(rows[0]?.n) <= 32, rows[0]?.n)

        // A replayed nonce: the contract refuses it, the submission fails.
        const replay = transfer({ label: "replay", sender: senders[0]!, amount: 5n, nonce: 0n, deadlineSeconds: now + 600n })
        yield* settlement.submit(replay)
        const refused = yield* settlement.awaitResolution(replay.submissionId, 30_000)
        assert.isTrue(Option.isSome(refused) && refused.value._tag === "Failed", describe(refused))

        // Reverted with its nonce unused (signed by a stranger, not the guardian): until the
        // deadline anyone could still get a valid attestation of this shape mined, so it stays
        // pending (D14: failed moves no funds), and fails once the chain's time passes it.
        const latest = (yield* Effect.promise(() => chain.client.getBlock())).timestamp
        const forged = transfer({
          label: "forged",
          sender: senders[1]!,
          amount: 5n,
          nonce: 99n,
          deadlineSeconds: latest + 3n,
          signer: makeTestGuardian("not-the-guardian")
        })
        yield* settlement.submit(forged)
        const early = yield* settlement.awaitResolution(forged.submissionId, 1_000)
        assert.isTrue(Option.isNone(early), describe(early))
        const late = yield* settlement.awaitResolution(forged.submissionId, 30_000)
        assert.isTrue(Option.isSome(late) && late.value._tag === "Failed", describe(late))

        // Calls recorded in the caller's transaction (a transfer's record): they commit or roll
        // back with it, and one recorded then submitted is signed once, however often it is submitted.
        const later = (yield* Effect.promise(() => chain.client.getBlock())).timestamp
        const recorded = (nonce: bigint) =>
          transfer({ label: `recorded-${nonce}`, sender: senders[2]!, amount: 7n, nonce, deadlineSeconds: later + 600n })
        const [sent, unsent, rolledBack] = [recorded(10n), recorded(11n), recorded(12n)]
        yield* sql.withTransaction(settlement.record([sent, unsent]))
        const failed = yield* Effect.exit(sql.withTransaction(settlement.record([rolledBack]).pipe(Effect.andThen(Effect.fail("rolled back")))))
        assert.isTrue(failed._tag === "Failure")
        yield* settlement.submitRecorded(sent)
        yield* settlement.submit(sent)
        const sentOutcome = yield* settlement.awaitResolution(sent.submissionId, 30_000)
        assert.isTrue(Option.isSome(sentOutcome) && sentOutcome.value._tag === "Confirmed", describe(sentOutcome))
        yield* expectAppliedOnce(chain, [sent.replayKey!.transferId])
        const gone = yield* sql<{ n: string }>`
          SELECT count(*)::text AS n FROM chain_submissions WHERE submission_id = ${rolledBack.submissionId}`
        assert.strictEqual(gone[0]?.n, "0")
        // `unsent` is left as a crash between the record's commit and the signature leaves it.
        return { contracts: chain.contracts, unsent }
      }).pipe(Effect.provide(settlementLayer(dataDir, guardian)))

      // A restart on the same data dir reuses the deployed contracts, and signs what was
      // recorded and never sent.
      const secondRun = yield* Effect.gen(function*() {
        const settlement = yield* Settlement
        const chain = Option.getOrThrow(settlement.chain("test"))
        const adopted = yield* settlement.awaitResolution(firstRun.unsent.submissionId, 30_000)
        assert.isTrue(Option.isSome(adopted) && adopted.value._tag === "Confirmed", describe(adopted))
        yield* expectAppliedOnce(chain, [firstRun.unsent.replayKey!.transferId])
        return chain.contracts
      }).pipe(Effect.provide(settlementLayer(dataDir, guardian)))
      assert.deepStrictEqual(secondRun, firstRun.contracts)
    }).pipe(Effect.scoped), { timeout: 120_000 })

  it.live("batches what queues while the relayer is busy; each item resolves from its own event", () =>
    Effect.gen(function*() {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-settle-batch-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true })))
      yield* Effect.gen(function*() {
        const settlement = yield* Settlement
        const chain = Option.getOrThrow(settlement.chain("test"))
        const now = (yield* Effect.promise(() => chain.client.getBlock())).timestamp
        const recipientKey = keyPairFrom("batch-recipient")
        const transfer = (label: string, sender: number, nonce: bigint, deadlineSeconds = now + 600n) =>
          signedConfidentialTransfer({
            label,
            guardian,
            chainId: chain.chainId,
            contract: chain.contracts.confidentialUsdg,
            from: address(`batch-sender-${sender}`),
            to: address("batch-recipient"),
            fromKey: keyPairFrom(`batch-sender-${sender}`),
            fromSigningKey: scalarFrom(`batch-sender-${sender}`),
            toKey: recipientKey,
            amount: 7n,
            nonce,
            deadlineSeconds
          })
        // Applied on its own first; then the same call under another submission id rides in a
        // batch, where the contract skips it (nonce used): it resolves from the first transaction.
        const early = transfer("early", 0, 0n)
        yield* settlement.submit(early)
        const first = yield* settlement.awaitResolution(early.submissionId, 30_000)
        assert.isTrue(Option.isSome(first) && first.value._tag === "Confirmed", describe(first))
        // Empty blocks (same timestamp) so that the first transaction's event lies more than two
        // search windows back (SettlementLimits.eventSearchWindowBlocks, 1,000): resolving the
        // skipped copy walks back window by window to find it.
        const blocksBetween = 2_100
        // In requests of 300 blocks: one request of 2,100 took longer than viem's 10-s timeout
        // on CI's loaded cores once.
        for (let mined = 0; mined < blocksBetween; mined += 300) {
          yield* Effect.promise(() =>
            chain.client.request({ method: "anvil_mine" as never, params: [`0x${Math.min(300, blocksBetween - mined).toString(16)}`, "0x0"] as never })
          )
        }
        const again = { ...early, submissionId: "tr_early-again" }
        const stale = transfer("stale", 1, 0n, now - 1n)
        const fresh = Array.from({ length: 22 }, (_, i) => transfer(`fresh-${i}`, 2 + (i % 4), BigInt(Math.floor(i / 4))))
        const all = [...fresh.slice(0, 11), again, stale, ...fresh.slice(11)]
        yield* Effect.forEach(all, (request) => settlement.submit(request), { concurrency: "unbounded", discard: true })
        const outcomes = yield* Effect.forEach(all, (request) => settlement.awaitResolution(request.submissionId, 30_000), {
          concurrency: "unbounded"
        })
        const byId = new Map(all.map((request, i) => [request.submissionId, outcomes[i]!]))
        for (const request of fresh) {
          const outcome = byId.get(request.submissionId)!
          assert.isTrue(Option.isSome(outcome) && outcome.value._tag === "Confirmed", describe(outcome))
        }
        const resolvedAgain = byId.get(again.submissionId)!
        assert.isTrue(Option.isSome(resolvedAgain) && resolvedAgain.value._tag === "Confirmed", describe(resolvedAgain))
        if (Option.isSome(resolvedAgain) && Option.isSome(first) && first.value._tag === "Confirmed") {
          assert.strictEqual(resolvedAgain.value.txHash, first.value.txHash)
          const newest = yield* Effect.promise(() => chain.client.getBlockNumber({ cacheTime: 0 }))
          assert.isAbove(Number(newest - first.value.blockNumber), blocksBetween, "the event was more than two windows back")
        }
        const resolvedStale = byId.get(stale.submissionId)!
        assert.isTrue(Option.isSome(resolvedStale) && resolvedStale.value._tag === "Failed", describe(resolvedStale))
        yield* expectAppliedOnce(chain, [early, ...fresh].map((request) => request.replayKey!.transferId))
        // One relayer: everything after the first send queued behind it and left in batches.
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ n: string }>`
          SELECT count(DISTINCT tx_hash)::text AS n FROM chain_submissions WHERE submission_id LIKE 'tr_fresh-%'`
        assert.isTrue(Number(rows[0]?.n) < fresh.length, `${rows[0]?.n} transactions for ${fresh.length} transfers`)
      }).pipe(Effect.provide(settlementLayer(dataDir, guardian, { relayerCount: 1, settlementBatchMax: 32 })))
    }).pipe(Effect.scoped), { timeout: 120_000 })

  it.live("calls submitted in the same turn leave in one transaction even with every relayer free", () =>
    Effect.gen(function*() {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-settle-turn-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true })))
      yield* Effect.gen(function*() {
        const settlement = yield* Settlement
        const chain = Option.getOrThrow(settlement.chain("test"))
        const now = (yield* Effect.promise(() => chain.client.getBlock())).timestamp
        const recipientKey = keyPairFrom("turn-recipient")
        const turn = (round: number) => Array.from({ length: 6 }, (_, i) =>
          signedConfidentialTransfer({
            label: `turn-${round}-${i}`,
            guardian,
            chainId: chain.chainId,
            contract: chain.contracts.confidentialUsdg,
            from: address(`turn-sender-${i}`),
            to: address("turn-recipient"),
            fromKey: keyPairFrom(`turn-sender-${i}`),
            fromSigningKey: scalarFrom(`turn-sender-${i}`),
            toKey: recipientKey,
            amount: 3n,
            nonce: BigInt(round),
            deadlineSeconds: now + 600n
          }))
        /** Submits the turn's transfers together and returns the one transaction that carried them. */
        const submitTogether = (together: ReadonlyArray<SubmissionRequest>) =>
          Effect.gen(function*() {
            // As the transfers recorded in one transaction submit: all in the same turn.
            yield* Effect.forEach(together, (request) => settlement.submit(request), { concurrency: "unbounded", discard: true })
            const outcomes = yield* Effect.forEach(together, (request) => settlement.awaitResolution(request.submissionId, 30_000), {
              concurrency: "unbounded"
            })
            for (const outcome of outcomes) assert.isTrue(Option.isSome(outcome) && outcome.value._tag === "Confirmed", describe(outcome))
            yield* expectAppliedOnce(chain, together.map((request) => request.replayKey!.transferId))
            // Eight relayers with nothing in flight: without gathering the turn, each call would leave alone.
            const hashes = new Set(outcomes.flatMap((outcome) => Option.isSome(outcome) && outcome.value.txHash !== null ? [outcome.value.txHash] : []))
            assert.strictEqual(hashes.size, 1, `${hashes.size} transactions for ${together.length} transfers submitted together`)
            return [...hashes][0]!
          })
        yield* submitTogether(turn(0))
        // Every party's three points are stored now (the first turn debited each sender and
        // credited the recipient), so the second turn's batch carries their roots (D70): what
        // `encryptedBalancesOf` gave just before its block, each party hinted at its first item.
        const hash = yield* submitTogether(turn(1))
        const transaction = yield* Effect.promise(() => chain.client.getTransaction({ hash }))
        const call = decodeFunctionData({ abi: ConfidentialTokenArtifact.abi, data: transaction.input })
        assert.strictEqual(call.functionName, "confidentialTransferBatch")
        if (call.functionName === "confidentialTransferBatch") {
          const [requests, , , hints] = call.args
          const before = yield* Effect.promise(() =>
            chain.client.readContract({
              address: chain.contracts.confidentialUsdg,
              abi: ConfidentialTokenArtifact.abi,
              functionName: "encryptedBalancesOf",
              args: [RootHints.hintedAccounts(requests)],
              blockNumber: transaction.blockNumber! - 1n
            })
          )
          assert.deepStrictEqual(hints, RootHints.rootHints(requests, before))
          // Six senders' three points each, and the recipient's at its first item.
          assert.strictEqual(hints.filter((hint) => hint !== 0n).length, 6 * 3 + 3)
        }
      }).pipe(Effect.provide(settlementLayer(dataDir, guardian, { relayerCount: 8, settlementBatchMax: 32 })))
    }).pipe(Effect.scoped), { timeout: 120_000 })

  it.live("a relayer nonce whose transaction expired unsent is filled, so the relayer's later transfers are mined", () =>
    Effect.gen(function*() {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-settle-gap-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true })))
      yield* Effect.gen(function*() {
        const settlement = yield* Settlement
        const chain = Option.getOrThrow(settlement.chain("test"))
        const relayer = chain.relayers[0]!.address
        const setBalance = (wei: bigint) =>
          Effect.promise(() => chain.client.request({ method: "anvil_setBalance" as never, params: [relayer, `0x${wei.toString(16)}`] as never }))
        const latest = () => Effect.promise(() => chain.client.getBlock()).pipe(Effect.map((block) => block.timestamp))
        const recipientKey = keyPairFrom("gap-recipient")
        const transfer = (label: string, nonce: bigint, deadlineSeconds: bigint) =>
          signedConfidentialTransfer({
            label,
            guardian,
            chainId: chain.chainId,
            contract: chain.contracts.confidentialUsdg,
            from: address("gap-sender"),
            to: address("gap-recipient"),
            fromKey: keyPairFrom("gap-sender"),
            fromSigningKey: scalarFrom("gap-sender"),
            toKey: recipientKey,
            amount: 3n,
            nonce,
            deadlineSeconds
          })
        const first = transfer("gap-first", 0n, (yield* latest()) + 600n)
        yield* settlement.submit(first)
        const firstOutcome = yield* settlement.awaitResolution(first.submissionId, 30_000)
        assert.isTrue(Option.isSome(firstOutcome) && firstOutcome.value._tag === "Confirmed", describe(firstOutcome))

        // The relayer has no gas funds: the node refuses the next transaction (relayer nonce N)
        // on every broadcast until its deadline passes, and it fails `expired`, never mined.
        yield* setBalance(0n)
        const refused = transfer("gap-refused", 1n, (yield* latest()) + 3n)
        yield* settlement.submit(refused)
        const refusedOutcome = yield* settlement.awaitResolution(refused.submissionId, 45_000)
        assert.isTrue(
          Option.isSome(refusedOutcome) && refusedOutcome.value._tag === "Failed" && refusedOutcome.value.reason === "expired",
          describe(refusedOutcome)
        )
        // The next transfer takes nonce N + 1; funds come back. Without nonce N filled, the chain
        // would hold N + 1 (and everything after it) until its deadline, ten minutes away.
        const after = transfer("gap-after", 2n, (yield* latest()) + 600n)
        yield* settlement.submit(after)
        yield* setBalance(10n ** 19n)
        const afterOutcome = yield* settlement.awaitResolution(after.submissionId, 45_000)
        assert.isTrue(Option.isSome(afterOutcome) && afterOutcome.value._tag === "Confirmed", describe(afterOutcome))
        yield* expectAppliedOnce(chain, [first, after].map((request) => request.replayKey!.transferId))
      }).pipe(Effect.provide(settlementLayer(dataDir, guardian, { relayerCount: 1 })))
    }).pipe(Effect.scoped), { timeout: 150_000 })
})
