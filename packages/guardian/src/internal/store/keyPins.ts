/**
 * Pinned keys: the key the guardian encrypts an address's copies to when the address has no key
 * in the contract's registry (an agent: its owner's key), pinned on first use, and kept even if a
 * key is registered for the address later.
 */
import { Effect } from "effect"
import type { StoreContext } from "./context.ts"
import type { AccountRef } from "./rows.ts"

/** The account's pinned key, if one is pinned. */
export const pinnedKey = ({ sql }: StoreContext, account: AccountRef) =>
  sql<{ readonly public_key: string }>`
    SELECT public_key FROM guardian_key_pins
    WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}`.pipe(
    Effect.map((rows) => rows[0]?.public_key)
  )

/** Pins `publicKey` for the account unless one is pinned already; answers the pinned key. */
export const pinKey = (context: StoreContext, account: AccountRef, publicKey: string, nowMs: number) =>
  Effect.gen(function*() {
    yield* context.sql`
      INSERT INTO guardian_key_pins (chain_id, contract, account, public_key, created_at_ms)
      VALUES (${account.chainId}, ${account.contract}, ${account.account}, ${publicKey}, ${String(nowMs)}::bigint)
      ON CONFLICT DO NOTHING`
    return (yield* pinnedKey(context, account)) ?? publicKey
  })
