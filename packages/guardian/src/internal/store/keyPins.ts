/**
 * Pinned keys: the key the guardian encrypts an address's copies to when the address has no key
 * in the contract's registry (an agent: its owner's key), pinned on first use, and kept even if a
 * key is registered for the address later. D68: a pin moves only when an attested rotation of the
 * address's balance to another key is seen mined (`guardian_key_repins`, steps/KeyRotation.ts).
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

/**
 * D68: an attested rotation of the account's balance to `newKey`, whose fresh handles digest to
 * `handlesDigest` (`repinHandlesDigest`), mineable until `untilMs`.
 */
export const recordRepin = (
  { sql }: StoreContext,
  account: AccountRef,
  repin: { readonly handlesDigest: string; readonly newKey: string; readonly untilMs: number },
  nowMs: number
) =>
  sql`
    INSERT INTO guardian_key_repins (chain_id, contract, account, handles_digest, new_key, until_ms, created_at_ms)
    VALUES (${account.chainId}, ${account.contract}, ${account.account}, ${repin.handlesDigest}, ${repin.newKey},
      ${String(repin.untilMs)}::bigint, ${String(nowMs)}::bigint)
    ON CONFLICT DO NOTHING`.pipe(Effect.asVoid)

/** D68: the account's attested rotations not yet resolved. */
export const pendingRepins = ({ sql }: StoreContext, account: AccountRef) =>
  sql<{ readonly handles_digest: string; readonly new_key: string; readonly until_ms: string }>`
    SELECT handles_digest, new_key, until_ms::text AS until_ms FROM guardian_key_repins
    WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}`.pipe(
    Effect.map((rows) => rows.map((row) => ({ handlesDigest: row.handles_digest, newKey: row.new_key, untilMs: Number(row.until_ms) })))
  )

/**
 * D68: the account's attested rotations resolved, in one transaction: with `newKey` (one was
 * mined) the pin moves to it and every row goes; without, the rows that can no longer be mined
 * at `nowMs` go.
 */
export const resolveRepins = (context: StoreContext, account: AccountRef, newKey: string | undefined, nowMs: number) =>
  context.sql.withTransaction(Effect.gen(function*() {
    const { sql } = context
    const where = sql`chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}`
    if (newKey === undefined) {
      yield* sql`DELETE FROM guardian_key_repins WHERE ${where} AND until_ms < ${String(nowMs)}::bigint`
      return
    }
    yield* sql`UPDATE guardian_key_pins SET public_key = ${newKey} WHERE ${where}`
    yield* sql`DELETE FROM guardian_key_repins WHERE ${where}`
  }))
