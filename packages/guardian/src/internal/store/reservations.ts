/**
 * Reservations: one row per attested transfer, its amount sealed at rest, its status moving
 * from `reserved` to `confirmed`, `failed` or `expired` (and, released, back to `reserved` once for
 * each fresh decision of an owner's approval, D45). Inside a group, a reservation the
 * prefetch locked is read from and changed in memory, and a new one with a free nonce is
 * recorded in memory; the group's flush writes them (internal/store/heldRows.ts).
 */
import { Effect } from "effect"
import { insertReservationRows } from "./batches.ts"
import { heldRows, type ReservationChange, type StoreContext } from "./context.ts"
import { afterRecords } from "./heldRows.ts"
import {
  type AccountRef,
  type NewReservationRow,
  nonceId,
  reservationBinding,
  reservationColumns,
  type ReservationSqlRow,
  type ReservationStatus
} from "./rows.ts"
import { open, toReservation } from "./sealing.ts"

/** The reservation of a transfer id, if any; with `forUpdate`, locked for the caller's transaction. */
export const findReservation = (context: StoreContext, transferId: string, options: { readonly forUpdate: boolean }) =>
  Effect.gen(function*() {
    // Locked by the group's prefetch and not written since: the row as a read would give it.
    const prefetched = (yield* heldRows)?.reservations.get(transferId)
    if (prefetched !== undefined) return prefetched
    const { sql } = context
    const rows = yield* afterRecords(
      context,
      options.forUpdate
        ? sql<ReservationSqlRow>`SELECT ${sql.literal(reservationColumns)} FROM guardian_reservations WHERE transfer_id = ${transferId} FOR UPDATE`
        : sql<ReservationSqlRow>`SELECT ${sql.literal(reservationColumns)} FROM guardian_reservations WHERE transfer_id = ${transferId}`
    )
    const row = rows[0]
    return row === undefined ? undefined : yield* toReservation(context.box, row)
  })

/** Inserts a reservation; false when the transfer id exists already (a concurrent twin). */
export const insertReservation = (context: StoreContext, reservation: NewReservationRow, nowMs: number) =>
  Effect.gen(function*() {
    const held = yield* heldRows
    const sender = { chainId: reservation.chainId, contract: reservation.contract, account: reservation.fromAccount }
    const nonce = nonceId(sender, reservation.nonce)
    const reserved = held?.reservedIds.get(reservation.transferId)
    // Known to the group (see `HeldRows`): an existing transfer id is a conflict, as ON CONFLICT
    // would answer; a new one with a free nonce is recorded in memory. A taken nonce goes to SQL,
    // whose unique index refuses it as it always did.
    if (held !== undefined && reserved !== undefined) {
      if (reserved) return false
      if (held.noncesTaken.get(nonce) === false) {
        held.reservedIds.set(reservation.transferId, true)
        held.noncesTaken.set(nonce, true)
        held.newReservations.set(reservation.transferId, { reservation, nowMs })
        return true
      }
    }
    // (An insert never changes an existing row: a reservation the group holds stays as it is.)
    const inserted = (yield* afterRecords(context, insertReservationRows(context, [{ reservation, nowMs }]))).length === 1
    held?.reservedIds.set(reservation.transferId, true)
    if (inserted) held?.noncesTaken.set(nonce, true)
    return inserted
  })

/**
 * Rewrites a released reservation (`expired` or `failed`) as the reservation of a fresh decision
 * under the same transfer id and the same nonce (an owner's approval decided again, D45): the row
 * in place, since the transfer id and the sender's nonce each name one row. False when the row is
 * no longer released under that nonce (a late confirmation came first): nothing changed.
 */
export const replaceReservation = (context: StoreContext, reservation: NewReservationRow, nowMs: number) =>
  Effect.gen(function*() {
    const { box, sql } = context
    const rows = yield* afterRecords(context, sql<{ readonly transfer_id: string }>`
      UPDATE guardian_reservations
      SET to_account = ${reservation.toAccount}, kind = ${reservation.kind}, deadline = ${reservation.deadline.toString()}::bigint,
        expires_at_ms = ${String(reservation.expiresAtMs)}::bigint,
        amount_sealed = ${box.seal(reservation.amount, reservationBinding(reservation.transferId))},
        spend_bucket = ${reservation.spendBucket === null ? null : String(reservation.spendBucket)}::bigint,
        request_digest = ${reservation.requestDigest}, result = ${reservation.result}, api_key_id = ${reservation.apiKeyId},
        refund_of = ${reservation.refundOf},
        created_at_ms = ${String(nowMs)}::bigint, status = 'reserved', settled_at_ms = NULL, recipient_credited = false
      WHERE transfer_id = ${reservation.transferId} AND status IN ('expired', 'failed')
        AND chain_id = ${reservation.chainId} AND contract = ${reservation.contract}
        AND from_account = ${reservation.fromAccount} AND nonce = ${reservation.nonce.toString()}
      RETURNING transfer_id`)
    if (rows.length === 0) return false
    // A settlement of the same group that locked the row reads it as it is now.
    const held = yield* heldRows
    if (held?.reservations.has(reservation.transferId) === true) {
      held.reservations.set(reservation.transferId, { ...reservation, status: "reserved", recipientCredited: false })
    }
    return true
  })

