/**
 * The embedded testnet node: anvil from npm, started as a child process when no
 * `RPC_URL_TESTNET` is configured, its state in `DATA_DIR/chain` (dumped every
 * 5 seconds, D86), stopped by the server after everything that reads the chain (it
 * runs in a process group of its own). It mines on demand (D88): every
 * `CHAIN_BLOCK_TIME_MS` the server mines a block if transactions wait, and the
 * blocks that bury it to `CHAIN_CONFIRMATIONS`, so an idle chain does not grow.
 * Anvil's own automine jams under concurrent load; `EMBEDDED_CHAIN_MINING=interval`
 * keeps a block every interval, empty or not.
 *
 * @since 0.1.0
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Anvil, RpcTransport } from "@pps/contracts"
import { Clock, Context, Duration, Effect, Layer, Option, Ref, Schedule } from "effect"
import { createTestClient, type TestClient } from "viem"
import { chainIdOfMode } from "@pps/api/ApiKeys"
import { AppConfig } from "../config/AppConfig.ts"
import { DataDir } from "../platform/DataDir.ts"
import { ChainError } from "./Chains.ts"

/**
 * A server killed with SIGKILL leaves its anvil running (orphaned, still dumping
 * state). Before starting ours, what waits in such a leftover's pool is mined
 * (D88: its miner died with the server), then it is stopped with SIGTERM, which
 * makes anvil write its state a last time, so nothing sent or mined is lost.
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
    const rpcUrl = rpcUrlOfRunning(pid)
    if (rpcUrl !== undefined) await mineWaitingBeforeStop(rpcUrl)
    process.kill(pid, "SIGTERM")
    for (let waited = 0; waited < leftoverStopWaitMs && isAnvil(); waited += 50) {
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    if (isAnvil()) process.kill(pid, "SIGKILL")
  })

/** A running anvil's RPC URL, from the `--port` of its command line (Linux /proc, as above). */
const rpcUrlOfRunning = (pid: number): string | undefined => {
  try {
    const args = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
    const port = args[args.indexOf("--port") + 1]
    return port !== undefined && /^\d+$/.test(port) ? `http://127.0.0.1:${port}` : undefined
  } catch {
    return undefined
  }
}

/** How long a leftover anvil gets to write its state and exit. */
const leftoverStopWaitMs = 10_000

/**
 * Anvil keeps its transaction pool out of its state file: what waits there when it stops is gone at
 * the next start. An on-demand chain (D88) whose server died between a send and the next mining round
 * still holds such transactions, so they are mined before the stop, as an interval-mining node
 * would have mined them on its own. Best effort: a node that does not answer is stopped all the
 * same, and the settlement engine re-sends what never reached a block.
 */
const mineWaitingBeforeStop = async (rpcUrl: string): Promise<void> => {
  const call = async (method: string): Promise<unknown> => {
    const response = await fetch(rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: [] }),
      signal: AbortSignal.timeout(leftoverRpcTimeoutMs)
    })
    return ((await response.json()) as { result?: unknown }).result
  }
  try {
    const status = (await call("txpool_status")) as { pending?: string } | undefined
    if (status?.pending !== undefined && BigInt(status.pending) > 0n) await call("evm_mine")
  } catch {
    // Not answering, or not an on-demand node: stopped as it is.
  }
}

/** How long a leftover anvil gets to answer each of the two requests above. */
const leftoverRpcTimeoutMs = 5_000

/**
 * While idle, the miner still mines an empty block this often: the chain's clock is its latest
 * block's timestamp, and the guardian (an attestation's deadline passed, a hold lifted) and the
 * settlement engine (a transaction expired) judge by it. It is never ahead of the wall clock, so a
 * judgement is late by up to this much, never early: 12 s, Ethereum's slot, whose chain clock
 * lags as much. 7,200 blocks a day instead of 432,000 at 200-ms blocks (D88).
 */
const clockBlockEveryMs = 12_000

/** What the miner remembers between rounds. */
interface MinerState {
  /** Empty blocks still to mine so that the last block with transactions reaches `CHAIN_CONFIRMATIONS`. */
  readonly blocksOwed: number
  readonly lastMinedAtMs: number
}

/**
 * One round of the embedded chain's miner (D88): a block if transactions wait in anvil's pool; or
 * one of the blocks still owed to bury the last one to `CHAIN_CONFIRMATIONS` (the guardian books
 * at the same depth); or a block for the chain's clock when none came for `clockBlockEveryMs`;
 * otherwise nothing. Transactions that arrive between the pool's status and the mining go into the
 * same block. A transaction that cannot run yet (a nonce gap: anvil's "queued") does not count: a
 * block would not take it.
 */
const miningRound = (cheats: TestClient<"anvil">, state: Ref.Ref<MinerState>, trailingBlocks: number) =>
  Effect.gen(function*() {
    const status = yield* Effect.tryPromise({
      try: () => cheats.getTxpoolStatus(),
      catch: (cause) => new ChainError({ message: "reading the embedded chain's pool failed", cause, retryable: true })
    })
    const { blocksOwed, lastMinedAtMs } = yield* Ref.get(state)
    const nowMs = yield* Clock.currentTimeMillis
    if (status.pending === 0 && blocksOwed === 0 && nowMs - lastMinedAtMs < clockBlockEveryMs) return
    yield* Effect.tryPromise({
      try: () => cheats.mine({ blocks: 1 }),
      catch: (cause) => new ChainError({ message: "mining the embedded chain failed", cause, retryable: true })
    })
    yield* Ref.set(state, {
      blocksOwed: status.pending > 0 ? trailingBlocks : Math.max(0, blocksOwed - 1),
      lastMinedAtMs: nowMs
    })
  })

/**
 * The miner's loop, every block time, for as long as the layer's scope is open. On a fixed cadence,
 * as anvil's own interval: a round that mines a large block does not push the next one later.
 */
const runMiner = (rpcUrl: string, blockTimeMs: number, confirmations: number) =>
  Effect.gen(function*() {
    const cheats = createTestClient({ mode: "anvil", transport: RpcTransport.keepAliveHttp(rpcUrl, { retryCount: 0 }) })
    const state = yield* Ref.make<MinerState>({ blocksOwed: 0, lastMinedAtMs: yield* Clock.currentTimeMillis })
    yield* Effect.forkScoped(
      miningRound(cheats, state, confirmations - 1).pipe(
        // A node that does not answer for a moment (a state write, a stop): the next round asks again.
        Effect.catchTag("ChainError", (error) => Effect.logDebug("embedded miner round failed; next round retries", error)),
        Effect.repeat(Schedule.fixed(Duration.millis(blockTimeMs)))
      )
    )
  })

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
              mining: config.embeddedChainMining === "interval" ? "interval" : "onDemand",
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
          Effect.promise(async () => {
            // The miner has stopped (its fiber closes before this release): what waits is mined now.
            if (config.embeddedChainMining === "on-demand") await mineWaitingBeforeStop(instance.rpcUrl)
            await instance.stop()
          }).pipe(Effect.andThen(Effect.sync(() => fs.rmSync(pidFile, { force: true }))))
      )
      fs.writeFileSync(pidFile, String(anvil.pid))
      if (config.embeddedChainMining === "on-demand") {
        yield* runMiner(anvil.rpcUrl, config.chainBlockTimeMs, config.chainConfirmations)
      }
      return { rpcUrl: Option.some(anvil.rpcUrl) }
    })
  )
}
