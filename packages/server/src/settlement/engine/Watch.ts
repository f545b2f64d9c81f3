/**
 * Watch receipts: one fiber per mode reads every new block's receipts (one
 * `eth_getBlockReceipts` per block, not one poll per transaction), matches them to the
 * transactions in flight, concludes those buried under `CHAIN_CONFIRMATIONS` blocks, and
 * revisits those not seen for a while. Its rounds are timed on the next block
 * (`pauseBeforeRound`), so a block is seen a few milliseconds after it is made.
 *
 * A round costs a few round trips however much it covers: the blocks are read in parallel,
 * the confirmations are written in one statement, the rest is concluded in parallel. A node
 * whose watcher fell behind (a busy process, a burst of blocks) so catches up instead of
 * falling further behind, every round doing more per trip (batching measurements: at 1,024
 * clients a block-by-block, transfer-by-transfer round lagged minutes behind the chain, and
 * every transfer mined meanwhile stayed `pending`).
 *
 * @since 0.5.0
 */
import { Clock, Effect, Exit } from "effect"
import { SettlementLimits } from "../domain.ts"
import type { Relayer } from "../Relayer.ts"
import { outcomeIn } from "./ChainReads.ts"
import { conclude, concludeReverted } from "./Conclude.ts"
import { allInFlight, chainFailure, confirmationOf, deepEnough, type EngineContext, pastDeadline, rpc, type StepError, type Tracked, untrack } from "./EngineContext.ts"
import { fillNonceGaps, resendHeld, revisit } from "./Rebroadcast.ts"
import { forgetMined, rewind } from "./Reorg.ts"

/**
 * A block and, when some of ours are in flight, its receipts: both asked at once (one round trip
 * between a block's appearing and its confirmations, not two), and refused unless the receipts
 * are the block's own, one per transaction (a reorganisation between the two answers would pair
 * a block with another's receipts, or with none; the round then reads it again).
 */
const readBlock = (context: EngineContext, n: bigint) =>
  Effect.gen(function*() {
    const readReceipts = rpc(context, "reading block receipts", (client) =>
      client.request({ method: "eth_getBlockReceipts", params: [`0x${n.toString(16)}`] }))
    const wanted = context.inFlight.size > 0
    const [block, asked] = yield* Effect.all([
      rpc(context, "reading a block", (client) => client.getBlock({ blockNumber: n })),
      wanted ? readReceipts : Effect.succeed(null)
    ], { concurrency: 2 })
    const receipts = block.transactions.length > 0 ? asked ?? [] : []
    // Asked for (ours in flight): one receipt per transaction, each of this block. A node behind
    // answers none (null) or a replaced, empty block's: read again rather than pass it as empty.
    const askedButIncomplete = wanted && block.transactions.length > 0 && receipts.length !== block.transactions.length
    if (askedButIncomplete || receipts.some((receipt) => receipt.blockHash !== block.hash)) {
      return yield* Effect.fail(chainFailure(context.chain.mode, "reading a block with its receipts", "the receipts are not all the block's own (missing, or of a block that replaced it)"))
    }
    return { n, block, receipts }
  })

/** Blocks after the last scanned, read with the head by an idle round (`readHead`), by number. */
type Prefetched = ReadonlyMap<bigint, Effect.Success<ReturnType<typeof readBlock>>["block"]>

/**
 * Block `n` as `readBlock` gives it: the idle round's prefetched block when it has that one and
 * nothing went in flight since (no receipts wanted then, as `readBlock` would have decided),
 * otherwise read now.
 */
const readOrReuse = (context: EngineContext, n: bigint, prefetched: Prefetched) => {
  const block = context.inFlight.size === 0 ? prefetched.get(n) : undefined
  return block === undefined ? readBlock(context, n) : Effect.succeed({ n, block, receipts: [] })
}

/** The watcher's pause while nothing is in flight: a block time, `idleRoundEveryMsMin` at least (D85). */
export const idlePauseMs = (blockTimeMs: number) => Math.max(blockTimeMs, SettlementLimits.idleRoundEveryMsMin)

/**
 * The pause after a round with nothing in flight (a send cuts it short): `idlePauseMs` once the
 * watcher has scanned up to the head; a block time while it is behind (a restart, a paused VM, a
 * round that could not read every block). A round scans `blocksPerRoundMax` blocks at most, so
 * a half-second pause behind would catch up five times slower than a chain of 100-ms blocks
 * could need, and fall behind for good at 10-ms blocks; meanwhile the base fee a relayer signs
 * with would be that of blocks minutes old.
 */
