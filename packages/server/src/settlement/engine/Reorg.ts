/**
 * Reorganisation handling: when a scanned block's parent is not the block scanned at its
 * height, the chain changed under the watcher. What the replaced blocks carried must not count
 * on (the depth CHAIN_CONFIRMATIONS asks for guards exactly that): it is watched again, and the
 * scan goes on from the highest block the chain and the scan agree on.
 *
 * @since 0.5.0
 */
import { Clock, Effect } from "effect"
import { allInFlight, type EngineContext, rpc, type Tracked } from "./EngineContext.ts"

/**
 * Seen mined in a block the chain no longer has: watched again.
 *
 * @since 0.5.0
 * @category steps
 */
export const forgetMined = (tracked: Tracked, nowMs: number): void => {
  // Applied by another transaction (or a placeholder with no bytes of its own): whether the
  // new chain applies it is decided from the chain once the deadline passes, as for a revert
  // (its own bytes, if any, were refused or reverted: nothing to send again).
  tracked.revertedBeforeDeadline = tracked.mined?.appliedBy !== undefined || tracked.rawTx === "0x"
  tracked.mined = undefined
  // Nodes put a replaced block's transactions back in their pool; one that does not gets
  // the same bytes again after the rebroadcast age.
  tracked.sentAtMs = nowMs
}

/**
 * The block scanned at `from` may no longer be the chain's: finds the highest block the
 * chain and the scan agree on (reading only, so a failed read changes nothing and the next
 * round finds the same mismatch), then forgets what was seen mined above it and has the next
 * round scan the new chain from there. A height never scanned counts as agreed (below the
 * kept window, or below where this process started: deeper than the depth guards anyway).
 *
 * @since 0.5.0
 * @category steps
 */
export const rewind = Effect.fnUntraced(function*(context: EngineContext, from: bigint) {
  const { scannedHashes, view } = context
  let fork = from
  let forkBlock: { readonly timestamp: bigint; readonly baseFeePerGas: bigint | null } | undefined
  while (scannedHashes.has(fork)) {
    const height = fork
    const canonical = yield* rpc(context, "reading a block", (client) => client.getBlock({ blockNumber: height }))
    if (canonical.hash === scannedHashes.get(fork)) {
      forkBlock = canonical
      break
    }
    fork -= 1n
  }
  const forkHeight = fork
  forkBlock ??= yield* rpc(context, "reading a block", (client) => client.getBlock({ blockNumber: forkHeight }))
  for (const n of scannedHashes.keys()) if (n > fork) scannedHashes.delete(n)
  view.lastScanned = fork
  // The replaced blocks' time and fees are not the chain's: a deadline is judged by the fork's.
  view.latestTimestampSeconds = forkBlock.timestamp
  view.baseFeeWei = forkBlock.baseFeePerGas ?? view.baseFeeWei
  // Equal: a block of this round was read before the chain moved on; nothing was replaced.
  if (fork === from) return
  let unseen = 0
  const now = yield* Clock.currentTimeMillis
  for (const tracked of allInFlight(context)) {
    if (tracked.mined === undefined || tracked.mined.blockNumber <= fork) continue
    forgetMined(tracked, now)
    unseen += 1
  }
  yield* Effect.logWarning("the chain reorganised under the settlement watcher: what the replaced blocks carried is watched again").pipe(
    Effect.annotateLogs({ mode: context.chain.mode, replaced_from_block: (fork + 1n).toString(), transactions_unseen: unseen })
  )
})
