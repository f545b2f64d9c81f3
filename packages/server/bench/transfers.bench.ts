/**
 * Transfers end to end (docs/benchmarks.md): `POST /v1/transfers` → confirmed,
 * in embedded mode (PGlite, in-process guardian, anvil), over real loopback
 * HTTP, at 1, 8 and 64 concurrent clients; then a fixed 100 transfers/s with
 * p99 of the creates that answer `confirmed`; beside anvil's raw rate for the same
 * kind of transfers measured in the same run (on a fresh anvil with the same
 * block time).
 *
 * The clients run in the same Node process as the server (they only send HTTP
 * requests; their keys are made before timing starts), which costs the server
 * some CPU: the figures are a floor.
 *
 * Run: `pnpm --filter @pps/server bench:transfers` (BENCH_BLOCK_TIME_MS, default 100;
 * BENCH_PER_CLIENT, default 10; BENCH_RATE_SECONDS, default 5). The figures are appended to
 * docs/benchmarks/results.jsonl (scripts/benchRecord.ts) unless `--no-record`.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Backend } from "@pps/crypto"
import { Effect, Logger, Option } from "effect"
import { privateKeyToAddress } from "viem/accounts"
import { Settlement } from "../src/settlement/Settlement.ts"
import { keyPairFrom, makeTestGuardian, scalarFrom, settlementLayer, signedConfidentialTransfer } from "../test/support/chainFixtures.ts"
import { registerKey } from "../test/support/confidentialClient.ts"
import { bearer, createAccount, postJson, send } from "../test/support/http.ts"
import { makeTestServer, TestServer } from "../test/support/TestServer.ts"
import { rawAnvilRate } from "./rawAnvilRate.ts"
import { type Metric, recordResults } from "../../../scripts/benchRecord.ts"

const blockTimeMs = Number(process.env["BENCH_BLOCK_TIME_MS"] ?? "100")
const perClient = Number(process.env["BENCH_PER_CLIENT"] ?? "10")
const rateSeconds = Number(process.env["BENCH_RATE_SECONDS"] ?? "5")
const accountsCount = 64

const percentile = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0
}

/** anvil's raw rate on its own fresh node, with guardian-signed transfers like the server's. */
const rawRate = Effect.gen(function*() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-bench-raw-"))
  const guardian = makeTestGuardian("bench-raw")
  const rate = yield* Effect.gen(function*() {
    const settlement = yield* Settlement
    const chain = Option.getOrThrow(settlement.chain("test"))
    const now = (yield* Effect.promise(() => chain.client.getBlock())).timestamp
    const requests = Array.from({ length: 2000 }, (_, i) => {
      const label = `raw/sender-${i % 32}`
      return signedConfidentialTransfer({
        label: `raw-${i}`,
        guardian,
        chainId: chain.chainId,
        contract: chain.contracts.confidentialUsdg,
        from: privateKeyToAddress(`0x${Buffer.from(scalarFrom(label)).toString("hex")}`),
        to: privateKeyToAddress(`0x${Buffer.from(scalarFrom("raw/recipient")).toString("hex")}`),
        fromKey: keyPairFrom(label),
        fromSigningKey: scalarFrom(label),
        toKey: keyPairFrom("raw/recipient"),
        amount: BigInt(i + 1),
        nonce: BigInt(Math.floor(i / 32)),
        deadlineSeconds: now + 3_600n
      })
    })
    return yield* rawAnvilRate(chain, requests, 64)
  }).pipe(Effect.provide(settlementLayer(dataDir, guardian, { chainBlockTimeMs: blockTimeMs })), Effect.scoped)
  fs.rmSync(dataDir, { recursive: true, force: true })
  return rate
})

