/**
 * What one chain call costs the calling process (docs/benchmarks/notes/2026-11-27-chain-calls-without-fetch.md,
 * "Chain calls without fetch"): CPU and wall time per `eth_blockNumber` to a fresh local anvil, through viem's
 * `http` (with and without the 2-ms batch wait the settlement client used) and through
 * `RpcTransport.keepAliveHttp`, one call at a time, then eight different calls at once.
 * Every shape runs twice; the first pass warms up and is dropped.
 *
 * Usage: pnpm --filter @pps/contracts bench:rpc [-- --calls 2000] [--no-record] (the figures are
 * appended to docs/benchmarks/results.jsonl: scripts/benchRecord.ts)
 */
import { parseArgs } from "node:util"
import { createPublicClient, http, type Transport } from "viem"
import * as Anvil from "../src/anvil.ts"
import { keepAliveHttp } from "../src/rpcTransport.ts"
import { type Metric, recordOption, recordResults } from "../../../scripts/benchRecord.ts"

const { values } = parseArgs({
  // pnpm passes a separating `--` on.
  args: process.argv.slice(2).filter((arg) => arg !== "--"),
  options: { calls: { type: "string", default: "2000" }, ...recordOption }
})
const calls = Number(values.calls)
if (!Number.isSafeInteger(calls) || calls < 1) throw new Error("--calls must be a positive integer")

const anvil = await Anvil.start({ blockTimeSeconds: 0.1 })
try {
  const shapes: ReadonlyArray<readonly [string, Transport]> = [
    ["viem http, batch { wait: 2 }", http(anvil.rpcUrl, { retryCount: 0, batch: { batchSize: 200, wait: 2 } })],
    ["viem http", http(anvil.rpcUrl, { retryCount: 0 })],
    ["keepAliveHttp, batchMax 200", keepAliveHttp(anvil.rpcUrl, { batchMax: 200 })],
    ["keepAliveHttp", keepAliveHttp(anvil.rpcUrl)]
  ]
  const rows: Array<string> = []
  const metrics: Array<Metric> = []
  for (const parallel of [1, 8]) {
    for (const [label, transport] of shapes) {
      const client = createPublicClient({ transport, cacheTime: 0 })
      // Eight different calls (balances of eight addresses): viem folds identical calls in flight into one.
      const round = parallel === 1
        ? () => client.getBlockNumber({ cacheTime: 0 })
        : () =>
          Promise.all(Array.from({ length: parallel }, (_, index) =>
            client.getBalance({ address: `0x${(index + 1).toString(16).padStart(40, "0")}` })))
      let cpuUs = 0
      let wallMs = 0
      for (const pass of [0, 1]) {
        const cpu = process.cpuUsage()
        const started = performance.now()
        for (let done = 0; done < calls; done += parallel) await round()
        if (pass === 1) {
          const used = process.cpuUsage(cpu)
          cpuUs = used.user + used.system
          wallMs = performance.now() - started
        }
      }
      rows.push(`| ${label} | ${parallel} | ${Math.round(cpuUs / calls)} | ${Math.round((wallMs * 1000 * parallel) / calls)} |`)
      metrics.push(
        { metric: `${label}, ${parallel} at once: CPU per call`, value: cpuUs / calls, unit: "µs", headline: label === "keepAliveHttp" },
        { metric: `${label}, ${parallel} at once: wall per round`, value: (wallMs * 1000 * parallel) / calls, unit: "µs" }
      )
    }
  }
  process.stdout.write([
    `${calls} calls a shape, Node ${process.version}, ${new Date().toISOString()}`,
    "",
    "| transport | calls at once | CPU µs per call | wall µs per round |",
    "|---|---:|---:|---:|",
    ...rows,
    ""
  ].join("\n"))
  recordResults("contracts-rpc", metrics)
} finally {
  await anvil.stop()
}