export const idleWatcherPauseMs = (context: Pick<EngineContext, "blockTimeMs" | "view">) =>
  context.view.lastScanned < context.view.head
    ? Math.max(pollMsOf(context.blockTimeMs), context.blockTimeMs)
    : idlePauseMs(context.blockTimeMs)

/**
 * The head and, while nothing is in flight, the blocks after the last scanned that an idle pause
 * can have made (one more than fit in it, `blockReadsInParallel` at most), asked in the same turn:
 * the settlement client's transport sends them as one JSON-RPC batch, so an idle round is one
 * HTTP request, not a head read and then a read of each new block. A block not made yet (the
 * node answers null) or not read for any other reason is read by the scan as before; the head's
 * failure fails the round as before. With transactions in flight the head is read alone: the
 * round then polls finely around the block's time, and most of those reads find no new block.
 */
const readHead = (context: EngineContext) => {
  const head = rpc(context, "reading the head", (client) => client.getBlockNumber())
  const none: Prefetched = new Map()
  if (context.inFlight.size > 0) return Effect.map(head, (n) => ({ head: n, prefetched: none }))
  const ahead = Math.min(SettlementLimits.blockReadsInParallel, Math.ceil(idlePauseMs(context.blockTimeMs) / context.blockTimeMs) + 1)
  const numbers = Array.from({ length: ahead }, (_, index) => context.view.lastScanned + 1n + BigInt(index))
  // Never fails: a block not made yet (viem's BlockNotFoundError) or a failed read is left to the scan.
  const prefetch = (n: bigint) =>
    Effect.promise(() => context.client.getBlock({ blockNumber: n }).then((block) => [n, block] as const, () => [n, undefined] as const))
  return Effect.map(
    Effect.all([head, Effect.forEach(numbers, prefetch, { concurrency: "unbounded" })], { concurrency: 2 }),
    ([headNumber, blocks]) => ({
      head: headNumber,
      prefetched: new Map(blocks.flatMap(([n, block]) => (block === undefined ? [] : [[n, block] as const]))) as Prefetched
    })
  )
}

/**
 * Reads the blocks after the last scanned up to `head` (a round's worth at most) and marks the
 * transactions in flight that they carry as mined. Applied in order up to the first block that
 * could not be read: what was read counts, the rest is read again next round (one failed call
 * must not cost the round's progress).
 */
const scanBlocks = Effect.fnUntraced(function*(context: EngineContext, head: bigint, prefetched: Prefetched) {
  const { scannedHashes, view } = context
  const roundMax = BigInt(SettlementLimits.blocksPerRoundMax)
  const last = head < view.lastScanned + roundMax ? head : view.lastScanned + roundMax
  const numbers: Array<bigint> = []
  for (let n = view.lastScanned + 1n; n <= last; n++) numbers.push(n)
  const reads = yield* Effect.forEach(numbers, (n) => Effect.exit(readOrReuse(context, n, prefetched)), {
    concurrency: SettlementLimits.blockReadsInParallel
  })
  for (const read of reads) {
    if (Exit.isFailure(read)) {
      yield* Effect.logWarning("settlement watcher could not read a block", read.cause)
      break
    }
    const { block, n, receipts } = read.value
    const parent = scannedHashes.get(n - 1n)
    if (parent !== undefined && block.parentHash !== parent) {
      yield* rewind(context, n - 1n)
      break
    }
    scannedHashes.set(n, block.hash)
    scannedHashes.delete(n - context.hashesKept)
    view.baseFeeWei = block.baseFeePerGas ?? view.baseFeeWei
    view.latestTimestampSeconds = block.timestamp
    for (const receipt of receipts) {
      for (const tracked of context.inFlight.get(receipt.transactionHash) ?? []) {
        tracked.mined = {
          blockNumber: n,
          timestampSeconds: block.timestamp,
          outcome: outcomeIn(tracked.request, { success: receipt.status === "0x1", logs: receipt.logs }),
          blockHash: block.hash
        }
      }
    }
    view.lastScanned = n
  }
})

/** What a round does with the transactions in flight, sorted by `sortInFlight`. */
interface RoundWork {
  /** Applied and deep enough: confirmed in one statement. */
  readonly applied: Array<Tracked>
  /** Reverted or expired and deep enough, or reverted before a deadline now past: concluded one by one. */
  readonly other: Array<Effect.Effect<void, StepError>>
  /** Not seen in a block for the rebroadcast age: revisited. */
  readonly stale: Array<Tracked>
  /** Relayers with a transaction unseen long enough that the node may hold it (see `resendHeld`). */
  readonly late: Set<Relayer>
}

