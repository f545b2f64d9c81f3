/**
 * The on-demand embedded chain's state file (D89): the server, which mines the chain (D88), also
 * chooses when anvil's whole state is written to `DATA_DIR/chain`. Anvil can only write
 * all of it (accounts, and every block and transaction it keeps, each with its call trace: 163 MB
 * after a throughput benchmark's ~11,000 transfers), and on its own it does so every interval, busy
 * or idle, stalling its mining while it copies. So the state is written once the chain rests (no
 * block with transactions for `chainRestMs`), or every `unwrittenMaxMs` while it never does, and
 * not at all while nothing but empty blocks come. Each write is atomic and kept gzipped
 * (`chain/state.json.gz`, `Anvil.writeState`); the next start unzips it for anvil.
 *
 * Empty blocks that were never written (the clock's, the confirmations') are lost if anvil itself
 * crashes; but the guardian and the settlement watcher have read past them, and a block number
 * they have passed must never carry a transaction again. So every mined block's number is kept
 * (`chain/mined-height`), and a start that finds the chain below it mines empty blocks up to it
 * first. That file is not synced: a crash of the whole machine can lose it, as it can lose the
 * blocks since the last write.
 *
 * @since 0.16.0
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { Anvil } from "@pps/contracts"
import { Clock, Duration, Effect, Ref, Schedule } from "effect"
import { ChainError } from "./Chains.ts"

/** No block with transactions for this long: the chain rests, and its state is written. */
export const chainRestMs = 2_000

/**
 * While the chain never rests, its state is written this often: what a crash of anvil itself (or of
 * the machine) can lose under continuous load. At rest it loses nothing but empty blocks.
 */
export const unwrittenMaxMs = 30_000

/**
 * How long after its last look (a write included) the writer looks again whether a write is due.
 *
 * @since 0.16.0
 * @category state
 */
export const stateCheckEveryMs = 500

/**
 * After a failed write, the next waits this long, doubling with each failure up to
 * `unwrittenMaxMs`: a write asks anvil for its whole state, and a cause on our side (a full disk)
 * would otherwise have it copy everything twice a second.
 */
const stateRetryFirstMs = 1_000

/** A write that takes longer is abandoned (a 138 MB state took 1.6 s on a 2-vCPU VM at rest). */
const stateWriteTimeoutMs = 120_000

/** Blocks mined by one call while catching up to the mined height. */
const catchUpBlocksPerCall = 1_000n

/**
 * What the miner tells the writer.
 *
 * @since 0.16.0
 * @category models
 */
export interface UnwrittenBlocks {
  /** Blocks with transactions mined so far: one mined while a write read the state may be missing from it. */
  readonly carried: number
  /** When the last block with transactions was mined (read after the mining). */
  readonly lastCarriedAtMs: number
  /** Since when the state file may lack a block with transactions; undefined when it lacks none. */
  readonly unwrittenSinceMs: number | undefined
}

/**
 * @since 0.16.0
 * @category constructors
 */
export const nothingUnwritten: UnwrittenBlocks = { carried: 0, lastCarriedAtMs: 0, unwrittenSinceMs: undefined }

/**
 * The miner mined a block with transactions, at `minedAtMs`.
 *
 * @since 0.16.0
 * @category combinators
 */
export const noteCarried = (unwritten: UnwrittenBlocks, minedAtMs: number): UnwrittenBlocks => ({
  carried: unwritten.carried + 1,
  lastCarriedAtMs: minedAtMs,
  unwrittenSinceMs: unwritten.unwrittenSinceMs ?? minedAtMs
})

/**
 * Writes the chain's whole state now (`Anvil.writeState`). Interrupted, it is abandoned and the
 * file is left as it was.
 *
 * @since 0.16.0
 * @category state
 */
export const writeChainState = (rpcUrl: string, statePath: string) =>
  Effect.tryPromise({
    try: (signal) => Anvil.writeState(rpcUrl, statePath, AbortSignal.any([signal, AbortSignal.timeout(stateWriteTimeoutMs)])),
    catch: (cause) => new ChainError({ message: "writing the embedded chain's state failed", cause, retryable: true })
  })

/** The writer's own memory: when it may try again after a failure, and how long it waited last. */
interface WriterRetry {
  readonly retryAtMs: number
  readonly lastWaitMs: number
}

/**
 * Whether the state lacks a block with transactions and the chain rests, or that block has waited
 * `unwrittenMaxMs`.
 *
 * @since 0.16.0
 * @category state
 */
export const writeIsDue = (unwritten: UnwrittenBlocks, nowMs: number): boolean =>
  unwritten.unwrittenSinceMs !== undefined &&
  (nowMs - unwritten.lastCarriedAtMs >= chainRestMs || nowMs - unwritten.unwrittenSinceMs >= unwrittenMaxMs)

/**
 * What is unwritten after a write that began at `startedAtMs` with the miner's count at
 * `before.carried`: nothing, or, when blocks with transactions were mined while it read the state,
 * those, as old as the write's start (they may be missing from it).
 *
 * @since 0.16.0
 * @category combinators
 */
export const afterWrite = (before: UnwrittenBlocks, current: UnwrittenBlocks, startedAtMs: number): UnwrittenBlocks => ({
  ...current,
  unwrittenSinceMs: current.carried === before.carried ? undefined : startedAtMs
})

/**
 * One look of the writer: a write when one is due. Blocks with transactions mined while it read
 * the state (the miner's count moved) may be missing from it: they stay unwritten, as old as the
 * write's start.
 */
