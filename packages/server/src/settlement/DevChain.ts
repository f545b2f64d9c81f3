/**
 * The embedded testnet node: anvil from npm, started as a child process when no
 * `RPC_URL_TESTNET` is configured, its state in `DATA_DIR/chain` (written by the
 * server once the chain rests, D89: `DevChainState.ts`), stopped by the server
 * after everything that reads the chain (it runs in a process group of its own).
 * It mines on demand (D88): every
 * `CHAIN_BLOCK_TIME_MS` the server mines a block if transactions wait, then the
 * blocks that bury it to the confirmation depth, and one every 12 s for the
 * chain's clock, so an idle chain grows by 7,200 small blocks a day, not 432,000.
 * Anvil's own automine jams under concurrent load; `EMBEDDED_CHAIN_MINING=interval`
 * keeps a block every interval, empty or not, and anvil's own state writes every 5 s (D86).
 *
 * @since 0.1.0
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Anvil, RpcTransport } from "@pps/contracts"
import { Clock, Context, Duration, Effect, Layer, Option, Ref, Result, Schedule } from "effect"
import { createTestClient, publicActions } from "viem"
import { chainIdOfMode } from "@pps/api/ApiKeys"
import { AppConfig } from "../config/AppConfig.ts"
import { embeddedGuardianDepth } from "../guardian/EmbeddedGuardian.ts"
import { DataDir } from "../platform/DataDir.ts"
import { ChainError } from "./Chains.ts"
import {
  catchUpToMinedHeight,
  noteCarried,
  nothingUnwritten,
  recordMinedHeight,
  removeAbandonedWrites,
  runStateWriter,
  type UnwrittenBlocks,
  writeChainState
} from "./DevChainState.ts"

/** The embedded anvil's controls (`txpool_status`, `anvil_mine`) and the one block read the miner needs. */
const embeddedControls = (rpcUrl: string) =>
  createTestClient({ mode: "anvil", transport: RpcTransport.keepAliveHttp(rpcUrl, { retryCount: 0, timeoutMs: controlTimeoutMs }) })
    .extend(publicActions)

type EmbeddedControls = ReturnType<typeof embeddedControls>

/** A node that takes longer than this to answer one control call is taken as not answering. */
const controlTimeoutMs = 5_000

const control = <A>(what: string, call: () => Promise<A>) =>
  Effect.tryPromise({ try: call, catch: (cause) => new ChainError({ message: `${what} failed`, cause, retryable: true }) })

/**
 * Anvil keeps its transaction pool out of its state file: what waits there when it stops is gone at
 * the next start. An on-demand node (D88) whose miner has stopped, a leftover whose server died
 * between a send and the miner's next round or our own at a clean stop, may still hold such
 * transactions: they are mined before the stop, as an interval-mining node would have mined them on
 * its own. Best effort: a node that does not answer is stopped all the same, and the settlement
 * engine sends again what never reached a block.
 */
const mineWhatWaits = (controls: EmbeddedControls) =>
  Effect.gen(function*() {
    const status = yield* control("reading the embedded chain's pool", () => controls.getTxpoolStatus())
    if (status.pending > 0) yield* control("mining the embedded chain", () => controls.mine({ blocks: 1 }))
  }).pipe(Effect.ignore)

/**
 * A server killed with SIGKILL leaves its anvil running (orphaned). Before starting ours, what
 * waits in such a leftover's pool is mined (D88: its miner died with the server) and its state is
 * written (D89: its writer died too); it is then killed, since it holds nothing more, and an
 * interval-mining node's own last write could be cut off half-way by the wait below. A leftover
 * whose state could not be written is stopped with SIGTERM instead, for anvil to write it itself
 * if it writes at all; what it mined since its last write is otherwise lost, as in a crash of
 * the node.
 */
const stopLeftoverAnvil = (pidFile: string, statePath: string) =>
  Effect.gen(function*() {
    const pid = leftoverPid(pidFile)
    if (pid === undefined) return
    const rpcUrl = Anvil.rpcUrlOfProcess(pid)
    const saved = rpcUrl !== undefined && (yield* saveBeforeStop(rpcUrl, statePath))
    yield* Effect.promise(async () => {
      process.kill(pid, saved ? "SIGKILL" : "SIGTERM")
      for (let waited = 0; waited < leftoverStopWaitMs && isAnvil(pid); waited += 50) {
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      if (isAnvil(pid)) process.kill(pid, "SIGKILL")
    })
    // An interval-mining leftover may have begun a write of its own since ours: cut off by the
    // kill, it would be a newer, broken file. Ours is the chain's.
    if (saved) yield* Effect.sync(() => fs.rmSync(statePath, { force: true }))
  })

/**
 * Before an on-demand node stops: what waits in its pool is mined and its state written a last
 * time. Best effort: a failure is said, and the stop goes on. Whether the state was written.
 */
const saveBeforeStop = (rpcUrl: string, statePath: string) =>
  mineWhatWaits(embeddedControls(rpcUrl)).pipe(
    Effect.andThen(writeChainState(rpcUrl, statePath)),
    Effect.as(true),
    Effect.catchTag("ChainError", (error) =>
      Effect.logWarning("the embedded chain's state could not be written before its node stopped", error).pipe(Effect.as(false)))
  )

/** The pid in the chain's pid file, if that process is still an anvil. */
const leftoverPid = (pidFile: string): number | undefined => {
  let pid: number
  try {
    pid = Number.parseInt(fs.readFileSync(pidFile, "utf8"), 10)
  } catch {
    return undefined
  }
  return Number.isInteger(pid) && isAnvil(pid) ? pid : undefined
}

const isAnvil = (pid: number): boolean => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("anvil")
  } catch {
    return false
  }
}

