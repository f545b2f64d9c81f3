/**
 * Root hints for `confidentialTransferBatch` (D70): the y of each stored balance point a batch
 * reads, so the contract checks it (one mulmod) instead of recovering it (a modexp, 4k gas).
 *
 * A hint is only a candidate: the contract accepts it when it is the root of the stored point
 * and falls back to the modexp otherwise, so a stale hint (a transaction in flight changed the
 * balance) costs gas, never a wrong sum. A party's later items in the same batch get 0: the
 * contract takes their y from the sums the batch itself wrote.
 *
 * @since 0.7.0
 */
import type { Address } from "viem"

/**
 * The parties of one batch item.
 *
 * @since 0.7.0
 * @category models
 */
export interface BatchParties {
  readonly from: Address
  readonly to: Address
}

/**
 * A balance as `encryptedBalanceOf` and `encryptedBalancesOf` return it.
 *
 * @since 0.7.0
 * @category models
 */
export interface StoredBalancePoints {
  readonly commitment: { readonly y: bigint }
  readonly ownerHandle: { readonly y: bigint }
  readonly guardianHandle: { readonly y: bigint }
}

/** Words per item, in the contract's order: the sender's three points, then the recipient's. */
export const rootHintsPerItem = 6

/**
 * The accounts whose balances a batch reads before writing them, each once, in the order of
 * their first item: what to pass to `encryptedBalancesOf`.
 *
 * @since 0.7.0
 * @category constructors
 */
export const hintedAccounts = (items: ReadonlyArray<BatchParties>): Array<Address> => {
  const seen = new Set<string>()
  const accounts: Array<Address> = []
  for (const item of items) {
    for (const account of [item.from, item.to]) {
      const key = account.toLowerCase()
      if (seen.has(key)) continue
      seen.add(key)
      accounts.push(account)
    }
  }
  return accounts
}

/**
 * The `rootHints` argument: six words per item, the balance's y at the party's first item, 0
 * after it. `balances` are `encryptedBalancesOf(hintedAccounts(items))`, in that order; an
 * unfunded balance reads as (0, 0) and needs no root, so its hint is 0 as well.
 *
 * @since 0.7.0
 * @category constructors
 */
export const rootHints = (items: ReadonlyArray<BatchParties>, balances: ReadonlyArray<StoredBalancePoints>): Array<bigint> => {
  const pending = new Map<string, StoredBalancePoints>()
  hintedAccounts(items).forEach((account, index) => {
    const balance = balances[index]
    if (balance !== undefined) pending.set(account.toLowerCase(), balance)
  })
  const hints: Array<bigint> = []
  for (const item of items) {
    for (const account of [item.from, item.to]) {
      const key = account.toLowerCase()
      const balance = pending.get(key)
      pending.delete(key)
      hints.push(balance?.commitment.y ?? 0n, balance?.ownerHandle.y ?? 0n, balance?.guardianHandle.y ?? 0n)
    }
  }
  return hints
}
