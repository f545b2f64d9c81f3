/**
 * The chain follower (D39): credits come from the chain. The guardian follows the events of
 * every ConfidentialToken that names it as its guardian, in block order, past a confirmation
 * depth, and books each credit exactly once. Each followed contract has a cursor (the next block
 * to read); a crash between a booking and its cursor move re-reads those logs, and their
 * recorded (tx hash, log index) keeps them from counting twice.
 *
 * @since 0.5.0
 */
import { Clock, Effect, Semaphore } from "effect"
import { getAddress, type Hash } from "viem"
import type { SyncRequest, SyncResult } from "../Domain.ts"
import { discoveryScope } from "../internal/store.ts"
import { bookLogs } from "./BookCredits.ts"
import { noEndpoint, storage } from "./Failures.ts"
import type { GuardianContext } from "./GuardianContext.ts"
import { vetoIfUnapproved } from "./RotationVeto.ts"

/** Blocks per getLogs call: public endpoints cap the range of one request. */
export const chainBlockRangeMax = 2_000n
/** Credit logs booked in one transaction by the chain follower (see `bookLogs`). */
const logsPerUnit = 64

/** The last block of the range that starts at `from`: at most `chainBlockRangeMax` blocks, never past `safe`. */
const rangeEnd = (from: bigint, safe: bigint) => (from + chainBlockRangeMax - 1n < safe ? from + chainBlockRangeMax - 1n : safe)

/** Finds, up to block `safe`, the contracts that appoint this guardian, and starts their cursors. */
const discoverContracts = Effect.fnUntraced(function*(context: GuardianContext, chainId: bigint, safe: bigint, nowMs: number) {
  const { chain, store } = context
  const id = chainId.toString()
  yield* storage(store.startCursor(id, discoveryScope, 0n, nowMs))
  let from = (yield* storage(store.cursor(id, discoveryScope))) ?? 0n
  while (from <= safe) {
    const to = rangeEnd(from, safe)
    for (const appointment of yield* chain.appointments(chainId, context.signer, from, to)) {
      const contract = appointment.contract.toLowerCase()
      // Books kept before credits came from the chain hold the credits the server
      // reported: reading that contract's past again would count them twice, so it is
      // followed from now on (an earlier credit never reported shows as a mismatch).
      const reported = yield* storage(store.hasReportedCredits(id, contract))
      const fromBlock = reported ? safe + 1n : appointment.blockNumber
      yield* storage(store.startCursor(id, contract, fromBlock, nowMs))
      yield* Effect.logInfo("following a ConfidentialToken that names this guardian").pipe(
        Effect.annotateLogs({ chain_id: id, contract, from_block: fromBlock.toString() })
      )
    }
    yield* storage(store.advanceCursor(id, discoveryScope, to + 1n, nowMs))
    from = to + 1n
  }
})

/** Reads one followed contract's rotation proposals and credit logs from `nextBlock` up to `safe`, booking them. */
const followContract = Effect.fnUntraced(function*(
  context: GuardianContext,
  chainId: bigint,
  followed: { readonly contract: string; readonly nextBlock: bigint },
  safe: bigint,
  nowMs: number
) {
  const { chain } = context
  const contract = getAddress(followed.contract)
  let next = followed.nextBlock
  while (next <= safe) {
    const to = rangeEnd(next, safe)
    // Before the credits: a veto is the one thing here with a deadline.
    for (const proposal of yield* chain.rotationProposals(chainId, contract, context.signer, next, to)) {
      yield* vetoIfUnapproved(context, chainId, proposal, nowMs)
    }
    const logs = yield* chain.creditLogs(chainId, contract, next, to)
    // A unit holds at most `logsPerUnit` logs: a catch-up after downtime must not hold every
    // row it touches locked in one long transaction.
    for (let start = 0; start < logs.length; start += logsPerUnit) {
      yield* bookLogs(context, chainId, logs.slice(start, start + logsPerUnit), nowMs)
    }
    yield* storage(context.store.advanceCursor(chainId.toString(), followed.contract, to + 1n, nowMs))
    next = to + 1n
  }
})

/**
 * One follower step on a chain: find the contracts that name this guardian, then book every
 * followed contract's credit logs up to the confirmed block, in block order, and move each
 * cursor past what was booked. Answers the confirmed block (-1 when there is none yet).
 */
const followStep = Effect.fnUntraced(function*(context: GuardianContext, chainId: bigint) {
  const head = yield* context.chain.head(chainId)
  const safe = head.blockNumber - BigInt(context.timing.chainConfirmations)
  if (safe < 0n) return -1n
  const nowMs = yield* Clock.currentTimeMillis
  yield* discoverContracts(context, chainId, safe, nowMs)
  for (const followed of yield* storage(context.store.followedContracts(chainId.toString()))) {
    yield* followContract(context, chainId, followed, safe, nowMs)
  }
  return safe
})

/**
 * Books every credit of the chain up to its confirmed block, one step at a time per chain (the
 * loop and `sync` share the chain's lock).
 *
 * @since 0.5.0
 * @category steps
 */
export const followChain = (context: GuardianContext, chainId: bigint) => {
  const lock = context.followLocks.get(chainId)
  return lock === undefined
    ? Effect.fail(noEndpoint(chainId))
    : Semaphore.withPermit(lock, followStep(context, chainId)).pipe(Effect.withSpan("Guardian.followChain"))
}

/**
 * Books the chain's credits through the block of `txHash` now.
 *
 * @since 0.5.0
 * @category steps
 */
export const sync = Effect.fn("Guardian.sync")(function*(context: GuardianContext, request: typeof SyncRequest.Type) {
  if (!context.chain.knows(request.chainId)) return yield* noEndpoint(request.chainId)
  const block = yield* context.chain.blockOfTransaction(request.chainId, request.txHash as Hash)
  if (block === undefined) return { status: "not_found" } satisfies typeof SyncResult.Type
  const through = yield* followChain(context, request.chainId)
  return { status: block <= through ? "synced" : "pending" } satisfies typeof SyncResult.Type
})