/** How long a leftover anvil gets to write its state and exit. */
const leftoverStopWaitMs = 10_000

/**
 * While idle, the miner still mines an empty block this often: the chain's clock is its latest
 * block's timestamp, and the guardian (an attestation's deadline passed, a hold lifted) and the
 * settlement engine (a transaction expired) judge by it. The clock is never ahead of the wall
 * clock, so a judgement comes late, never early: up to this much at the default depths (12 s,
 * Ethereum's slot, whose chain clock lags as much), and this much more for each block a judgement
 * waits to have on top (`GUARDIAN_CONFIRMATIONS`). 7,200 blocks a day instead of 432,000 at 200-ms
 * blocks (D88).
 */
const clockBlockEveryMs = 12_000

/** The chain the miner mines: its controls, where it keeps its height, and what it tells the state writer. */
interface MinedChain {
  readonly controls: EmbeddedControls
  readonly minedHeightPath: string
  readonly unwritten: Ref.Ref<UnwrittenBlocks>
}

/** What the miner remembers between rounds. */
interface MinerState {
  /** Empty blocks still to mine so that the last block with transactions is as deep as the readers wait for. */
  readonly blocksOwed: number
  readonly lastMinedAtMs: number
  /** Whether the last round failed: a failure after a success is a warning, the rest of a streak is not. */
  readonly failing: boolean
}

/**
 * One round of the embedded chain's miner (D88): a block if transactions wait in anvil's pool; or
 * one of the blocks still owed to bury the last block with transactions to the depth its readers
 * wait for; or a block for the chain's clock when none came for `clockBlockEveryMs`; otherwise
 * nothing. A transaction that cannot run yet (a nonce gap: anvil's "queued") does not count: a
 * block would not take it. What arrived between the pool's status and the mining is in the block
 * too, so whether the block carried anything is read from the block, with its number: the height
 * kept for a crash of anvil (D89).
 */
const miningRound = (chain: MinedChain, state: Ref.Ref<MinerState>, trailingBlocks: number) =>
  Effect.gen(function*() {
    const { controls } = chain
    const status = yield* control("reading the embedded chain's pool", () => controls.getTxpoolStatus())
    const { blocksOwed, lastMinedAtMs } = yield* Ref.get(state)
    const nowMs = yield* Clock.currentTimeMillis
    if (status.pending === 0 && blocksOwed === 0 && nowMs - lastMinedAtMs < clockBlockEveryMs) {
      return yield* Ref.update(state, (current) => ({ ...current, failing: false }))
    }
    // Whatever fails from here, what the round knows is kept, erring towards a block that carried
    // transactions (a write and the confirmations' blocks too many, never one too few): a node that
    // did not answer the mining may have mined what waited; a block that cannot be read may hold some.
    const mining = yield* Effect.result(control("mining the embedded chain", () => controls.mine({ blocks: 1 })))
    if (Result.isFailure(mining) && status.pending === 0) return yield* Effect.fail(mining.failure)
    const mined = Result.isSuccess(mining)
      ? yield* Effect.result(control("reading the mined block", () => controls.getBlock({ blockTag: "latest" })))
      : Result.fail(mining.failure)
    const carried = status.pending > 0 || Result.isFailure(mined) || mined.success.transactions.length > 0
    if (carried) {
      const minedAtMs = yield* Clock.currentTimeMillis
      yield* Ref.update(chain.unwritten, (unwritten) => noteCarried(unwritten, minedAtMs))
    }
    yield* Ref.update(state, (current) => ({
      ...current,
      blocksOwed: carried ? trailingBlocks : Math.max(0, blocksOwed - 1),
      lastMinedAtMs: nowMs
    }))
    if (Result.isFailure(mined)) return yield* Effect.fail(mined.failure)
    yield* recordMinedHeight(chain.minedHeightPath, mined.success.number)
    yield* Ref.update(state, (current) => ({ ...current, failing: false }))
  })

/**
 * The miner's loop, every block time, for as long as the layer's scope is open. On a fixed cadence,
 * as anvil's own interval: a round that mines a large block does not push the next one later.
 * It starts owing `trailingBlocks` and with a block for the clock due: after a restart, what the
 * chain last carried is buried, and its clock is now's, however long the server was down.
 */
