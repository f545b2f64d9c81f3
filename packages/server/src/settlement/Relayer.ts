/**
 * One relayer account: signs contract calls with consecutive nonces.
 *
 * Every transaction is signed locally with gas, fees, nonce and chain id all
 * given, then sent raw: viem would otherwise add an `eth_fillTransaction` round
 * trip and estimate gas against state that may be stale by inclusion. Nonces are
 * handed out under a lock; the node's view of the nonce is re-read whenever a
 * send shows ours is off.
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
   * Signs a transaction that does nothing (no value, no data, to this relayer itself) with a
   * nonce handed out before: it fills a nonce whose transaction will never be mined, so the
   * relayer's later transactions can be. Fees are bumped so it also replaces a stuck one.
   */
  readonly signFiller: (nonce: number) => Effect.Effect<SignedCall, ChainError>
  /** Forgets the local nonce, so the next signature asks the node. */
  readonly resync: Effect.Effect<void>
  /** Transactions signed and not yet resolved, for choosing the least loaded relayer. */
  inFlight: number
}

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
    let nextNonce: number | undefined

    const sign = (call: { readonly to: Address; readonly data: Hex; readonly gas: bigint }) =>
      lock.withPermit(Effect.gen(function*() {
        if (nextNonce === undefined) {
          nextNonce = yield* Effect.tryPromise({
            try: () => client.getTransactionCount({ address: account.address, blockTag: "pending" }),
            catch: (cause) => new ChainError({ message: "reading a relayer nonce failed", cause })
          })
        }
        const nonce = nextNonce
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
        nextNonce = nonce + 1
        return { relayer: account.address, nonce, rawTx, txHash: keccak256(rawTx) }
      }))

    // Not under the lock: it hands out no nonce.
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

    const relayer: Relayer = {
      address: account.address,
      sign,
      signFiller,
      resync: lock.withPermit(Effect.sync(() => {
        nextNonce = undefined
      })),
      inFlight: 0
    }
    return relayer
  })