const program = Effect.gen(function*() {
  yield* Effect.promise(() => Backend.init({ backend: "mcl" }))
  const raw = yield* rawRate
  const server = yield* TestServer
  const accounts = yield* Effect.forEach(Array.from({ length: accountsCount }, (_, i) => i), (i) =>
    Effect.gen(function*() {
      const account = yield* createAccount(server, `bench-${i}`)
      yield* registerKey(server.baseUrl, account.api_key)
      const grant = yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(account.api_key), { amount: "100000" }))
      if (grant.status !== 200) throw new Error(`faucet: ${grant.text}`)
      return account
    }), { concurrency: 8 })

  const transfer = (from: number, to: number) =>
    Effect.gen(function*() {
      const started = performance.now()
      const response = yield* send(
        `${server.baseUrl}/v1/transfers`,
        postJson(bearer(accounts[from]!.api_key), { to: `@bench-${to}`, amount: "0.01" })
      )
      const status = (response.json as { status?: string } | undefined)?.status
      if (response.status !== 201) throw new Error(`transfer: ${response.status} ${response.text}`)
      return { ms: performance.now() - started, confirmed: status === "confirmed" }
    })

  const rows: Array<string> = []
  // The goals of this benchmark: ≥ 500 transfers/s and ≥ 0.5 of anvil's raw rate at 64 clients, p99 ≤ 250 ms at 100/s.
  const metrics: Array<Metric> = [{ metric: "anvil raw rate", value: raw, unit: "transfers/s" }]
  for (const clients of [1, 8, 64]) {
    const started = performance.now()
    const results = yield* Effect.forEach(Array.from({ length: clients }, (_, c) => c), (client) =>
      Effect.forEach(Array.from({ length: perClient }, (_, k) => k), () => transfer(client, (client + 1) % accountsCount)),
      { concurrency: "unbounded" }).pipe(Effect.map((all) => all.flat()))
    const seconds = (performance.now() - started) / 1000
    const confirmed = results.filter((r) => r.confirmed).length
    const latencies = results.map((r) => r.ms)
    rows.push(
      `| ${clients} | ${results.length} | ${(results.length / seconds).toFixed(1)} | ${confirmed} | ${percentile(latencies, 0.5).toFixed(0)} | ${percentile(latencies, 0.99).toFixed(0)} |`
    )
    const most = clients === 64
    metrics.push(
      { metric: `${clients} clients: transfers/s`, value: results.length / seconds, unit: "transfers/s", ...(most ? { goal: ">= 500", headline: true } : {}) },
      ...(most ? [{ metric: "64 clients: ÷ anvil raw rate", value: results.length / seconds / raw, unit: "ratio", goal: ">= 0.5" } as const] : []),
      { metric: `${clients} clients: latency p50`, value: percentile(latencies, 0.5), unit: "ms" },
      { metric: `${clients} clients: latency p99`, value: percentile(latencies, 0.99), unit: "ms" }
    )
  }

  // Open loop at a fixed rate: one create every 10 ms, spread over the 64 accounts.
  const total = 100 * rateSeconds
  const rateStarted = performance.now()
  const fixed = yield* Effect.forEach(Array.from({ length: total }, (_, i) => i), (i) =>
    Effect.gen(function*() {
      const due = rateStarted + i * 10
      const wait = due - performance.now()
      if (wait > 0) yield* Effect.sleep(`${Math.ceil(wait)} millis`)
      return yield* transfer(i % accountsCount, (i + 7) % accountsCount)
    }), { concurrency: "unbounded" })
  const achieved = total / ((performance.now() - rateStarted) / 1000)
  const confirmedLatencies = fixed.filter((r) => r.confirmed).map((r) => r.ms)

  recordResults("transfers", [
    ...metrics,
    { metric: "100/s asked: achieved", value: achieved, unit: "transfers/s" },
    { metric: "100/s asked: answered confirmed", value: confirmedLatencies.length / total, unit: "ratio" },
    { metric: "100/s asked: p99 of those confirmed", value: percentile(confirmedLatencies, 0.99), unit: "ms", goal: "<= 250", headline: true }
  ])
  const cpu = os.cpus()[0]?.model ?? "unknown CPU"
  process.stdout.write([
    `machine: ${os.cpus().length} vCPU ${cpu}, node ${process.version}, ${new Date().toISOString().slice(0, 10)}`,
    `settings: block time ${blockTimeMs} ms, ${accountsCount} accounts, ${perClient} transfers per client, PGlite, in-process guardian`,
    `anvil raw rate (same block time, pre-signed, 64 in flight): ${raw.toFixed(0)} transfers/s`,
    `| clients | transfers | transfers/s | answered confirmed | latency p50 ms | p99 ms |`,
    `|---:|---:|---:|---:|---:|---:|`,
    ...rows,
    `fixed rate: asked 100/s for ${rateSeconds} s, achieved ${achieved.toFixed(1)}/s; ${confirmedLatencies.length}/${total} answered confirmed; p50 ${percentile(confirmedLatencies, 0.5).toFixed(0)} ms, p99 ${percentile(confirmedLatencies, 0.99).toFixed(0)} ms`
  ].join("\n") + "\n")
})

program.pipe(
  Effect.provide(makeTestServer({
    config: { chainBlockTimeMs: blockTimeMs, relayerCount: 8, rateLimitPerSecond: 100_000, rateLimitBurst: 100_000, logLevel: "Warn" }
  })),
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