const runMiner = (chain: MinedChain, blockTimeMs: number, trailingBlocks: number) =>
  Effect.gen(function*() {
    const state = yield* Ref.make<MinerState>({ blocksOwed: trailingBlocks, lastMinedAtMs: 0, failing: false })
    yield* Effect.forkScoped(
      miningRound(chain, state, trailingBlocks).pipe(
        // A node that does not answer for a moment (a state write, a stop), or the mined height
        // that cannot be kept: the next round tries again. Said once a streak: every transfer
        // waits on these blocks.
        Effect.catchTag("ChainError", (error) =>
          Ref.getAndUpdate(state, (current) => ({ ...current, failing: true })).pipe(
            Effect.flatMap((before) =>
              before.failing
                ? Effect.logDebug("embedded miner round failed; next round retries", error)
                : Effect.logWarning("an embedded chain miner's round failed; retrying every block time", error)
            )
          )),
        Effect.repeat(Schedule.fixed(Duration.millis(blockTimeMs)))
      )
    )
  })

/**
 * With interval mining, how often anvil writes its whole state to `chain/state.json` of its own
 * accord (D86); on demand the server writes it (D89). Once a second, the writes were most of
 * anvil's CPU under load and grew with what it keeps: 0.9 → 4.1 ms a confirmed transfer over a
 * benchmark run, against 0.6-1.7 with a write a minute. What the interval bounds is what a crash of
 * anvil itself (or of the machine) loses of the chain, a gap the embedded development chain has at
 * any interval (docs/reliability.md); a stop and a server's crash (anvil outlives it) lose nothing.
 */
const chainStateIntervalSeconds = 5

/** A clean stop: an on-demand node has what waits mined and its state written first (D88, D89). */
const stopEmbeddedNode = (instance: Anvil.Instance, onDemand: boolean, statePath: string, pidFile: string) =>
  (onDemand ? saveBeforeStop(instance.rpcUrl, statePath) : Effect.void).pipe(
    Effect.andThen(Effect.promise(() => instance.stop())),
    Effect.andThen(Effect.sync(() => fs.rmSync(pidFile, { force: true })))
  )

/**
 * The on-demand chain's start (D88, D89): back up to the height it had been mined to, then its
 * miner and its state writer, for as long as the layer's scope is open.
 */
const mineOnDemand = (rpcUrl: string, chainDir: string, blockTimeMs: number, trailingBlocks: number) =>
  Effect.gen(function*() {
    const controls = embeddedControls(rpcUrl)
    const minedHeightPath = path.join(chainDir, "mined-height")
    yield* catchUpToMinedHeight(
      control("reading the embedded chain's head", () => controls.getBlockNumber({ cacheTime: 0 })),
      (blocks) => control("mining the embedded chain", () => controls.mine({ blocks })),
      minedHeightPath
    )
    const unwritten = yield* Ref.make<UnwrittenBlocks>(nothingUnwritten)
    yield* runMiner({ controls, minedHeightPath, unwritten }, blockTimeMs, trailingBlocks)
    yield* runStateWriter(writeChainState(rpcUrl, path.join(chainDir, "state.json")), unwritten)
  })

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
      const statePath = path.join(chainDir, "state.json")
      const onDemand = config.embeddedChainMining === "on-demand"
      yield* Effect.sync(() => fs.mkdirSync(chainDir, { recursive: true }))
      yield* stopLeftoverAnvil(pidFile, statePath)
      yield* removeAbandonedWrites(chainDir)
      const anvil = yield* Effect.acquireRelease(
        Effect.tryPromise({
          try: () =>
            Anvil.start({
              chainId: chainIdOfMode.test,
              blockTimeSeconds: config.chainBlockTimeMs / 1000,
              mining: onDemand ? "onDemand" : "interval",
              blockGasLimit,
              statePath,
              stateIntervalSeconds: onDemand ? "byCaller" : chainStateIntervalSeconds,
              // Out of reach of a signal to the server's process group (`npm start` stopped with
              // Ctrl-C or `kill -TERM -<pgid>`): the server stops it after everything that reads
              // the chain, so a stop logs no failed chain read (test/orderlyStop.test.ts).
              ownProcessGroup: config.embeddedChainOwnProcessGroup
            }),
          catch: (cause) => new ChainError({ message: "embedded anvil did not start", cause, retryable: true })
        }),
        // The miner and the state writer have stopped (their fibers close before this release).
        (instance) => stopEmbeddedNode(instance, onDemand, statePath, pidFile)
      )
      fs.writeFileSync(pidFile, String(anvil.pid))
      if (onDemand) {
        // As deep as the server's watcher and the embedded guardian wait for (the block itself is
        // the first of CHAIN_CONFIRMATIONS; the guardian counts the blocks on top).
        const trailingBlocks = Math.max(config.chainConfirmations - 1, embeddedGuardianDepth(config.chainConfirmations))
        yield* mineOnDemand(anvil.rpcUrl, chainDir, config.chainBlockTimeMs, trailingBlocks)
      }
      return { rpcUrl: Option.some(anvil.rpcUrl) }
    })
  )
}
