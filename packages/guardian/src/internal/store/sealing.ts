/**
 * Sealing at rest, on the way out: every amount the store reads opens through the at-rest
 * box with its row's identity as associated data (internal/atRest.ts). A value that does not
 * open is a defect (the storage was tampered with, or the key is wrong), never a silent zero.
 * (On the way in, each statement seals with `box.seal` and the same binding.)
 */
import { Effect } from "effect"
import type { AtRestBox } from "../atRest.ts"
import { broken } from "./context.ts"
import {
  type AccountRef,
  type BalanceRow,
  type BalanceSqlRow,
  confirmedBinding,
  reservationBinding,
  type ReservationRow,
  type ReservationSqlRow,
  reservedBinding
} from "./rows.ts"

/** Opens a sealed amount bound to `binding`. */
export const open = (box: AtRestBox, sealed: Uint8Array, binding: string): Effect.Effect<bigint> => {
  const value = box.open(new Uint8Array(sealed), binding)
  return value === undefined
    ? broken(
      // The binding's kind and row (e.g. balance/confirmed, reservation/<transfer id>): ids, never amounts.
      `every sealed amount opens with the at-rest key that sealed it (${binding.split("/").slice(3, 5).join("/")}): ` +
        "the storage was not tampered with and GUARDIAN_SECRET is the one that sealed it"
    )
    : Effect.succeed(value)
}

/** A balance row as stored, opened. */
export const toBalance = (box: AtRestBox, row: BalanceSqlRow, account: AccountRef): Effect.Effect<BalanceRow> =>
  Effect.all([open(box, row.confirmed_sealed, confirmedBinding(account)), open(box, row.reserved_sealed, reservedBinding(account))]).pipe(
    Effect.map(([confirmed, reserved]) => ({
      confirmed,
      reserved,
      version: BigInt(row.version),
      owned: row.owned,
      frozenReason: row.frozen_reason
    }))
  )

/** A reservation row as stored, opened. */
export const toReservation = (box: AtRestBox, row: ReservationSqlRow): Effect.Effect<ReservationRow> =>
  open(box, row.amount_sealed, reservationBinding(row.transfer_id)).pipe(
    Effect.map((amount) => ({
      transferId: row.transfer_id,
      chainId: row.chain_id,
      contract: row.contract,
      fromAccount: row.from_account,
      toAccount: row.to_account,
      kind: row.kind,
      nonce: BigInt(row.nonce),
      deadline: BigInt(row.deadline),
      expiresAtMs: Number(row.expires_at_ms),
      amount,
      spendBucket: row.spend_bucket === null ? null : Number(row.spend_bucket),
      requestDigest: row.request_digest,
      result: row.result,
      status: row.status,
      recipientCredited: row.recipient_credited,
      apiKeyId: row.api_key_id,
      refundOf: row.refund_of
    }))
  )
