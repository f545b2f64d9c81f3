/**
 * The embedded testnet node: anvil from npm, started as a child process when no
 * `RPC_URL_TESTNET` is configured, its state in `DATA_DIR/chain` (dumped every
 * second, so even kill -9 keeps balances), stopped by the server after everything
 * that reads the chain (it runs in a process group of its own). Interval
 * mining (`CHAIN_BLOCK_TIME_MS`), because automine jams under concurrent load.
 *
 * @since 0.1.0
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Anvil } from "@pps/contracts"
import { Context, Effect, Layer, Option } from "effect"
import { chainIdOfMode } from "@pps/api/ApiKeys"
import { AppConfig } from "../config/AppConfig.ts"
import { DataDir } from "../platform/DataDir.ts"
import { ChainError } from "./Chains.ts"

/**
 * A server killed with SIGKILL leaves its anvil running (orphaned, still dumping
 * state). Before starting ours, such a leftover is stopped with SIGTERM, which
 * makes anvil write its state a last time, so no mined block is lost.
 */
const stopLeftoverAnvil = (pidFile: string) =>
  Effect.promise(async () => {
    let pid: number
    try {
      pid = Number.parseInt(fs.readFileSync(pidFile, "utf8"), 10)
    } catch {
      return
    }
    const isAnvil = () => {
      try {
        return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("anvil")
      } catch {
        return false
      }
    }
    if (!Number.isInteger(pid) || !isAnvil()) return
    process.kill(pid, "SIGTERM")
    for (let waited = 0; waited < leftoverStopWaitMs && isAnvil(); waited += 50) {
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    if (isAnvil()) process.kill(pid, "SIGKILL")
  })

/** How long a leftover anvil gets to write its state and exit. */
const leftoverStopWaitMs = 10_000

/**
 * How often the embedded anvil writes its whole state (accounts, and the blocks and transactions it
 * keeps in memory: ~17 MB of JSON after a few thousand transfers) to `chain/state.json` (D86). Once a
 * second, the writes were most of anvil's CPU under load and grew with what it keeps: 0.9 → 4.1 ms a
 * confirmed transfer over a benchmark run, against 0.6-1.7 with a write a minute. What the interval
 * bounds is what a crash of anvil itself (or of the machine) loses of the chain, a gap the embedded
 * development chain has at any interval (docs/reliability.md); a stop and a server's crash (anvil
 * outlives it) lose nothing, anvil writing its state when stopped.
 */
const chainStateIntervalSeconds = 5

/** Room for the target rate: 1e9 gas is ~9,000 confidential transfers a block. */
const blockGasLimit = 1_000_000_000n

/**
 * @since 0.1.0
 * @category services
 */
export class DevChain extends Context.Service<DevChain, {
  /** The embedded node's URL, or None when the testnet is an external node. */
  readonly rpcUrl: Option.Option<string>
}>()("server/settlement/DevChain") {
  static readonly layer = Layer.effect(
    DevChain,
    Effect.gen(function*() {
      const config = yield* AppConfig
      if (Option.isSome(config.rpcUrlTestnet)) return { rpcUrl: Option.none() }
      const dataDir = yield* DataDir
      const chainDir = path.join(dataDir.path, "chain")
      const pidFile = path.join(chainDir, "anvil.pid")
      yield* Effect.sync(() => fs.mkdirSync(chainDir, { recursive: true }))
      yield* stopLeftoverAnvil(pidFile)
      const anvil = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: () =>
            Anvil.start({
              chainId: chainIdOfMode.test,
              blockTimeSeconds: config.chainBlockTimeMs / 1000,
              blockGasLimit,
              statePath: path.join(chainDir, "state.json"),
              stateIntervalSeconds: chainStateIntervalSeconds,
              // Out of reach of a signal to the server's process group (`npm start` stopped with
              // Ctrl-C or `kill -TERM -<pgid>`): the server stops it after everything that reads
              // the chain, so a stop logs no failed chain read (test/orderlyStop.test.ts).
              ownProcessGroup: config.embeddedChainOwnProcessGroup
            }),
          catch: (cause) => new ChainError({ message: "embedded anvil did not start", cause, retryable: true })
        }),
        (instance) =>
          Effect.promise(() => instance.stop()).pipe(Effect.andThen(Effect.sync(() => fs.rmSync(pidFile, { force: true }))))
      )
      fs.writeFileSync(pidFile, String(anvil.pid))
      return { rpcUrl: Option.some(anvil.rpcUrl) }
    })
  )
}