/** Sorts the transactions in flight into what this round does with them; `behind` blocks remain unread. */
const sortInFlight = Effect.fnUntraced(function*(context: EngineContext, nowMs: number, behind: bigint) {
  const work: RoundWork = { applied: [], other: [], stale: [], late: new Set() }
  for (const tracked of allInFlight(context)) {
    if (tracked.revertedBeforeDeadline === true) {
      const deadline = tracked.request.deadlineSeconds
      if (deadline === null || pastDeadline(context, deadline)) work.other.push(concludeReverted(context, tracked))
    } else if (tracked.mined !== undefined) {
      // Seen mined in a block other than the one the scan kept at that height (recorded from
      // a receipt before the scan reached it, and replaced since): watched again.
      const scanned = context.scannedHashes.get(tracked.mined.blockNumber)
      if (scanned !== undefined && scanned !== tracked.mined.blockHash) {
        forgetMined(tracked, nowMs)
        yield* Effect.logWarning("a transaction was seen mined in a block the chain replaced: watched again").pipe(
          Effect.annotateLogs({ mode: context.chain.mode, submission_id: tracked.request.submissionId })
        )
      } else if (deepEnough(context, tracked.mined.blockNumber)) {
        if (tracked.mined.outcome === "applied") work.applied.push(tracked)
        else work.other.push(conclude(context, tracked))
      }
    } else {
      // Rebroadcast only once every block is read: a transaction not seen while blocks remain
      // unread may well be in one of them. Past its deadline by a block already read it has
      // expired (or was applied: revisit looks at the chain's state) whatever is left to read.
      const unseenMs = nowMs - tracked.sentAtMs
      if (unseenMs > context.heldAfterMs && behind <= 0n) work.late.add(tracked.relayer)
      if (unseenMs > SettlementLimits.rebroadcastAfterMs && (behind <= 0n || pastDeadline(context, tracked.request.deadlineSeconds))) {
        work.stale.push(tracked)
      }
    }
  }
  return work
})

/**
 * Writes the confirmations first, then forgets them: a failed write leaves them tracked for the
 * next round. An entry whose mark was cleared meanwhile (nothing should) stays for that round too.
 */
const confirmApplied = Effect.fnUntraced(function*(context: EngineContext, applied: ReadonlyArray<Tracked>) {
  const marked = applied.flatMap((tracked) => tracked.mined === undefined ? [] : [{ tracked, mined: tracked.mined }])
  for (let from = 0; from < marked.length; from += SettlementLimits.confirmationsPerStatementMax) {
    const chunk = marked.slice(from, from + SettlementLimits.confirmationsPerStatementMax)
    yield* context.finishConfirmed(chunk.map(({ mined, tracked }) => confirmationOf(context, tracked, mined)))
    for (const { tracked } of chunk) untrack(context, tracked)
  }
})

/**
 * Each on its own: one failing (an RPC error, the database) must not interrupt another in the
 * middle of its step; it is logged and looked at again next round.
 */
const alone = (effect: Effect.Effect<void, StepError>) =>
  effect.pipe(Effect.catch((error) => Effect.logWarning("settlement watcher could not conclude a transaction", error)))

/**
 * One watcher round: new blocks' receipts, confirmations, and revisits of stale sends.
 *
 * @since 0.5.0
 * @category steps
 */
