/**
 * What the guardian tells about an account without telling an amount: whether its balance is
 * non-zero, and its balance and per-API-key totals sealed to the account's own registered key.
 *
 * @since 0.5.0
 */
import { EncryptionKey, Note } from "@pps/crypto"
import { Effect } from "effect"
import { bytesToHex, getAddress, type Hex, hexToBytes } from "viem"
import {
  AccountKeyMismatch,
  type NonZeroRequest,
  type SealedBalanceRequest,
  type SealedKeyTotalsResult
} from "../Domain.ts"
import { storage } from "./Failures.ts"
import { type GuardianContext, refFor } from "./GuardianContext.ts"

/**
 * @since 0.5.0
 * @category steps
 */
export const nonZero = Effect.fn("Guardian.nonZero")(function*(context: GuardianContext, request: typeof NonZeroRequest.Type) {
  return yield* storage(Effect.forEach(request.assets, (asset) =>
    context.store.readBalance(refFor(asset.chainId, asset.contract, request.account)).pipe(
      Effect.map((balance) => ({ chainId: asset.chainId, contract: asset.contract, nonZero: balance.confirmed > 0n }))
    )))
})

/**
 * The key to seal an account's figures to. Sealing to any key the caller names would let
 * whoever calls the guardian read any balance or total; with the chain at hand, only the
 * account's registered key is accepted.
 */
const registeredKeyOf = Effect.fnUntraced(function*(context: GuardianContext, request: typeof SealedBalanceRequest.Type) {
  const mismatch = new AccountKeyMismatch({ account: request.account })
  const publicKey = EncryptionKey.parsePublicKey(hexToBytes(request.publicKey as Hex))
  if (!publicKey.ok) return yield* mismatch
  if (context.chain.knows(request.chainId)) {
    const registered = yield* context.chain.encryptionKeyOf(request.chainId, getAddress(request.contract), getAddress(request.account))
    if (registered === undefined || bytesToHex(registered) !== bytesToHex(publicKey.value)) return yield* mismatch
  }
  return publicKey.value
})

/**
 * @since 0.5.0
 * @category steps
 */
export const sealedBalance = Effect.fn("Guardian.sealedBalance")(function*(
  context: GuardianContext,
  request: typeof SealedBalanceRequest.Type
) {
  const account = getAddress(request.account)
  const publicKey = yield* registeredKeyOf(context, request)
  const balance = yield* storage(context.store.readBalance(refFor(request.chainId, request.contract, request.account)))
  const sealed = Note.sealBalanceStatement({
    chainId: request.chainId,
    contract: getAddress(request.contract),
    account,
    accountKey: publicKey,
    statement: { amount: balance.confirmed, ciphertextVersion: balance.version }
  })
  return { sealedStatement: bytesToHex(sealed), version: balance.version }
})

/**
 * D40: every API key's total of confirmed debits from the account, each sealed to its key.
 *
 * @since 0.5.0
 * @category steps
 */
export const sealedKeyTotals = Effect.fn("Guardian.sealedKeyTotals")(function*(
  context: GuardianContext,
  request: typeof SealedBalanceRequest.Type
) {
  const account = getAddress(request.account)
  const publicKey = yield* registeredKeyOf(context, request)
  const totals = yield* storage(context.store.keyTotals(refFor(request.chainId, request.contract, request.account)))
  return totals.map((total) => ({
    apiKeyId: total.apiKeyId,
    sealedTotal: bytesToHex(Note.sealKeyTotal({
      chainId: request.chainId,
      contract: getAddress(request.contract),
      account,
      apiKeyId: total.apiKeyId,
      accountKey: publicKey,
      total: { amount: total.amount, transfers: total.transfers }
    }))
  })) satisfies typeof SealedKeyTotalsResult.Type
})
