/**
 * Amounts and memos opened in the page with the holder's key: each transfer's once per unlocked
 * key (a transfer's amount and memo never change), so a list refreshed by a live event, the
 * activity's reconciliation and the agents' spending do not open the same transfer again. The
 * cache is held by the key pair itself (a WeakMap): when the page drops the key, what it opened
 * goes with it.
 */
import type { EncryptionKey } from "@pps/crypto"
import { Amount } from "@pps/sdk"
import { ppsFor } from "./pps.ts"

/** What a transfer's sealed copy holds, opened and checked against the chain's ciphertext. */
export interface Opened {
  /** Base units of `asset`. */
  readonly amount: bigint
  readonly asset: string
  readonly memo: string
}

const byKey = new WeakMap<EncryptionKey.KeyPair, Map<string, Promise<Opened>>>()

/**
 * Opens a transfer's amount and memo with the key. Rejects as the SDK does (a standard transfer's
 * copy cannot be checked; the network failed); a rejection is not kept, so a later call tries again.
 */
export const openTransfer = (keyPair: EncryptionKey.KeyPair, transferId: string): Promise<Opened> => {
  const opened = byKey.get(keyPair) ?? new Map<string, Promise<Opened>>()
  byKey.set(keyPair, opened)
  const known = opened.get(transferId)
  if (known !== undefined) return known
  const opening = ppsFor(keyPair).transfers.decrypt(transferId).then((one) => ({ amount: one.amount, asset: one.asset, memo: one.memo }))
  opened.set(transferId, opening)
  opening.catch(() => opened.delete(transferId))
  return opening
}

/** An amount as the page writes it: `7.654321 USDG`. */
export const amountText = (asset: string, amount: bigint): string => `${Amount.format(asset, amount)} ${asset}`

/** A signed decimal (`-1.5`, `100`; `plus` before a positive one), `minus` before a negative one. */
export const signedDecimal = (asset: string, amount: bigint, signs: { readonly minus: string; readonly plus: string }): string =>
  `${amount < 0n ? signs.minus : signs.plus}${Amount.format(asset, amount < 0n ? -amount : amount)}`

/**
 * A decimal string the API answered (D4's shortest exact form: `"12.5"`, `"0"`) in base units of
 * `asset`, exactly (no floating point).
 */
export const unitsOf = (asset: string, text: string): bigint => {
  const decimals = Amount.decimalsOf(asset)
  const [whole = "0", fraction = ""] = text.split(".")
  return BigInt(whole === "" ? "0" : whole) * 10n ** BigInt(decimals) + BigInt(fraction.padEnd(decimals, "0").slice(0, decimals))
}

/** A policy limit (a number of USDG, D22) in base units. */
export const limitUnits = (value: number): bigint => unitsOf("USDG", value.toFixed(6))