export const round = Effect.fnUntraced(function*(context: EngineContext) {
  const { view } = context
  const { head, prefetched } = yield* readHead(context)
  const readAtMs = yield* Clock.currentTimeMillis
  if (head > view.head) {
    view.headStep = head - view.head
    view.head = head
    view.headSeenAtMs = readAtMs
    view.headSeenWithinMs = readAtMs - view.headReadAtMs
  }
  view.headReadAtMs = readAtMs
  yield* scanBlocks(context, head, prefetched)
  const now = yield* Clock.currentTimeMillis
  const behind = head - view.lastScanned
  if (behind > BigInt(SettlementLimits.blocksPerRoundMax) && now - view.lagWarnedAtMs > SettlementLimits.lagWarningEveryMs) {
    view.lagWarnedAtMs = now
    yield* Effect.logWarning("settlement watcher behind the chain").pipe(
      Effect.annotateLogs({ mode: context.chain.mode, blocks_behind: behind.toString() })
    )
  }
  const work = yield* sortInFlight(context, now, behind)
  yield* confirmApplied(context, work.applied)
  yield* Effect.forEach(work.other, alone, { concurrency: SettlementLimits.concludesInParallel, discard: true })
  // A relayer whose next transaction the node holds is sent again in nonce order first; what
  // that sent is not revisited now.
  const resent = new Set<Tracked>()
  if (work.late.size > 0) {
    yield* alone(resendHeld(context, work.late).pipe(Effect.map((sent) => sent.forEach((tracked) => resent.add(tracked)))))
  }
  yield* Effect.forEach(work.stale.filter((tracked) => !resent.has(tracked)), (tracked) => alone(revisit(context, tracked)), {
    concurrency: SettlementLimits.concludesInParallel,
    discard: true
  })
  if (now - view.nonceGapsTriedAtMs > SettlementLimits.nonceFillRetryMs && context.relayers.some((relayer) => relayer.hasGaps())) {
    yield* fillNonceGaps(context)
  }
})

/** The watcher's poll while a block is late or before it saw one (a quarter block, 25 ms at least). */
const pollMsOf = (blockTimeMs: number) => Math.max(25, Math.floor(blockTimeMs / 4))

/**
 * The pause before the next round while transactions are in flight: until shortly before the
 * next block can be made (a block time after the last new head was made: between the head read
 * before it and the one that found it), then short polls until a little after it is due at the
 * latest, then `pollMs` while it is late (a paused node, an irregular chain). A block is so seen
 * a few milliseconds after it is made rather than half a `pollMs` later on average, with about
 * as many head reads a block as polling every `pollMs` (100 ms blocks, as in the benchmark: a
 * round 0-25 ms after the block before, 0-5 ms now). Anchored on each new head as read, the
 * estimate follows the node's own clock and does not drift; after a long pause (an idle watcher
 * polls every half second at least, D85) the short polls cover that pause once, and the next head
 * is read precisely.
 * A head more than one block on from the one read before (blocks faster than `CHAIN_BLOCK_TIME_MS`
 * says, or a round longer than a block) times nothing: the next pause is `pollMs`.
 *
 * @since 0.14.0
 * @category combinators
 */
export const pauseBeforeRound = (context: Pick<EngineContext, "blockTimeMs" | "view">, nowMs: number): number => {
  const { blockTimeMs, view } = context
  const pollMs = pollMsOf(blockTimeMs)
  if (view.headSeenAtMs === 0 || view.headStep > 1n) return pollMs
  const finePollMs = Math.max(5, Math.floor(blockTimeMs / 20))
  const leadMs = Math.max(finePollMs, Math.floor(blockTimeMs / 10))
  const earliestMs = view.headSeenAtMs - view.headSeenWithinMs + blockTimeMs - leadMs
  if (nowMs < earliestMs) return earliestMs - nowMs
  return nowMs < view.headSeenAtMs + blockTimeMs + pollMs ? finePollMs : pollMs
}

/**
 * Runs the watcher for the engine's lifetime: a round, then a pause (timed on the next block
 * while transactions are in flight, `idleWatcherPauseMs` otherwise, cut short by a send).
 *
 * @since 0.5.0
 * @category steps
 */
export const runWatcher = (context: EngineContext) => {
  // With nothing in flight a round can only see new blocks (their time, their base fee, a
  // reorganisation): once a block time is enough, half a second at least once caught up (D85),
  // and a send wakes the watcher at once (an idle node otherwise read the head 40 times a second,
  // most of its idle CPU).
  const pause = Effect.suspend(() =>
    context.inFlight.size === 0
      ? context.watcherWakeup.wait(idleWatcherPauseMs(context))
      : Effect.flatMap(Clock.currentTimeMillis, (nowMs) => Effect.sleep(pauseBeforeRound(context, nowMs)))
  )
  return Effect.forkScoped(
    round(context).pipe(
      Effect.catch((error) => Effect.logWarning("settlement watcher round failed", error)),
      // A defect (a bug) must not end the watcher, or every transfer in flight would stay
      // `pending` until a restart: logged, and the next round runs after a pause.
      Effect.catchDefect((defect) =>
        Effect.logError("settlement watcher round failed unexpectedly", defect).pipe(
          Effect.andThen(Effect.sleep(SettlementLimits.defectPauseMs))
        )
      ),
      Effect.andThen(pause),
      Effect.forever
    )
  )
}
