/**
 * Key rotation holds (D55): the accounts whose rotation the guardian attested, each with the
 * instant past which its attestations can no longer be mined and the latest attestation it took.
 * A hold stays until its latest attestation is mined, or reported failed and shown dead on chain,
 * or past its deadline plus margin. Written in the same group transaction as the check that no
 * reservation of the account is open (steps/KeyRotation.ts), read back in full at start-up.
 */
import { Effect } from "effect"
import type { StoreContext } from "./context.ts"
import type { AccountRef, RotationAttestation, RotationHold } from "./rows.ts"

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

/**
 * The attestation just made becomes the hold's latest; its deadline never shortens the hold's
 * (an earlier attestation's may be later, from another node's clock).
 */
export const recordRotationAttestation = ({ sql }: StoreContext, account: AccountRef, attestation: RotationAttestation) =>
  sql`
    UPDATE guardian_key_rotation_holds SET
      latest_nonce = ${attestation.nonce.toString()},
      latest_previous_digest = ${attestation.previousBalanceDigest.toLowerCase()},
      latest_deadline = GREATEST(COALESCE(latest_deadline, 0), ${attestation.deadline.toString()}::bigint)
    WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}`.pipe(Effect.asVoid)

/**
 * Lifts the account's hold: its latest attestation was mined, or reported failed and shown dead
 * on chain, or is past its deadline plus margin.
 */
export const liftRotationHold = ({ sql }: StoreContext, account: AccountRef) =>
  sql`
    DELETE FROM guardian_key_rotation_holds
    WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}`.pipe(Effect.asVoid)

/** The holds still standing at `nowMs`; those past their instant are deleted on the way. */
export const rotationHolds = ({ sql }: StoreContext, nowMs: number) =>
  Effect.gen(function*() {
    yield* sql`DELETE FROM guardian_key_rotation_holds WHERE until_ms < ${String(nowMs)}::bigint`
    const rows = yield* sql<{
      readonly chain_id: string
      readonly contract: string
      readonly account: string
      readonly until_ms: string
      readonly latest_nonce: string | null
      readonly latest_previous_digest: string | null
      readonly latest_deadline: string | null
    }>`
      SELECT chain_id, contract, account, until_ms::text AS until_ms, latest_nonce, latest_previous_digest,
        latest_deadline::text AS latest_deadline
      FROM guardian_key_rotation_holds`
    return rows.map((row) => ({
      account: { chainId: row.chain_id, contract: row.contract, account: row.account } satisfies AccountRef,
      hold: {
        untilMs: Number(row.until_ms),
        ...(row.latest_nonce === null || row.latest_previous_digest === null || row.latest_deadline === null ? {} : {
          latest: { nonce: BigInt(row.latest_nonce), previousBalanceDigest: row.latest_previous_digest, deadline: BigInt(row.latest_deadline) }
        })
      } satisfies RotationHold
    }))
  })