/** Sets a reservation's status; `recipientCredited` also marks its recipient credited, in the same write. */
export const setReservationStatus = (
  context: StoreContext,
  transferId: string,
  status: ReservationStatus,
  nowMs: number,
  options: { readonly recipientCredited?: boolean } = {}
) => changeReservation(context, transferId, { status, settledAtMs: nowMs, recipientCredited: options.recipientCredited === true })

/** Marks a confidential transfer's recipient credited (by its event or by settle), its status as it is. */
export const markRecipientCredited = (context: StoreContext, transferId: string) =>
  changeReservation(context, transferId, { settledAtMs: null, recipientCredited: true })

/**
 * Changes a reservation: in memory when the group holds it locked (written by the flush, see
 * `HeldRows`), by SQL otherwise. `settledAtMs` null leaves the row's as it is.
 */
const changeReservation = (
  context: StoreContext,
  transferId: string,
  change: Omit<ReservationChange, "status"> & { readonly status?: ReservationStatus }
) =>
  Effect.gen(function*() {
    const held = yield* heldRows
    const row = held?.reservations.get(transferId)
    if (held !== undefined && row !== undefined) {
      const changed = {
        status: change.status ?? row.status,
        settledAtMs: change.settledAtMs ?? held.reservationChanges.get(transferId)?.settledAtMs ?? null,
        recipientCredited: row.recipientCredited || change.recipientCredited
      }
      held.reservations.set(transferId, { ...row, status: changed.status, recipientCredited: changed.recipientCredited })
      held.reservationChanges.set(transferId, changed)
      return
    }
    // Not held by the group (nothing to keep in step): the row itself, after what the group holds.
    const { sql } = context
    yield* afterRecords(context, sql`
      UPDATE guardian_reservations
      SET status = COALESCE(${change.status ?? null}::text, status),
        settled_at_ms = COALESCE(${change.settledAtMs === null ? null : String(change.settledAtMs)}::bigint, settled_at_ms),
        recipient_credited = recipient_credited OR ${change.recipientCredited}
      WHERE transfer_id = ${transferId}`)
  })

/** Reservations still open past their expiry, oldest first. */
export const dueReservations = (context: StoreContext, nowMs: number, limit: number) =>
  afterRecords(context, context.sql<{ readonly transfer_id: string }>`
    SELECT transfer_id FROM guardian_reservations
    WHERE status = 'reserved' AND expires_at_ms <= ${String(nowMs)}::bigint
    ORDER BY expires_at_ms LIMIT ${limit}`).pipe(Effect.map((rows) => rows.map((row) => row.transfer_id)))

/** Open reservations that debit or credit the account. */
export const openReservationsOf = (context: StoreContext, account: AccountRef, limit: number) =>
  Effect.gen(function*() {
    const { sql } = context
    const rows = yield* afterRecords(context, sql<ReservationSqlRow>`
      SELECT ${sql.literal(reservationColumns)} FROM guardian_reservations
      WHERE status = 'reserved' AND chain_id = ${account.chainId} AND contract = ${account.contract}
        AND (from_account = ${account.account} OR to_account = ${account.account})
      ORDER BY created_at_ms LIMIT ${limit}`)
    return yield* Effect.forEach(rows, (row) => toReservation(context.box, row))
  })

/**
 * The sum of a transfer's refunds that count against it (D43): those reserved (in flight) and
 * those confirmed; a failed or expired one gave its amount back. Read after what the group holds
 * in memory is written (its new reservations, its status changes), so a refund decided earlier
 * in the same group counts. The caller holds the refunds' sender's balance lock: every refund of
 * one transfer debits that transfer's recipient, so no other decision adds one meanwhile.
 */
export const refundedOf = (context: StoreContext, originalTransferId: string) =>
  Effect.gen(function*() {
    const { sql } = context
    const rows = yield* afterRecords(context, sql<{ readonly transfer_id: string; readonly amount_sealed: Uint8Array }>`
      SELECT transfer_id, amount_sealed FROM guardian_reservations
      WHERE refund_of = ${originalTransferId} AND status IN ('reserved', 'confirmed')`)
    let refunded = 0n
    for (const row of rows) refunded += yield* open(context.box, row.amount_sealed, reservationBinding(row.transfer_id))
    return refunded
  })
