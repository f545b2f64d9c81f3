/**
 * Settlement's vocabulary: what is submitted to the chain, the states a
 * submission goes through, and the limits that bound it. Pure: no I/O.
 *
 * A submission is one contract call the server must get mined exactly once
 * (a confidential or public transfer, a key registration). It is recorded
 * before it is signed or sent, so after a crash every submission that was not
 * known to be final is looked at again: a receipt found is recorded; none found
 * means the same signed transaction is sent again, or, when its relayer nonce
 * was spent meanwhile, a new one — safe because the contract refuses a reused
 * transfer nonce (`NonceUsed`), so nothing is applied twice.
 *
 * @since 0.1.0
 */
import type { Address, Hex } from "viem"
import type { Mode } from "@pps/api/ApiKeys"

/**
 * @since 0.1.0
 * @category models
 */
export type SubmissionKind = "confidential_transfer" | "public_transfer" | "register_key" | "rotation_veto" | "rotate_key"

/**
 * `recorded`: in the database, not yet signed. `sent`: signed and broadcast
 * (possibly again after a restart). `confirmed` / `failed`: final.
 *
 * @since 0.1.0
 * @category models
 */
export type SubmissionStatus = "recorded" | "sent" | "confirmed" | "failed"

/**
 * Why a submission failed: the call reverted, or its guardian attestation
 * expired before it could be mined.
 *
 * @since 0.1.0
 * @category models
 */
export type FailureReason = "reverted" | "expired"

/**
 * A contract call to get mined exactly once.
 *
 * @since 0.1.0
 * @category models
 */
export interface SubmissionRequest {
  /** The caller's id for it (a transfer id): submitting the same id twice is a no-op. */
  readonly submissionId: string
  readonly mode: Mode
  readonly kind: SubmissionKind
  readonly target: Address
  readonly data: Hex
  readonly gasLimit: bigint
  /** Unix seconds after which the call can no longer succeed (the attestation's deadline). */
  readonly deadlineSeconds: bigint | null
  /**
   * For transfers: the debited address and its replay nonce (to ask the contract
   * whether it was used) and the transfer id its event is indexed by (to find the
   * transaction that used it).
   */
  readonly replayKey: { readonly sender: Address; readonly nonce: bigint; readonly transferId: Hex } | null
}

/**
 * The final outcome of a submission.
 *
 * @since 0.1.0
 * @category models
 */
export type Resolution =
  | {
    readonly _tag: "Confirmed"
    readonly submissionId: string
    readonly mode: Mode
    readonly txHash: Hex
    readonly blockNumber: bigint
    readonly blockTimestampSeconds: bigint
  }
  | {
    readonly _tag: "Failed"
    readonly submissionId: string
    readonly mode: Mode
    readonly txHash: Hex | null
    readonly reason: FailureReason
  }

/**
 * Gas limits given explicitly (an estimate would run against state that may be
 * stale by inclusion). Measured (docs/benchmarks.md), ConfidentialToken v2 with the
 * sender's co-signature (D51): a steady confidential transfer uses 114.0k, a sender's first
 * debit after a shield 268.0k, a public transfer 97.2k (its first debit after a shield, to a
 * fresh address, about 200k), a registration 90.4k; each limit leaves room above the worst case.
 *
 * @since 0.1.0
 * @category constants
 */
export const gasLimits: Record<SubmissionKind, bigint> = {
  confidential_transfer: 350_000n,
  public_transfer: 260_000n,
  register_key: 150_000n,
  // Measured 63,411 in v2 (the bounded veto's counter, D52; docs/benchmarks.md).
  rotation_veto: 100_000n,
  // D55: measured 105,304 over a funded balance (ConfidentialToken v2's gas bench,
  // docs/benchmarks.md); a balance never funded (its three words still zero, D66) writes three
  // fresh slots, ~60k more.
  rotate_key: 350_000n
}

/**
 * Limits of the settlement machinery.
 *
 * @since 0.1.0
 * @category constants
 */
