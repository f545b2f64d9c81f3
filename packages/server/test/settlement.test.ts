/**
 * Settlement against real embedded anvil and PGlite: the contracts are deployed
 * once per data directory, guardian-signed confidential transfers submitted
 * concurrently through the relayer pool are all mined and add up on chain, a
 * resubmission of the same id sends nothing, and a transfer the contract refuses
 * ends `failed`.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ConfidentialTokenArtifact } from "@pps/contracts"
import { ElGamal, Point } from "@pps/crypto"
import { assert, describe as suite, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { SqlClient } from "effect/sql"
import { privateKeyToAddress } from "viem/accounts"
import { Settlement } from "../src/settlement/Settlement.ts"
import { keyPairFrom, makeTestGuardian, scalarFrom, settlementLayer, signedConfidentialTransfer } from "./support/chainFixtures.ts"

const guardian = makeTestGuardian("settlement-test")
const describe = (outcome: Option.Option<{ readonly _tag: string }>) =>
  Option.match(outcome, { onNone: () => "still pending", onSome: (o) => o._tag })
const address = (label: string) => privateKeyToAddress(`0x${Buffer.from(scalarFrom(label)).toString("hex")}`)

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
        const senders = Array.from({ length: 8 }, (_, i) => ({ address: address(`sender-${i}`), key: keyPairFrom(`sender-${i}`) }))
        const requests = Array.from({ length: 32 }, (_, i) => {
          const sender = senders[i % senders.length]!
          return signedConfidentialTransfer({
            label: `batch-${i}`,
            guardian,
            chainId: chain.chainId,
            contract: chain.contracts.confidentialUsdg,
            from: sender.address,
            to: recipient,
            fromKey: sender.key,
            toKey: recipientKey,
            amount: BigInt(1_000 + i),
            nonce: BigInt(Math.floor(i / senders.length)),
            deadlineSeconds: now + 600n
          })
        })
        yield* Effect.forEach(requests, (request) => settlement.submit(request), { concurrency: 16, discard: true })
        // The same ids again: recorded already, nothing is sent.
        yield* Effect.forEach(requests.slice(0, 4), (request) => settlement.submit(request), { discard: true })
        const outcomes = yield* Effect.forEach(requests, (request) => settlement.awaitResolution(request.submissionId, 30_000), {
          concurrency: "unbounded"
        })
        for (const outcome of outcomes) {
          assert.isTrue(Option.isSome(outcome) && outcome.value._tag === "Confirmed", describe(outcome))
        }
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
        // Exactly one transaction per transfer.
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ n: string }>`SELECT count(DISTINCT tx_hash)::text AS n FROM chain_submissions WHERE status = 'confirmed'`
        assert.strictEqual(rows[0]?.n, "32")

        // A replayed nonce: the contract refuses it, the submission fails.
        const replay = signedConfidentialTransfer({
          label: "replay",
          guardian,
          chainId: chain.chainId,
          contract: chain.contracts.confidentialUsdg,
          from: senders[0]!.address,
          to: recipient,
          fromKey: senders[0]!.key,
          toKey: recipientKey,
          amount: 5n,
          nonce: 0n,
          deadlineSeconds: now + 600n
        })
        yield* settlement.submit(replay)
        const refused = yield* settlement.awaitResolution(replay.submissionId, 30_000)
        assert.isTrue(Option.isSome(refused) && refused.value._tag === "Failed", describe(refused))

        // Reverted with its nonce unused (signed by a stranger, not the guardian): until the
        // deadline anyone could still get a valid attestation of this shape mined, so it stays
        // pending (D14: failed moves no funds), and fails once the chain's time passes it.
        const latest = (yield* Effect.promise(() => chain.client.getBlock())).timestamp
        const forged = signedConfidentialTransfer({
          label: "forged",
          guardian: makeTestGuardian("not-the-guardian"),
          chainId: chain.chainId,
          contract: chain.contracts.confidentialUsdg,
          from: senders[1]!.address,
          to: recipient,
          fromKey: senders[1]!.key,
          toKey: recipientKey,
          amount: 5n,
          nonce: 99n,
          deadlineSeconds: latest + 3n
        })
        yield* settlement.submit(forged)
        const early = yield* settlement.awaitResolution(forged.submissionId, 1_000)
        assert.isTrue(Option.isNone(early), describe(early))
        const late = yield* settlement.awaitResolution(forged.submissionId, 30_000)
        assert.isTrue(Option.isSome(late) && late.value._tag === "Failed", describe(late))
        return chain.contracts
      }).pipe(Effect.provide(settlementLayer(dataDir, guardian)))

      // A restart on the same data dir reuses the deployed contracts.
      const secondRun = yield* Effect.gen(function*() {
        const settlement = yield* Settlement
        return Option.getOrThrow(settlement.chain("test")).contracts
      }).pipe(Effect.provide(settlementLayer(dataDir, guardian)))
      assert.deepStrictEqual(secondRun, firstRun)
    }).pipe(Effect.scoped), { timeout: 120_000 })
})

