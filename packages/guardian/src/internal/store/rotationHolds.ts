/**
 * Key rotation holds (D55): the accounts whose rotation the guardian attested and has not heard
 * mined or refused, each with the instant past which its attestation can no longer be mined.
 * Written in the same group transaction as the check that no reservation of the account is open
 * (steps/KeyRotation.ts), read back in full at start-up.
 */
import { Effect } from "effect"
import type { StoreContext } from "./context.ts"
import type { AccountRef } from "./rows.ts"

/**
 * Holds the account until `untilMs`, never shortening a hold already there (an earlier
 * attestation of the account may still be mined).
 */
export const holdForRotation = ({ sql }: StoreContext, account: AccountRef, untilMs: number, nowMs: number) =>
  sql`
    INSERT INTO guardian_key_rotation_holds (chain_id, contract, account, until_ms, created_at_ms)
    VALUES (${account.chainId}, ${account.contract}, ${account.account}, ${String(untilMs)}::bigint, ${String(nowMs)}::bigint)
    ON CONFLICT (chain_id, contract, account)
    DO UPDATE SET until_ms = GREATEST(guardian_key_rotation_holds.until_ms, EXCLUDED.until_ms)`.pipe(Effect.asVoid)

/** Lifts the account's hold (its rotation was mined or refused). */
export const liftRotationHold = ({ sql }: StoreContext, account: AccountRef) =>
  sql`
    DELETE FROM guardian_key_rotation_holds
    WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}`.pipe(Effect.asVoid)

/** The holds still standing at `nowMs`; those past their instant are deleted on the way. */
export const rotationHolds = ({ sql }: StoreContext, nowMs: number) =>
  Effect.gen(function*() {
    yield* sql`DELETE FROM guardian_key_rotation_holds WHERE until_ms < ${String(nowMs)}::bigint`
    const rows = yield* sql<{ readonly chain_id: string; readonly contract: string; readonly account: string; readonly until_ms: string }>`
      SELECT chain_id, contract, account, until_ms::text AS until_ms FROM guardian_key_rotation_holds`
    return rows.map((row) => ({
      account: { chainId: row.chain_id, contract: row.contract, account: row.account } satisfies AccountRef,
      untilMs: Number(row.until_ms)
    }))
  })
