/**
 * One relayer account: signs contract calls with consecutive nonces.
 *
 * Every transaction is signed locally with gas, fees, nonce and chain id all
 * given, then sent raw: viem would otherwise add an `eth_fillTransaction` round
 * trip and estimate gas against state that may be stale by inclusion. Nonces are
 * handed out under a lock and never handed out twice while a transaction holding
 * one may still be broadcast: signatures run ahead of their broadcasts (a record
 * is written in between), so the node's count of pending transactions may lag
 * ours and can only ever move the local nonce forward; so may its count after a restart,
 * when recorded transactions of the earlier process are adopted (their nonces are never
 * handed out again, and an expiry of one is a gap to fill). A nonce signed and never
 * sent (its record failed) is released: the next signature takes it, or, if none
 * comes, a filler does, so the relayer's later transactions do not wait behind it.
 *
 * @since 0.1.0
 */
import { Effect, Semaphore } from "effect"
import type { Address, Hex, LocalAccount, PublicClient } from "viem"
import { keccak256 } from "viem"
import { ChainError } from "./Chains.ts"
import { SettlementLimits } from "./domain.ts"

/**
 * @since 0.1.0
 * @category models
 */
export interface SignedCall {
  readonly relayer: Address
  readonly nonce: number
  readonly rawTx: Hex
  readonly txHash: Hex
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Relayer {
  readonly address: Address
  /** Signs the call with this relayer's next nonce. */
  readonly sign: (call: { readonly to: Address; readonly data: Hex; readonly gas: bigint }) => Effect.Effect<SignedCall, ChainError>
  /**
   * Notes that the transaction `txHash`, signed here, expired without being mined: the chain may
   * wait on its nonce forever, and every later transaction of this relayer with it. Nothing is
   * noted if a newer transaction took that nonce, or if this process did not sign it.
   */
  readonly noteGap: (txHash: Hex) => Effect.Effect<void>
  /** Whether gaps are noted and not yet known filled. */
  readonly hasGaps: () => boolean
  /**
   * Fills the lowest noted gaps at or above `minedNonce` (at most `max`) with a transaction that
   * does nothing (no value, no data, to this relayer itself; fees bumped so it also replaces a
   * stuck one), each signed and handed to `send` under the nonce lock, and only while no newer
   * transaction of this relayer took that nonce (a released nonce is handed out again):
   * a filler never replaces a live transfer. Gaps below `minedNonce` are forgotten.
   */
  readonly fillGaps: (
    minedNonce: number,
    max: number,
    send: (filler: SignedCall) => Effect.Effect<void, ChainError>
  ) => Effect.Effect<void, ChainError>
  /**
   * The node says a nonce of ours is taken (nonce too low, or another transaction holds it):
   * the next signature reads the node's count and goes on from it if it is ahead, never back.
   */
  readonly catchUp: Effect.Effect<void>
  /**
   * A transaction of this relayer signed by an earlier process (or a dead node) and recorded,
   * that this process now drives: its nonce is never handed out again (the node may not hold
   * it yet: its broadcast may have failed), and an expiry of it is a gap `noteGap` knows. A
   * nonce below it that no transaction known here holds (the earlier process signed it and
   * never recorded it) is handed out again first, or filled, at the next count of the node's.
   */
  readonly adopt: (signed: SignedCall) => Effect.Effect<void>
  /**
   * `signed` will never be broadcast (its record failed): its nonce is handed out again, to the
   * next signature or, if none comes first, to a filler, so no later transaction waits behind it.
   */
  readonly release: (signed: SignedCall) => Effect.Effect<void>
  /** Transactions signed and not yet resolved, for choosing the least loaded relayer. */
  inFlight: number
}

/** Stands for "no transaction known here" in a relayer's record of the nonces it handed out. */
const unknownTransaction: Hex = `0x${"00".repeat(32)}`

/**
 * @since 0.1.0
 * @category constructors
 */
export const makeRelayer = (
  client: PublicClient,
  chainId: number,
  account: LocalAccount,
  baseFeeWei: () => bigint
): Effect.Effect<Relayer> =>
  Effect.gen(function*() {
    const lock = yield* Semaphore.make(1)
    /** The next nonce to hand out, once the node's count was read (`counted`). */
    let nextNonce = 0
    let counted = false
    /** Set by `catchUp`: the node may be ahead of `nextNonce`. */
    let behindTheNode = false
    /** Nonces signed here and never sent: handed out again first, lowest first. */
    const released = new Set<number>()
    /** The last transaction signed for each recent nonce (fillers included), to tell a gap from a nonce taken again. */
    const lastSigned = new Map<number, { readonly txHash: Hex; readonly filler: boolean }>()
    /** Gaps: nonce → the expired transaction that left it. */
    const gaps = new Map<number, Hex>()
    const remember = (nonce: number, txHash: Hex, filler: boolean) => {
      lastSigned.set(nonce, { txHash, filler })
      lastSigned.delete(nonce - SettlementLimits.signedNoncesKept)
    }
    /**
     * A nonce no transaction will carry (`txHash` last held it): the next signature takes it,
     * or, if none comes first, a filler does (a gap).
     */
    const giveBack = (nonce: number, txHash: Hex) => {
      released.add(nonce)
      gaps.set(nonce, txHash)
    }
    /** Whether `adopt` raised `nextNonce` past nonces this process has no transaction for. */
    let adoptedAhead = false

    /**
     * Nonces from `from` (the node's count) up to `nextNonce` that no transaction known here
     * holds: after a restart, those the earlier process signed and never recorded or sent (a
     * record that failed, a release not yet taken). Adopted transactions above them wait on
     * them, so each is handed out again first, or filled if no signature comes. Normally there
     * are none: every nonce below `nextNonce` was signed here or adopted.
     */
    const releaseUnknown = (from: number) => {
      if (!adoptedAhead) return
      adoptedAhead = false
      for (let nonce = Math.max(from, nextNonce - SettlementLimits.signedNoncesKept); nonce < nextNonce; nonce++) {
        if (lastSigned.has(nonce)) continue
        // A stand-in, so that `fillGaps` takes the nonce (as a filler's own) and no real
        // transaction hash ever matches it.
        remember(nonce, unknownTransaction, true)
        giveBack(nonce, unknownTransaction)
      }
    }

    const sign = (call: { readonly to: Address; readonly data: Hex; readonly gas: bigint }) =>
      lock.withPermit(Effect.gen(function*() {
        if (!counted || behindTheNode) {
          const count = yield* Effect.tryPromise({
            try: () => client.getTransactionCount({ address: account.address, blockTag: "pending" }),
            catch: (cause) => new ChainError({ message: "reading a relayer nonce failed", cause })
          })
          // Forward only: nonces between the node's count and ours are held by transactions
          // signed here (or adopted) and not yet broadcast, and handing them out again would make
          // two transactions of one nonce (one of them refused, and its transfer held up).
          nextNonce = Math.max(nextNonce, count)
          counted = true
          behindTheNode = false
          for (const nonce of released) if (nonce < count) released.delete(nonce)
          releaseUnknown(count)
        }
        const reused = released.size > 0 ? Math.min(...released) : undefined
        const nonce = reused ?? nextNonce
        const rawTx = yield* Effect.tryPromise({
          try: () =>
            account.signTransaction({
              type: "eip1559",
              chainId,
              nonce,
              to: call.to,
              data: call.data,
              gas: call.gas,
              value: 0n,
              maxPriorityFeePerGas: SettlementLimits.priorityFeeWei,
              maxFeePerGas: baseFeeWei() * SettlementLimits.baseFeeMultiplier + SettlementLimits.priorityFeeWei
            }),
          catch: (cause) => new ChainError({ message: "signing failed", cause })
        })
        if (reused === undefined) nextNonce = nonce + 1
        else released.delete(reused)
        const txHash = keccak256(rawTx)
        remember(nonce, txHash, false)
        // A released nonce taken again: this transaction fills its gap.
        gaps.delete(nonce)
        return { relayer: account.address, nonce, rawTx, txHash }
      }))

    const signFiller = (nonce: number) =>
      Effect.tryPromise({
        try: () =>
          account.signTransaction({
            type: "eip1559",
            chainId,
            nonce,
            to: account.address,
            value: 0n,
            gas: SettlementLimits.fillerGas,
            maxPriorityFeePerGas: SettlementLimits.priorityFeeWei * SettlementLimits.fillerFeeBump,
            maxFeePerGas: (baseFeeWei() * SettlementLimits.baseFeeMultiplier + SettlementLimits.priorityFeeWei) *
              SettlementLimits.fillerFeeBump
          }),
        catch: (cause) => new ChainError({ message: "signing failed", cause })
      }).pipe(Effect.map((rawTx): SignedCall => ({ relayer: account.address, nonce, rawTx, txHash: keccak256(rawTx) })))

    const fillGaps = (minedNonce: number, max: number, send: (filler: SignedCall) => Effect.Effect<void, ChainError>) =>
      lock.withPermit(Effect.gen(function*() {
        releaseUnknown(minedNonce)
        for (const nonce of [...gaps.keys()]) {
          if (nonce < minedNonce) {
            gaps.delete(nonce)
            released.delete(nonce)
          }
        }
        const lowest = [...gaps.entries()].sort(([a], [b]) => a - b).slice(0, max)
        for (const [nonce, expired] of lowest) {
          // Still the expired transaction's, or a filler's of ours; otherwise a newer transaction took it.
          const last = lastSigned.get(nonce)
          if (last === undefined || (last.txHash !== expired && !last.filler)) {
            gaps.delete(nonce)
            continue
          }
          const filler = yield* signFiller(nonce)
          remember(nonce, filler.txHash, true)
          released.delete(nonce)
          yield* send(filler)
        }
      }))

    const relayer: Relayer = {
      address: account.address,
      sign,
      noteGap: (txHash) =>
        lock.withPermit(Effect.sync(() => {
          for (const [nonce, last] of lastSigned) {
            if (last.txHash === txHash) gaps.set(nonce, txHash)
          }
        })),
      hasGaps: () => gaps.size > 0,
      fillGaps,
      catchUp: lock.withPermit(Effect.sync(() => {
        behindTheNode = true
      })),
      adopt: (signed) =>
        lock.withPermit(Effect.sync(() => {
          if (!lastSigned.has(signed.nonce)) remember(signed.nonce, signed.txHash, false)
          if (signed.nonce >= nextNonce) {
            nextNonce = signed.nonce + 1
            adoptedAhead = true
            // The next signature reads the node's count again, to find the nonces below.
            counted = false
          }
        })),
      release: (signed) =>
        lock.withPermit(Effect.sync(() => {
          // Only if nothing newer took the nonce meanwhile (see fillGaps).
          if (lastSigned.get(signed.nonce)?.txHash !== signed.txHash) return
          giveBack(signed.nonce, signed.txHash)
        })),
      inFlight: 0
    }
    return relayer
  })
