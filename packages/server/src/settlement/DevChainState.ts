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
 * or the machine crashes; but the guardian and the settlement watcher have read past them, and a
 * block number they have passed must never carry a transaction again. So every mined block's
 * number is kept (`chain/mined-height`), and a start that finds the chain below it mines empty
 * blocks up to it first.
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

/** How often the writer looks whether a write is due. */
const stateCheckEveryMs = 500

/** A write that takes longer is abandoned (a 138 MB state took 2.6 s on a 2-vCPU VM at rest). */
const stateWriteTimeoutMs = 120_000

/** Blocks mined by one call while catching up to the mined height. */
const catchUpBlocksPerCall = 1_000

/**
 * What the miner tells the writer.
 *
 * @since 0.16.0
 * @category models
 */
export interface UnwrittenBlocks {
  /** When the last block with transactions was mined (read after the mining). */
  readonly lastCarriedAtMs: number
  /** When the state file first lacked a block with transactions; undefined when it lacks none. */
  readonly unwrittenSinceMs: number | undefined
}

/**
 * @since 0.16.0
 * @category constructors
 */
export const nothingUnwritten: UnwrittenBlocks = { lastCarriedAtMs: 0, unwrittenSinceMs: undefined }

/**
 * The miner mined a block with transactions, at `minedAtMs`.
 *
 * @since 0.16.0
 * @category combinators
 */
export const noteCarried = (unwritten: UnwrittenBlocks, minedAtMs: number): UnwrittenBlocks => ({
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

/**
 * One look of the writer: a write if blocks with transactions are unwritten and the chain rests, or
 * they have waited `unwrittenMaxMs`. A block mined while the state was being read may not be in it,
 * so one noted at or after the write's start stays unwritten.
 */
const writingRound = (rpcUrl: string, statePath: string, unwritten: Ref.Ref<UnwrittenBlocks>) =>
  Effect.gen(function*() {
    const { lastCarriedAtMs, unwrittenSinceMs } = yield* Ref.get(unwritten)
    const startedAtMs = yield* Clock.currentTimeMillis
    if (unwrittenSinceMs === undefined) return
    if (startedAtMs - lastCarriedAtMs < chainRestMs && startedAtMs - unwrittenSinceMs < unwrittenMaxMs) return
    yield* writeChainState(rpcUrl, statePath)
    yield* Ref.update(unwritten, (current) => ({
      ...current,
      unwrittenSinceMs: current.lastCarriedAtMs >= startedAtMs ? current.lastCarriedAtMs : undefined
    }))
  })

/**
 * The writer's loop, for as long as the layer's scope is open. A failed write is retried at the
 * next look, and said once a streak.
 *
 * @since 0.16.0
 * @category state
 */
export const runStateWriter = (rpcUrl: string, statePath: string, unwritten: Ref.Ref<UnwrittenBlocks>) =>
  Effect.gen(function*() {
    const failing = yield* Ref.make(false)
    yield* Effect.forkScoped(
      writingRound(rpcUrl, statePath, unwritten).pipe(
        Effect.andThen(Ref.set(failing, false)),
        Effect.catchTag("ChainError", (error) =>
          Ref.getAndSet(failing, true).pipe(
            Effect.flatMap((before) =>
              before
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
 * first.
 *
 * @since 0.16.0
 * @category state
 */
export const readMinedHeight = (markPath: string): bigint | undefined => {
  try {
    const text = fs.readFileSync(markPath, "utf8").trim()
    return /^\d+$/.test(text) ? BigInt(text) : undefined
  } catch {
    return undefined
  }
}

/**
 * Keeps the number of a block just mined. Not synced: it guards against a crash of anvil alone,
 * whose writes the machine's page cache keeps.
 *
 * @since 0.16.0
 * @category state
 */
export const recordMinedHeight = (markPath: string, height: bigint) =>
  Effect.tryPromise({
    try: () => fs.promises.writeFile(markPath, height.toString()),
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
  markPath: string
) =>
  Effect.gen(function*() {
    const minedHeight = readMinedHeight(markPath)
    if (minedHeight === undefined) return
    let current = yield* head
    if (current >= minedHeight) return
    yield* Effect.logWarning(
      "the embedded chain restarted below the height it had been mined to (anvil or the machine crashed since its state was last written); mining empty blocks up to it"
    ).pipe(Effect.annotateLogs({ head: current.toString(), mined_height: minedHeight.toString() }))
    while (current < minedHeight) {
      const blocks = Number(minedHeight - current < catchUpBlocksPerCall ? minedHeight - current : BigInt(catchUpBlocksPerCall))
      yield* mine(blocks)
      current += BigInt(blocks)
    }
  })

/**
 * Removes what writes cut off by a crash left beside the state file.
 *
 * @since 0.16.0
 * @category state
 */
export const removeAbandonedWrites = (chainDir: string) =>
  Effect.sync(() => {
    for (const name of fs.readdirSync(chainDir)) {
      if (name.endsWith(".writing") || name.endsWith(".unzipping")) fs.rmSync(path.join(chainDir, name), { force: true })
    }
  })
