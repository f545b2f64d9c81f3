/**
 * The embedded default left idle (D88): what its chain grows by and what the idle processes spend,
 * with the chain mining on demand and on an interval, alternating A B B A ... in one run.
 *
 * Each run starts the real server process (`src/main.ts`, the embedded default of `npm start`) on
 * a fresh data directory, waits until it is ready and a first state write has happened, then reads
 * for `--seconds` with no traffic: the blocks mined, the growth of the chain's state (the JSON size a
 * write of it has, taken through `Anvil.writeState` to a scratch file outside the CPU readings) and
 * of anvil's resident memory, whether the state file was written meanwhile (anvil rewrites it every
 * 5 s with interval mining, D86; on demand the server writes it only after activity, D89), and each
 * process's CPU a second. The growth is extrapolated to a day, which is what the figures are for: a
 * development server left running overnight.
 *
 *   npm run -s bench:idle-chain -- [--seconds 60] [--settle-seconds 60] [--pairs 1] [--block-time-ms 200]
 *
 * Nothing is recorded: the results go to docs/benchmarks/notes with the command, commit and date.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as zlib from "node:zlib"
import { parseArgs } from "node:util"
import { Anvil } from "@pps/contracts"
import { createPublicClient, http } from "viem"
import { freshServerTarget } from "../test/fault/processes.ts"
import { busyShare, readMachineTicks } from "./machineBusy.ts"
import { cpuMs, residentMb } from "./processStats.ts"

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "60" },
    "settle-seconds": { type: "string", default: "60" },
    pairs: { type: "string", default: "1" },
    "block-time-ms": { type: "string", default: "200" }
  }
})
const seconds = Number(values.seconds)
const pairs = Number(values.pairs)
const settleSeconds = Number(values["settle-seconds"])
const blockTimeMs = Number(values["block-time-ms"])
if (!(seconds > 0 && settleSeconds >= 6 && Number.isInteger(pairs) && pairs > 0 && blockTimeMs >= 10)) {
  throw new Error("--seconds > 0, --settle-seconds >= 6, --pairs a positive integer, --block-time-ms >= 10")
}

type Mining = "on-demand" | "interval"

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The server (its lock file), its guardian child (its pid file) and its anvil (the chain's pid file). */
const processesOf = (dataDir: string) => {
  const pidIn = (file: string) => Number.parseInt(fs.readFileSync(path.join(dataDir, file), "utf8"), 10)
  return { server: pidIn("server.lock"), guardian: pidIn("guardian.pid"), anvil: pidIn(path.join("chain", "anvil.pid")) }
}

const anvilUrlOf = (anvilPid: number): string => {
  const url = Anvil.rpcUrlOfProcess(anvilPid)
  if (url === undefined) throw new Error(`anvil ${anvilPid} has no --port`)
  return url
}

const blockNumber = async (url: string) => Number(await createPublicClient({ transport: http(url) }).getBlockNumber({ cacheTime: 0 }))

const oneRun = async (mining: Mining) => {
  const { dataDir, server, workDir } = await freshServerTarget("pps-idle-chain-", {
    CHAIN_BLOCK_TIME_MS: String(blockTimeMs),
    EMBEDDED_CHAIN_MINING: mining
  })
  try {
    await server.start()
    const pids = processesOf(dataDir)
    const anvilUrl = anvilUrlOf(pids.anvil)
    const statePath = path.join(dataDir, "chain", "state.json")
    const scratchPath = path.join(workDir, "state-size.json")
    // Past start-up's deployment, a first state write, and V8's optimising compile of PGlite in
    // each process (20-60 s of a background thread, docs/benchmarks/notes/2026-11-29-resident-memory-2.md).
    await sleep(settleSeconds * 1000)
    const stateBytes = async () => {
      await Anvil.writeState(anvilUrl, scratchPath, AbortSignal.timeout(60_000))
      return zlib.gunzipSync(fs.readFileSync(Anvil.zippedStatePath(scratchPath))).length
    }
    const read = () => ({
      stateFileWrittenMs: Math.max(...[statePath, Anvil.zippedStatePath(statePath)].map((file) => fs.existsSync(file) ? fs.statSync(file).mtimeMs : 0)),
      anvilMb: residentMb(pids.anvil),
      cpu: Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuMs(pid) ?? Number.NaN])),
      machine: readMachineTicks(),
      atMs: performance.now()
    })
    const stateBefore = await stateBytes()
    const before = { ...read(), block: await blockNumber(anvilUrl) }
    await sleep(seconds * 1000)
    const after = { ...read(), block: await blockNumber(anvilUrl) }
    const stateAfter = await stateBytes()
    const elapsedS = (after.atMs - before.atMs) / 1000
    const perDay = 86_400 / elapsedS
    const cpuPerSecond = Object.fromEntries(
      Object.keys(before.cpu).map((name) => [name, Math.round(((after.cpu[name] ?? 0) - (before.cpu[name] ?? 0)) / elapsedS * 10) / 10])
    )
    return {
      mining,
      elapsedS: Math.round(elapsedS),
      blocks: after.block - before.block,
      blocksPerDay: Math.round((after.block - before.block) * perDay),
      stateMbPerDay: Math.round(((stateAfter - stateBefore) * perDay) / 1e6),
      stateMbNow: Math.round(stateAfter / 1e5) / 10,
      stateFileWrittenWhileIdle: after.stateFileWrittenMs > before.stateFileWrittenMs,
      anvilResidentMb: [before.anvilMb, after.anvilMb],
      cpuMsPerSecond: cpuPerSecond,
      machineBusyPercent: Math.round(busyShare(before.machine, after.machine) * 1000) / 10
    }
  } finally {
    await server.stop()
    fs.rmSync(workDir, { recursive: true, force: true })
  }
}

const order: Array<Mining> = []
for (let pair = 0; pair < pairs; pair++) order.push(...(pair % 2 === 0 ? ["interval", "on-demand"] as const : ["on-demand", "interval"] as const))
const started = new Date().toISOString()
console.log(`idle chain: ${pairs} pair(s), ${seconds} s idle each after ${settleSeconds} s, ${blockTimeMs} ms blocks, load average ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}, ${started}`)
for (const mining of order) console.log(JSON.stringify(await oneRun(mining)))
console.log(`done ${new Date().toISOString()}, load average ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}`)
