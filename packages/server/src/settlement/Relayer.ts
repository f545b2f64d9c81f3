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

/** A call to sign: the target, its calldata and its gas limit. */
type Call = { readonly to: Address; readonly data: Hex; readonly gas: bigint }

/** A relayer's nonce bookkeeping, shared by its steps under its lock. */
interface RelayerState {
  readonly client: PublicClient
  readonly chainId: number
  readonly account: LocalAccount
  readonly baseFeeWei: () => bigint
  readonly lock: Semaphore.Semaphore
  /** The next nonce to hand out, once the node's count was read (`counted`). */
  nextNonce: number
  counted: boolean
  /** Set by `catchUp`: the node may be ahead of `nextNonce`. */
  behindTheNode: boolean
  /** Nonces signed here and never sent: handed out again first, lowest first. */
  readonly released: Set<number>
  /** The last transaction signed for each recent nonce (fillers included), to tell a gap from a nonce taken again. */
  readonly lastSigned: Map<number, { readonly txHash: Hex; readonly filler: boolean }>
  /** Gaps: nonce → the expired transaction that left it. */
  readonly gaps: Map<number, Hex>
  /** Whether `adopt` raised `nextNonce` past nonces this process has no transaction for. */
  adoptedAhead: boolean
}

const signingFailed = (cause: unknown) => new ChainError({ message: "signing failed", cause, retryable: false })

const remember = (state: RelayerState, nonce: number, txHash: Hex, filler: boolean) => {
  state.lastSigned.set(nonce, { txHash, filler })
  state.lastSigned.delete(nonce - SettlementLimits.signedNoncesKept)
}

/**
 * A nonce no transaction will carry (`txHash` last held it): the next signature takes it,
 * or, if none comes first, a filler does (a gap).
 */
const giveBack = (state: RelayerState, nonce: number, txHash: Hex) => {
  state.released.add(nonce)
  state.gaps.set(nonce, txHash)
}

/**
 * Nonces from `from` (the node's count) up to `nextNonce` that no transaction known here
 * holds: after a restart, those the earlier process signed and never recorded or sent (a
 * record that failed, a release not yet taken). Adopted transactions above them wait on
 * them, so each is handed out again first, or filled if no signature comes. Normally there
 * are none: every nonce below `nextNonce` was signed here or adopted.
 */
const releaseUnknown = (state: RelayerState, from: number) => {
  if (!state.adoptedAhead) return
  state.adoptedAhead = false
  for (let nonce = Math.max(from, state.nextNonce - SettlementLimits.signedNoncesKept); nonce < state.nextNonce; nonce++) {
    if (state.lastSigned.has(nonce)) continue
    // A stand-in, so that `fillGaps` takes the nonce (as a filler's own) and no real
    // transaction hash ever matches it.
    remember(state, nonce, unknownTransaction, true)
    giveBack(state, nonce, unknownTransaction)
  }
}

/** Reads the node's count of the relayer's transactions when it was never read or may be ahead. */
const countIfNeeded = (state: RelayerState) =>
  Effect.gen(function*() {
    if (state.counted && !state.behindTheNode) return
    const count = yield* Effect.tryPromise({
      try: () => state.client.getTransactionCount({ address: state.account.address, blockTag: "pending" }),
      catch: (cause) => new ChainError({ message: "reading a relayer nonce failed", cause, retryable: true })
    })
    // Forward only: nonces between the node's count and ours are held by transactions
    // signed here (or adopted) and not yet broadcast, and handing them out again would make
    // two transactions of one nonce (one of them refused, and its transfer held up).
    state.nextNonce = Math.max(state.nextNonce, count)
    state.counted = true
    state.behindTheNode = false
    for (const nonce of state.released) if (nonce < count) state.released.delete(nonce)
    releaseUnknown(state, count)
  })

/** The fee cap of a call: the base fee may rise between signing and inclusion. */
const maxFeePerGas = (state: RelayerState) => state.baseFeeWei() * SettlementLimits.baseFeeMultiplier + SettlementLimits.priorityFeeWei