export const SettlementLimits = {
  /** A sent transaction not seen in a block for this long is broadcast again (dropped by a node, lost by a restart). */
  rebroadcastAfterMs: 15_000,
  /**
   * A relayer with a transaction not seen in a block for this long (or three blocks, if longer)
   * has the node's pool looked at for its next transaction held `queued` (anvil: see
   * Settlement's `resendHeld`), at most once per such period per relayer. Far below the
   * rebroadcast age: a held transaction holds every later one of its relayer.
   */
  heldCheckAfterMs: 3_000,
  /**
   * A relayer nonce whose transaction expired unmined (its broadcast refused until its deadline,
   * e.g. a relayer without gas funds) is filled with a no-op so the relayer's later transactions
   * can be mined; a fill the node refuses is tried again this often.
   */
  nonceFillRetryMs: 3_000,
  /** Gas of the no-op that fills a nonce (a plain transfer of nothing). */
  fillerGas: 21_000n,
  /** The no-op's fees over a call's: enough to replace a stuck transaction (nodes ask for +10 %). */
  fillerFeeBump: 2n,
  /** Gaps one relayer fills per try at most (the lowest first: the chain needs them in order). */
  fillsPerTry: 4,
  /** Recent nonces whose last signed transaction a relayer remembers (to tell a gap from a nonce taken again). */
  signedNoncesKept: 4_096,
  /**
   * How often a node looks for open submissions whose node died (NodeLiveness: dead after
   * 10 s without a heartbeat), so a dead node's transfers finish within about 12 s.
   */
  adoptOrphansEveryMs: 2_000,
  /**
   * A send whose relayer nonce the node keeps reporting as spent ("nonce too low") is signed
   * again with a fresh nonce at most this many times in a row; then it waits for the
   * rebroadcast round and recovery instead of looping.
   */
  sendAttemptsMax: 5,
  /**
   * Sends (sign, record the bytes, broadcast) one relayer runs at once when batching. Recording
   * waits its turn on the database, so a send takes as long as the database's queue: with one
   * send per relayer, calls queued behind it wait a whole send longer (measured at 64 clients:
   * half the throughput of unbatched sending). With several, a batch still forms from whatever
   * queued while all of them were busy.
   */
  sendsPerRelayer: 4,
  /**
   * How far below the confirmation depth the watcher keeps scanned blocks' hashes to find where
   * a reorganised chain forked (a reorganisation deeper than `CHAIN_CONFIRMATIONS` is beyond
   * what the depth guards against; this only bounds the walk down to the fork).
   */
  reorgDepthMax: 64,
  /** Blocks scanned per watcher round at most, so a long outage catches up in bounded steps. */
  blocksPerRoundMax: 50,
  /**
   * The least pause between a watcher's rounds while nothing is in flight (D85): a send wakes it at
   * once, so on a chain faster than this (anvil's 100 ms blocks) an idle watcher reads the blocks
   * made meanwhile together, in one request, instead of one round a block.
   */
  idleRoundEveryMsMin: 500,
  /** Blocks (with their receipts) a watcher round reads at once. */
  blockReadsInParallel: 8,
  /** Reverted, expired or stale transactions a watcher round looks into at once. */
  concludesInParallel: 8,
  /** After a watcher round ended by a defect, the pause before the next (a bug that repeats must not flood the log). */
  defectPauseMs: 1_000,
  /** Confirmations written per statement (4 parameters each, far below PostgreSQL's 65,535). */
  confirmationsPerStatementMax: 1_000,
  /**
   * Blocks one `eth_getLogs` covers when looking for the event of a transfer applied by another
   * transaction: RPC providers cap a query's block range (often at a few thousand blocks), so the
   * search walks back from the newest block in windows of this size instead of asking from block 0.
   */
  eventSearchWindowBlocks: 1_000n,
  /** A watcher further behind the chain than a round's blocks says so at most this often. */
  lagWarningEveryMs: 10_000,
  /** Tip per gas offered: enough for any dev chain or quiet testnet to include us at once. */
  priorityFeeWei: 1_000_000_000n,
  /** Base fee may rise between signing and inclusion; paying up to this multiple absorbs it. */
  baseFeeMultiplier: 2n
} as const