const writingRound = (write: Effect.Effect<void, ChainError>, unwritten: Ref.Ref<UnwrittenBlocks>, retry: Ref.Ref<WriterRetry>) =>
  Effect.gen(function*() {
    const before = yield* Ref.get(unwritten)
    const startedAtMs = yield* Clock.currentTimeMillis
    if (!writeIsDue(before, startedAtMs) || startedAtMs < (yield* Ref.get(retry)).retryAtMs) return
    yield* write.pipe(
      // The wait counts from the failure: a write that failed slowly (a timeout) is not tried at once.
      Effect.tapError(() =>
        Effect.flatMap(Clock.currentTimeMillis, (failedAtMs) =>
          Ref.update(retry, ({ lastWaitMs }) => {
            const waitMs = Math.min(unwrittenMaxMs, lastWaitMs === 0 ? stateRetryFirstMs : lastWaitMs * 2)
            return { retryAtMs: failedAtMs + waitMs, lastWaitMs: waitMs }
          }))
      )
    )
    yield* Ref.set(retry, { retryAtMs: 0, lastWaitMs: 0 })
    yield* Ref.update(unwritten, (current) => afterWrite(before, current, startedAtMs))
  })

/**
 * The writer's loop, for as long as the layer's scope is open: `write` is `writeChainState` of the
 * node (a test's own on a test clock). A failed write is tried again after a wait that doubles,
 * and said once a streak.
 *
 * @since 0.16.0
 * @category state
 */
export const runStateWriter = (write: Effect.Effect<void, ChainError>, unwritten: Ref.Ref<UnwrittenBlocks>) =>
  Effect.gen(function*() {
    const retry = yield* Ref.make<WriterRetry>({ retryAtMs: 0, lastWaitMs: 0 })
    yield* Effect.forkScoped(
      writingRound(write, unwritten, retry).pipe(
        Effect.catchTag("ChainError", (error) =>
          Ref.get(retry).pipe(
            Effect.flatMap(({ lastWaitMs }) =>
              lastWaitMs > stateRetryFirstMs
                ? Effect.logDebug("writing the embedded chain's state failed again; retrying", error)
                : Effect.logWarning("the embedded chain's state could not be written; retrying", error)
            )
          )),
        Effect.repeat(Schedule.spaced(Duration.millis(stateCheckEveryMs)))
      )
    )
  })

/**
 * The highest block the miner has mined, as kept in `chain/mined-height`; undefined before the
 * first. A file that does not hold a number is said, and taken as none.
 *
 * @since 0.16.0
 * @category state
 */
export const readMinedHeight = (minedHeightPath: string) =>
  Effect.gen(function*() {
    if (!fs.existsSync(minedHeightPath)) return undefined
    // A file that cannot be read (its permissions, a directory in its place) is as unreadable as
    // one that holds no number: said below, not a defect that stops the start.
    const text = yield* Effect.try(() => fs.readFileSync(minedHeightPath, "utf8").trim()).pipe(Effect.orElseSucceed(() => ""))
    if (/^\d+$/.test(text)) return BigInt(text)
    yield* Effect.logWarning("the embedded chain's mined height is unreadable; not catching up to it").pipe(
      Effect.annotateLogs({ file: minedHeightPath })
    )
    return undefined
  })

/**
 * Keeps the number of a block just mined: written beside the file and renamed over it, so a kill
 * never leaves it empty. Not synced (see above).
 *
 * @since 0.16.0
 * @category state
 */
export const recordMinedHeight = (minedHeightPath: string, height: bigint) =>
  Effect.tryPromise({
    try: async () => {
      const writing = `${minedHeightPath}.writing`
      await fs.promises.writeFile(writing, height.toString())
      await fs.promises.rename(writing, minedHeightPath)
    },
    catch: (cause) => new ChainError({ message: "keeping the embedded chain's mined height failed", cause, retryable: true })
  })

/**
 * A chain restored below the height it had been mined to (anvil or the machine crashed since its
 * state was last written) gets empty blocks up to that height before anything reads it: a block
 * number the readers have passed must not carry a transaction they would never read.
 *
 * @since 0.16.0
 * @category state
 */
export const catchUpToMinedHeight = (
  head: Effect.Effect<bigint, ChainError>,
  mine: (blocks: number) => Effect.Effect<void, ChainError>,
  minedHeightPath: string
) =>
  Effect.gen(function*() {
    const minedHeight = yield* readMinedHeight(minedHeightPath)
    if (minedHeight === undefined) return
    let current = yield* head
    if (current >= minedHeight) return
    yield* Effect.logWarning(
      "the embedded chain restarted below the height it had been mined to (anvil or the machine crashed since its state was last written); mining empty blocks up to it"
    ).pipe(Effect.annotateLogs({ head: current.toString(), mined_height: minedHeight.toString() }))
    while (current < minedHeight) {
      const blocks = minedHeight - current < catchUpBlocksPerCall ? minedHeight - current : catchUpBlocksPerCall
      yield* mine(Number(blocks))
      current += blocks
    }
  })

/**
 * Removes what writes and loads cut off by a crash left beside the state file.
 *
 * @since 0.16.0
 * @category state
 */
export const removeAbandonedWrites = (chainDir: string) =>
  Effect.sync(() => {
    for (const name of fs.readdirSync(chainDir)) {
      if ([".writing", ".unzipping", ".loading"].some((suffix) => name.endsWith(suffix))) {
        fs.rmSync(path.join(chainDir, name), { force: true })
      }
    }
  })