const sign = (state: RelayerState, call: Call) =>
  state.lock.withPermit(Effect.gen(function*() {
    yield* countIfNeeded(state)
    const reused = state.released.size > 0 ? Math.min(...state.released) : undefined
    const nonce = reused ?? state.nextNonce
    const rawTx = yield* Effect.tryPromise({
      try: () =>
        state.account.signTransaction({
          type: "eip1559",
          chainId: state.chainId,
          nonce,
          to: call.to,
          data: call.data,
          gas: call.gas,
          value: 0n,
          maxPriorityFeePerGas: SettlementLimits.priorityFeeWei,
          maxFeePerGas: maxFeePerGas(state)
        }),
      catch: signingFailed
    })
    if (reused === undefined) state.nextNonce = nonce + 1
    else state.released.delete(reused)
    const txHash = keccak256(rawTx)
    remember(state, nonce, txHash, false)
    // A released nonce taken again: this transaction fills its gap.
    state.gaps.delete(nonce)
    return { relayer: state.account.address, nonce, rawTx, txHash }
  }))

const signFiller = (state: RelayerState, nonce: number) =>
  Effect.tryPromise({
    try: () =>
      state.account.signTransaction({
        type: "eip1559",
        chainId: state.chainId,
        nonce,
        to: state.account.address,
        value: 0n,
        gas: SettlementLimits.fillerGas,
        maxPriorityFeePerGas: SettlementLimits.priorityFeeWei * SettlementLimits.fillerFeeBump,
        maxFeePerGas: maxFeePerGas(state) * SettlementLimits.fillerFeeBump
      }),
    catch: signingFailed
  }).pipe(Effect.map((rawTx): SignedCall => ({ relayer: state.account.address, nonce, rawTx, txHash: keccak256(rawTx) })))

const fillGaps = (state: RelayerState, minedNonce: number, max: number, send: (filler: SignedCall) => Effect.Effect<void, ChainError>) =>
  state.lock.withPermit(Effect.gen(function*() {
    releaseUnknown(state, minedNonce)
    for (const nonce of [...state.gaps.keys()]) {
      if (nonce < minedNonce) {
        state.gaps.delete(nonce)
        state.released.delete(nonce)
      }
    }
    const lowest = [...state.gaps.entries()].sort(([a], [b]) => a - b).slice(0, max)
    for (const [nonce, expired] of lowest) {
      // Still the expired transaction's, or a filler's of ours; otherwise a newer transaction took it.
      const last = state.lastSigned.get(nonce)
      if (last === undefined || (last.txHash !== expired && !last.filler)) {
        state.gaps.delete(nonce)
        continue
      }
      const filler = yield* signFiller(state, nonce)
      remember(state, nonce, filler.txHash, true)
      state.released.delete(nonce)
      yield* send(filler)
    }
  }))

const noteGap = (state: RelayerState, txHash: Hex) =>
  state.lock.withPermit(Effect.sync(() => {
    for (const [nonce, last] of state.lastSigned) {
      if (last.txHash === txHash) state.gaps.set(nonce, txHash)
    }
  }))

const adopt = (state: RelayerState, signed: SignedCall) =>
  state.lock.withPermit(Effect.sync(() => {
    if (!state.lastSigned.has(signed.nonce)) remember(state, signed.nonce, signed.txHash, false)
    if (signed.nonce >= state.nextNonce) {
      state.nextNonce = signed.nonce + 1
      state.adoptedAhead = true
      // The next signature reads the node's count again, to find the nonces below.
      state.counted = false
    }
  }))

const release = (state: RelayerState, signed: SignedCall) =>
  state.lock.withPermit(Effect.sync(() => {
    // Only if nothing newer took the nonce meanwhile (see fillGaps).
    if (state.lastSigned.get(signed.nonce)?.txHash !== signed.txHash) return
    giveBack(state, signed.nonce, signed.txHash)
  }))

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
  Effect.map(Semaphore.make(1), (lock) => {
    const state: RelayerState = {
      client,
      chainId,
      account,
      baseFeeWei,
      lock,
      nextNonce: 0,
      counted: false,
      behindTheNode: false,
      released: new Set(),
      lastSigned: new Map(),
      gaps: new Map(),
      adoptedAhead: false
    }
    const relayer: Relayer = {
      address: account.address,
      sign: (call) => sign(state, call),
      noteGap: (txHash) => noteGap(state, txHash),
      hasGaps: () => state.gaps.size > 0,
      fillGaps: (minedNonce, max, send) => fillGaps(state, minedNonce, max, send),
      catchUp: lock.withPermit(Effect.sync(() => {
        state.behindTheNode = true
      })),
      adopt: (signed) => adopt(state, signed),
      release: (signed) => release(state, signed),
      inFlight: 0
    }
    return relayer
  })
