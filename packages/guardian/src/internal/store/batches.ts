/**
 * The store's multi-row statements: each writes many rows of one table in one statement, a
 * group's changed or new rows together at its flush (a statement costs the embedded database
 * about as much for one row as for several: the throughput work), or one row outside a group.
 * Every amount is sealed here, bound to its row.
 */
import { Effect } from "effect"
import type { SqlError } from "effect/sql"
import { valuesPlaceholders } from "../../SqlValues.ts"
import {
  everyHeldRow,
  type HeldKeyTotal,
  type NewChainCredit,
  type NewDecision,
  type NewReservation,
  type ReservationChange,
  type StoreSql
} from "./context.ts"
import { type AccountRef, type BalanceWrite, confirmedBinding, keyTotalBinding, reservationBinding, reservedBinding } from "./rows.ts"

/** Writes locked balances in one statement, each row checked written. */
export const updateBalances = (
  { box, sql }: StoreSql,
  entries: ReadonlyArray<{ readonly account: AccountRef; readonly balance: BalanceWrite }>
): Effect.Effect<void, SqlError.SqlError> => {
  if (entries.length === 0) return Effect.void
  const values = valuesPlaceholders(entries.length, ["::text", "::text", "::text", "::bytea", "::bytea", "::bigint", "::boolean"])
  return sql.unsafe<{ readonly account: string }>(
    `UPDATE guardian_balances b
     SET confirmed_sealed = v.confirmed_sealed, reserved_sealed = v.reserved_sealed, version = v.version, owned = v.owned
     FROM (VALUES ${values}) AS v (chain_id, contract, account, confirmed_sealed, reserved_sealed, version, owned)
     WHERE b.chain_id = v.chain_id AND b.contract = v.contract AND b.account = v.account
     RETURNING b.account`,
    entries.flatMap(({ account, balance }) => [
      account.chainId,
      account.contract,
      account.account,
      box.seal(balance.confirmed, confirmedBinding(account)),
      box.seal(balance.reserved, reservedBinding(account)),
      balance.version.toString(),
      balance.owned
    ])
  ).pipe(Effect.flatMap(everyHeldRow(entries.length, "balance rows")))
}

/** Writes locked API-key totals in one statement, as `updateBalances`. */
export const updateKeyTotals = (
  { box, sql }: StoreSql,
  entries: ReadonlyArray<HeldKeyTotal>
): Effect.Effect<void, SqlError.SqlError> => {
  if (entries.length === 0) return Effect.void
  const values = valuesPlaceholders(entries.length, ["::text", "::text", "::text", "::text", "::bytea", "::bigint"])
  return sql.unsafe<{ readonly account: string }>(
    `UPDATE guardian_key_totals t SET total_sealed = v.total_sealed, transfers = t.transfers + v.added
     FROM (VALUES ${values}) AS v (chain_id, contract, account, api_key_id, total_sealed, added)
     WHERE t.chain_id = v.chain_id AND t.contract = v.contract AND t.account = v.account AND t.api_key_id = v.api_key_id
     RETURNING t.account`,
    entries.flatMap((entry) => [
      entry.account.chainId,
      entry.account.contract,
      entry.account.account,
      entry.apiKeyId,
      box.seal(entry.total, keyTotalBinding(entry.account, entry.apiKeyId)),
      String(entry.added)
    ])
  ).pipe(Effect.flatMap(everyHeldRow(entries.length, "key totals")))
}

const reservationCasts = [
  "::text", "::text", "::text", "::text", "::text", "::text", "::text", "::bigint", "::bigint", "::bytea", "::bigint",
  "::text", "::text", "::bigint", "::text", "::text"
]

