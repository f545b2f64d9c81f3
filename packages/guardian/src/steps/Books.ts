/**
 * The changes to the books that settlement, expiry and the chain follower share: a credit, a
 * confirmed debit (with the recipient's credit), a released reservation, a late confirmation
 * and the one freeze there is. Each runs inside its caller's transaction, on rows it locks
 * (SELECT … FOR UPDATE) in address order.
 *
 * @since 0.5.0
 */
import { ElGamal } from "@pps/crypto"
import { Effect } from "effect"
import * as Invariant from "../internal/Invariant.ts"
import type { AccountRef, BalanceRow, ReservationRow } from "../internal/store.ts"
import { alert } from "./Alerts.ts"
import { type GuardianContext, senderOf } from "./GuardianContext.ts"

/**
 * Adds a credit the chain recorded to a balance locked by the caller. A credit that
 * would take the booked balance out of u64 (the range the books and `ElGamal.matches`
 * work in; the contract accepts larger amounts, e.g. a shield of 2^64 wei) is not
 * booked: it raises a `credit_out_of_range` alert instead. The account's transfers go
 * on against the books, which then hold less than the chain.
 *
 * @since 0.5.0
 * @category steps
 */
export const addCredit = Effect.fnUntraced(function*(
  context: GuardianContext,
  account: AccountRef,
  balance: BalanceRow,
  amount: bigint,
  what: string,
  nowMs: number
) {
  if (balance.confirmed + amount >= ElGamal.amountLimit) {
    yield* alert(context, account, "credit_out_of_range", `${what} would take the booked balance out of the u64 range; not booked`, nowMs)
    return "out_of_range" as const
  }
  yield* context.store.writeBalance(account, {
    ...balance,
    confirmed: balance.confirmed + amount,
    version: balance.version + 1n,
    owned: true
  })
  return "booked" as const
})

/** Locks the sender's balance and, when `credited`, the recipient's, in address order (so concurrent settlements never deadlock). */
const lockParties = Effect.fnUntraced(function*(context: GuardianContext, sender: AccountRef, recipient: AccountRef, credited: boolean) {
  const ordered = credited ? [sender, recipient].sort((a, b) => (a.account < b.account ? -1 : 1)) : [sender]
  const locked = new Map<string, BalanceRow>()
  for (const account of ordered) locked.set(account.account, yield* context.store.lockBalance(account))
  const senderBalance = locked.get(sender.account)
  if (senderBalance === undefined) {
    return yield* Effect.die(new Invariant.InvariantViolation({ invariant: "the sender's balance row is among the rows a settlement locks" }))
  }
  return { senderBalance, recipientBalance: credited ? locked.get(recipient.account) : undefined }
})

/**
 * Applies a mined transfer to the books: debit the sender's confirmed balance (and its
 * reservation when still held), credit the recipient of a confidential transfer unless
 * its event credited it first. `held` is false for a confirmation that arrives after
 * the reservation expired. On "overdraw" nothing is written.
 *
 * @since 0.5.0
 * @category steps
 */
export const applyConfirmed = Effect.fnUntraced(function*(context: GuardianContext, reservation: ReservationRow, held: boolean, nowMs: number) {
  const { store } = context
  const sender = senderOf(reservation)
  const credited = reservation.kind === "confidential" && reservation.toAccount !== reservation.fromAccount &&
    !reservation.recipientCredited
  const recipient: AccountRef = { ...sender, account: reservation.toAccount }
  const { recipientBalance, senderBalance } = yield* lockParties(context, sender, recipient, credited)
  const available = held ? senderBalance.confirmed : senderBalance.confirmed - senderBalance.reserved
  if (available < reservation.amount) return "overdraw" as const
  yield* store.writeBalance(sender, {
    ...senderBalance,
    confirmed: senderBalance.confirmed - reservation.amount,
    reserved: held ? senderBalance.reserved - reservation.amount : senderBalance.reserved,
    version: senderBalance.version + 1n
  })
  if (recipientBalance !== undefined) {
    yield* addCredit(context, recipient, recipientBalance, reservation.amount, `confidential transfer ${reservation.transferId}`, nowMs)
  }
  // An expired reservation gave its daily spend back; the mined transfer takes it again.
  if (!held && reservation.spendBucket !== null) yield* store.addSpend(sender, reservation.spendBucket, reservation.amount)
  // D40: once per transfer, as the reservation leaves `reserved`/`expired` for `confirmed` below.
  if (reservation.apiKeyId !== null) yield* store.addKeyTotal(sender, reservation.apiKeyId, reservation.amount)
  // The recipient's credit is marked in the same statement as the status (one UPDATE, not two:
  // statements are what the guardian's throughput is spent on).
  yield* store.setReservationStatus(reservation.transferId, "confirmed", nowMs, { recipientCredited: recipientBalance !== undefined })
  return "applied" as const
})

/**
 * Gives a reservation back: the sender's reserved total and its day's spend, the status
 * `failed` or `expired`.
 *
 * @since 0.5.0
 * @category steps
 */
export const release = Effect.fnUntraced(function*(
  context: GuardianContext,
  reservation: ReservationRow,
  status: "failed" | "expired",
  nowMs: number
) {
  const { store } = context
  const sender = senderOf(reservation)
  const balance = yield* store.lockBalance(sender)
  yield* Invariant.check(balance.reserved >= reservation.amount, "an account's reserved total includes each of its held reservations")
  yield* store.writeBalance(sender, { ...balance, reserved: balance.reserved - reservation.amount })
  if (reservation.spendBucket !== null) yield* store.addSpend(sender, reservation.spendBucket, -reservation.amount)
  yield* store.setReservationStatus(reservation.transferId, status, nowMs)
})

/**
 * The one freeze left: a transfer the chain applied after its reservation was released,
 * for more than the sender has left (docs/guardian.md). Only a guardian-attested
 * transfer reaches it, never an outsider's action.
 */
const freeze = Effect.fnUntraced(function*(context: GuardianContext, account: AccountRef, nowMs: number) {
  yield* context.store.lockBalance(account)
  yield* context.store.setFrozen(account, "late_confirmation_overdraw", nowMs)
  yield* alert(
    context,
    account,
    "late_confirmation_overdraw",
    "a transfer confirmed after its reservation was released exceeds the available balance; the account is frozen",
    nowMs
  )
})

/**
 * The chain applied a transfer whose reservation had been released (expired on time
 * alone, or reported failed): debit the sender now; if that would overdraw, freeze the
 * sender, and still credit the recipient, whom the chain credited.
 *
 * @since 0.5.0
 * @category steps
 */
export const applyLate = Effect.fnUntraced(function*(context: GuardianContext, reservation: ReservationRow, nowMs: number) {
  const applied = yield* applyConfirmed(context, reservation, false, nowMs)
  if (applied === "applied") return "confirmed" as const
  yield* freeze(context, senderOf(reservation), nowMs)
  if (reservation.kind === "confidential" && !reservation.recipientCredited) {
    const recipient: AccountRef = { ...senderOf(reservation), account: reservation.toAccount }
    const balance = yield* context.store.lockBalance(recipient)
    yield* addCredit(context, recipient, balance, reservation.amount, `confidential transfer ${reservation.transferId}`, nowMs)
    yield* context.store.markRecipientCredited(reservation.transferId)
  }
  return "overdraw" as const
})
