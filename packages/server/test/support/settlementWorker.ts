/**
 * A process that submits a fixed batch of guardian-signed confidential transfers
 * through Settlement and waits for every outcome, for the crash test: the test
 * kills it with SIGKILL mid-batch and starts it again on the same data dir.
 *
 * The batch is a pure function of its seed, so the second run rebuilds the very
 * same requests: those recorded already are not submitted again, and recovery
 * resolves those in flight. Prints `submitted N` as it goes and finally one
 * `result {json}` line.
 *
 * Environment: DATA_DIR, BATCH_SIZE, SEED.
 */
import { Backend } from "@pps/crypto"
import { Effect, Logger, Option } from "effect"
import { SqlClient } from "effect/sql"
import { privateKeyToAddress } from "viem/accounts"
import { Settlement } from "../../src/settlement/Settlement.ts"
import { keyPairFrom, makeTestGuardian, scalarFrom, settlementLayer, signedConfidentialTransfer } from "./chainFixtures.ts"

const dataDir = process.env["DATA_DIR"]!
const batchSize = Number(process.env["BATCH_SIZE"] ?? "500")
const seed = process.env["SEED"] ?? "crash"
const sendersCount = 16
/** Far in the future relative to the chain's clock: the attestations stay valid across the restart. */
const deadlineSeconds = 4_000_000_000n

const program = Effect.gen(function*() {
  yield* Effect.promise(() => Backend.init({ backend: "mcl" }))
  const settlement = yield* Settlement
  const chain = Option.getOrThrow(settlement.chain("test"))
  const guardian = makeTestGuardian(seed)
  const recipientKey = keyPairFrom(`${seed}/recipient`)
  const recipient = privateKeyToAddress(`0x${Buffer.from(scalarFrom(`${seed}/recipient`)).toString("hex")}`)
  const senders = Array.from({ length: sendersCount }, (_, i) => {
    const label = `${seed}/sender-${i}`
    return { address: privateKeyToAddress(`0x${Buffer.from(scalarFrom(label)).toString("hex")}`), key: keyPairFrom(label), signingKey: scalarFrom(label) }
  })
  const requests = Array.from({ length: batchSize }, (_, i) => {
    const sender = senders[i % sendersCount]!
    return signedConfidentialTransfer({
      label: `${seed}-${i}`,
      guardian,
      chainId: chain.chainId,
      contract: chain.contracts.confidentialUsdg,
      from: sender.address,
      to: recipient,
      fromKey: sender.key,
      fromSigningKey: sender.signingKey,
      toKey: recipientKey,
      amount: BigInt(i + 1),
      nonce: BigInt(Math.floor(i / sendersCount)),
      deadlineSeconds
    })
  })
  let submitted = 0
  yield* Effect.forEach(requests, (request) =>
    settlement.submit(request).pipe(Effect.tap(() =>
      Effect.sync(() => {
        submitted += 1
        if (submitted % 25 === 0) process.stdout.write(`submitted ${submitted}\n`)
      })
    // 64 at once over 8 relayers: submissions queue behind busy relayers and leave in batches
    // (SETTLEMENT_BATCH_MAX), so the kill lands among batch transactions as well as single ones.
    )), { concurrency: 64, discard: true })
  const outcomes = yield* Effect.forEach(requests, (request) => settlement.awaitResolution(request.submissionId, 120_000), {
    concurrency: "unbounded"
  })
  const sql = yield* SqlClient.SqlClient
  const open = yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM chain_submissions WHERE status IN ('recorded', 'sent')`
  const confirmed = outcomes.filter((o) => Option.isSome(o) && o.value._tag === "Confirmed").length
  const failed = outcomes.filter((o) => Option.isSome(o) && o.value._tag === "Failed").length
  process.stdout.write(`result ${JSON.stringify({
    confirmed,
    failed,
    pending: outcomes.length - confirmed - failed,
    open: Number(open[0]?.n ?? "-1"),
    contract: chain.contracts.confidentialUsdg,
    rpcUrl: chain.rpcUrl
  })}\n`)
})

program.pipe(
  Effect.provide(settlementLayer(dataDir, makeTestGuardian(seed), { chainBlockTimeMs: 200, relayerCount: 8 })),
  Effect.provide(Logger.layer([])),
  Effect.scoped,
  Effect.runPromise
).then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${String(error)}\n`)
    process.exit(1)
  }
)
