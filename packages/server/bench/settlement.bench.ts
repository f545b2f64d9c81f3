/**
 * Settlement throughput against embedded anvil (docs/benchmarks.md):
 * confidential transfers/s sustained by the adapter (Settlement.submit →
 * confirmed) and submit→confirmed latency p50/p99, beside anvil's raw rate for
 * the same kind of transfers in the same run (pre-signed raw transactions blasted
 * from fresh accounts). Ciphertexts and attestations are computed before timing
 * starts: this measures the chain path, not the crypto.
 *
 * Run: `pnpm --filter @pps/server bench:settlement` (BENCH_TRANSFERS, default 2000;
 * BENCH_BLOCK_TIME_MS, default 1000; BENCH_CONCURRENCY, default 64; BENCH_BATCH_MAX, the
 * adapter's SETTLEMENT_BATCH_MAX, default 32: 1 sends every transfer on its own). The figures are
 * appended to docs/benchmarks/results.jsonl (scripts/benchRecord.ts) unless `--no-record`.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Backend } from "@pps/crypto"
import { Effect, Logger, Option } from "effect"
import { SqlClient } from "effect/sql"
import { privateKeyToAddress } from "viem/accounts"
import { Settlement } from "../src/settlement/Settlement.ts"
import { rawAnvilRate } from "./rawAnvilRate.ts"
import { keyPairFrom, makeTestGuardian, scalarFrom, settlementLayer, signedConfidentialTransfer } from "../test/support/chainFixtures.ts"
import { recordResults } from "../../../scripts/benchRecord.ts"

const transfers = Number(process.env["BENCH_TRANSFERS"] ?? "2000")
const blockTimeMs = Number(process.env["BENCH_BLOCK_TIME_MS"] ?? "1000")
const concurrency = Number(process.env["BENCH_CONCURRENCY"] ?? "64")
const batchMax = Number(process.env["BENCH_BATCH_MAX"] ?? "32")
const sendersCount = 32

const percentile = (sorted: ReadonlyArray<number>, p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0

const program = Effect.gen(function*() {
  yield* Effect.promise(() => Backend.init({ backend: "mcl" }))
  const settlement = yield* Settlement
  const chain = Option.getOrThrow(settlement.chain("test"))
  const guardian = makeTestGuardian("bench")
  const recipient = privateKeyToAddress(`0x${Buffer.from(scalarFrom("bench/recipient")).toString("hex")}`)
  const recipientKey = keyPairFrom("bench/recipient")
  const now = (yield* Effect.promise(() => chain.client.getBlock())).timestamp
  const batch = (tag: string) =>
    Array.from({ length: transfers }, (_, i) => {
      const label = `bench/${tag}/sender-${i % sendersCount}`
      return signedConfidentialTransfer({
        label: `bench-${tag}-${i}`,
        guardian,
        chainId: chain.chainId,
        contract: chain.contracts.confidentialUsdg,
        from: privateKeyToAddress(`0x${Buffer.from(scalarFrom(label)).toString("hex")}`),
        to: recipient,
        fromKey: keyPairFrom(label),
        fromSigningKey: scalarFrom(label),
        toKey: recipientKey,
        amount: BigInt(i + 1),
        nonce: BigInt(Math.floor(i / sendersCount)),
        deadlineSeconds: now + 3_600n
      })
    })

  // 1. anvil's raw rate for the same kind of transfers.
  const rawRate = yield* rawAnvilRate(chain, batch("raw"), concurrency)

  // 2. the adapter: Settlement.submit, then the confirmed outcome.
  const adapterRequests = batch("adapter")
  const latencies: Array<number> = []
  const adapterStart = Date.now()
  yield* Effect.forEach(adapterRequests, (request) =>
    Effect.gen(function*() {
      const started = Date.now()
      yield* settlement.submit(request)
      const outcome = yield* settlement.awaitResolution(request.submissionId, 120_000)
      if (Option.isNone(outcome) || outcome.value._tag !== "Confirmed") throw new Error(`not confirmed: ${request.submissionId}`)
      latencies.push(Date.now() - started)
    }), { concurrency, discard: true })
  const adapterSeconds = (Date.now() - adapterStart) / 1000
  const sql = yield* SqlClient.SqlClient
  const [sent] = yield* sql<{ transactions: string; broadcasts: string }>`
    SELECT count(DISTINCT tx_hash)::text AS transactions, sum(broadcasts)::text AS broadcasts
    FROM chain_submissions WHERE submission_id LIKE 'tr_bench-adapter-%'`
  latencies.sort((a, b) => a - b)
  const adapterRate = transfers / adapterSeconds
  const settings = `concurrency ${concurrency}, batch max ${batchMax}, ${blockTimeMs} ms blocks`
  recordResults("settlement", [
    // The transfers benchmark's goal is ≥ 500 transfers/s end to end; the adapter alone must at least reach it.
    { metric: `adapter transfers/s (${settings})`, value: adapterRate, unit: "transfers/s", goal: ">= 500", headline: true },
    { metric: `anvil raw transfers/s (${settings})`, value: rawRate, unit: "transfers/s" },
    { metric: `adapter ÷ anvil raw (${settings})`, value: adapterRate / rawRate, unit: "ratio", headline: true },
    { metric: `submit → confirmed p50 (${settings})`, value: percentile(latencies, 0.5), unit: "ms" },
    { metric: `submit → confirmed p99 (${settings})`, value: percentile(latencies, 0.99), unit: "ms" },
    { metric: `transfers per transaction (${settings})`, value: transfers / Number(sent?.transactions), unit: "transfers" }
  ])

  const cpu = os.cpus()[0]?.model ?? "unknown CPU"
  process.stdout.write(
    [
      `machine: ${os.cpus().length} vCPU ${cpu}, node ${process.version}, ${new Date().toISOString().slice(0, 10)}`,
      `settings: ${transfers} transfers, block time ${blockTimeMs} ms, gas limit 1e9, ${chain.relayers.length} relayers, concurrency ${concurrency}, batch max ${batchMax}`,
      `| path | transfers/s | submit→confirmed p50 ms | p99 ms |`,
      `|---|---:|---:|---:|`,
      `| anvil raw (pre-signed, 8 senders) | ${rawRate.toFixed(0)} | | |`,
      `| Settlement adapter | ${(transfers / adapterSeconds).toFixed(0)} | ${percentile(latencies, 0.5)} | ${percentile(latencies, 0.99)} |`,
      `adapter / raw: ${((transfers / adapterSeconds) / rawRate).toFixed(2)}`,
      `adapter transactions: ${sent?.transactions} for ${transfers} transfers (${(transfers / Number(sent?.transactions)).toFixed(1)} per transaction), row broadcasts ${sent?.broadcasts}`
    ].join("\n") + "\n"
  )
})

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-bench-"))
program.pipe(
  Effect.provide(settlementLayer(dataDir, makeTestGuardian("bench"), { chainBlockTimeMs: blockTimeMs, relayerCount: 8, settlementBatchMax: batchMax })),
  Effect.provide(Logger.layer([])),
  Effect.scoped,
  Effect.runPromise
).then(
  () => {
    fs.rmSync(dataDir, { recursive: true, force: true })
    process.exit(0)
  },
  (error: unknown) => {
    process.stderr.write(`${String(error)}\n`)
    process.exit(1)
  }
)