/** Inserts reservations in one statement; answers the transfer ids inserted (an existing one is skipped). */
export const insertReservationRows = ({ box, sql }: StoreSql, entries: ReadonlyArray<NewReservation>) =>
  sql.unsafe<{ readonly transfer_id: string }>(
    `INSERT INTO guardian_reservations (transfer_id, chain_id, contract, from_account, to_account, kind, nonce, deadline,
       expires_at_ms, amount_sealed, spend_bucket, request_digest, result, created_at_ms, api_key_id, refund_of, status)
     VALUES ${valuesPlaceholders(entries.length, reservationCasts, ", 'reserved'")}
     ON CONFLICT (transfer_id) DO NOTHING
     RETURNING transfer_id`,
    entries.flatMap(({ nowMs, reservation }) => [
      reservation.transferId,
      reservation.chainId,
      reservation.contract,
      reservation.fromAccount,
      reservation.toAccount,
      reservation.kind,
      reservation.nonce.toString(),
      reservation.deadline.toString(),
      String(reservation.expiresAtMs),
      box.seal(reservation.amount, reservationBinding(reservation.transferId)),
      reservation.spendBucket === null ? null : String(reservation.spendBucket),
      reservation.requestDigest,
      reservation.result,
      String(nowMs),
      reservation.apiKeyId,
      reservation.refundOf
    ])
  )

/** Inserts decisions in one statement; answers the transfer ids inserted (an existing one is skipped). */
export const insertDecisionRows = ({ sql }: StoreSql, entries: ReadonlyArray<readonly [string, NewDecision]>) =>
  sql.unsafe<{ readonly transfer_id: string }>(
    `INSERT INTO guardian_decisions (transfer_id, request_digest, held, redecisions, decided_at_ms)
     VALUES ${valuesPlaceholders(entries.length, ["::text", "::text", "::boolean", "::integer", "::bigint"])}
     ON CONFLICT (transfer_id) DO NOTHING
     RETURNING transfer_id`,
    entries.flatMap(([transferId, { decision, nowMs }]) => [
      transferId,
      decision.requestDigest,
      decision.held,
      String(decision.redecisions),
      String(nowMs)
    ])
  )

/** The status changes of a group's locked reservations in one statement, each row checked written. */
export const updateReservations = (
  { sql }: StoreSql,
  entries: ReadonlyArray<readonly [string, ReservationChange]>
): Effect.Effect<void, SqlError.SqlError> => {
  if (entries.length === 0) return Effect.void
  return sql.unsafe<{ readonly transfer_id: string }>(
    `UPDATE guardian_reservations r
     SET status = v.status, settled_at_ms = COALESCE(v.settled_at_ms, r.settled_at_ms),
       recipient_credited = r.recipient_credited OR v.recipient_credited
     FROM (VALUES ${valuesPlaceholders(entries.length, ["::text", "::text", "::bigint", "::boolean"])})
       AS v (transfer_id, status, settled_at_ms, recipient_credited)
     WHERE r.transfer_id = v.transfer_id
     RETURNING r.transfer_id`,
    entries.flatMap(([transferId, change]) => [
      transferId,
      change.status,
      change.settledAtMs === null ? null : String(change.settledAtMs),
      change.recipientCredited
    ])
  ).pipe(Effect.flatMap(everyHeldRow(entries.length, "reservations")))
}

const chainCreditCasts = ["::text", "::text", "::integer", "::text", "::text", "::text", "::text", "::bigint", "::text", "::bigint"]

/** Inserts credit logs in one statement; answers a row for each one inserted (one recorded before is skipped). */
export const insertChainCreditRows = ({ sql }: StoreSql, entries: ReadonlyArray<NewChainCredit>) =>
  sql.unsafe<{ readonly tx_hash: string }>(
    `INSERT INTO guardian_chain_credits (chain_id, tx_hash, log_index, contract, account, kind, transfer_id, block_number,
       outcome, created_at_ms)
     VALUES ${valuesPlaceholders(entries.length, chainCreditCasts)}
     ON CONFLICT DO NOTHING
     RETURNING tx_hash`,
    entries.flatMap(({ credit, nowMs }) => [
      credit.chainId,
      credit.txHash,
      String(credit.logIndex),
      credit.contract,
      credit.account,
      credit.kind,
      credit.transferId,
      credit.blockNumber.toString(),
      credit.outcome,
      String(nowMs)
    ])
  )
