/**
 * Booking the chain's credits (D39): a shield (its amount is public in the event) or the
 * recipient side of a confidential transfer (its amount is in the guardian's reservation), each
 * log exactly once: a row per (tx hash, log index), in the transaction that changes the balance.
 *
 * @since 0.5.0
 */
import { ElGamal } from "@pps/crypto"
import { Effect } from "effect"
import type { CreditLog } from "../ChainReader.ts"
import type { AccountRef, ChainCreditRow } from "../internal/store.ts"
import { alert } from "./Alerts.ts"
import { addCredit, applyLate } from "./Books.ts"
import { storageFailure } from "./Failures.ts"
import { type GuardianContext, refFor } from "./GuardianContext.ts"

type Shielded = CreditLog & { readonly _tag: "Shielded" }
type TransferIn = CreditLog & { readonly _tag: "ConfidentialTransfer" }

/** Books a shield, in the caller's transaction. */
const bookShield = Effect.fnUntraced(function*(context: GuardianContext, chainId: bigint, log: Shielded, nowMs: number) {
  const account = refFor(chainId, log.contract, log.to)
  const balance = yield* context.store.lockBalance(account)
  const inRange = balance.confirmed + log.amount < ElGamal.amountLimit
  const recorded = yield* context.store.insertChainCredit({
    chainId: account.chainId,
    txHash: log.txHash.toLowerCase(),
    logIndex: log.logIndex,
    contract: account.contract,
    account: account.account,
    kind: "shield",
    transferId: null,
    blockNumber: log.blockNumber,
    outcome: inRange ? "booked" : "out_of_range"
  }, nowMs)
  if (!recorded) return "duplicate" as const
  return yield* addCredit(context, account, balance, log.amount, `shield in ${log.txHash}:${log.logIndex}`, nowMs)
})

/** The credit row of a transfer-in log, with what was done with it. */
const transferInRow = (recipient: AccountRef, log: TransferIn, outcome: "booked" | "already_booked" | "unknown_transfer"): ChainCreditRow => ({
  chainId: recipient.chainId,
  txHash: log.txHash.toLowerCase(),
  logIndex: log.logIndex,
  contract: recipient.contract,
  account: recipient.account,
  kind: "transfer_in",
  transferId: log.transferId.toLowerCase(),
  blockNumber: log.blockNumber,
  outcome
})

/**
 * Books a transfer-in against its reservation, read once under its row lock (a matching
 * reservation is the log's sender's: its parties and kind never change). "unmatched": there is
 * no such reservation.
 */
const bookAgainstReservation = Effect.fnUntraced(function*(context: GuardianContext, chainId: bigint, log: TransferIn, nowMs: number) {
  const { store } = context
  const transferId = log.transferId.toLowerCase()
  const recipient = refFor(chainId, log.contract, log.to)
  const sender = refFor(chainId, log.contract, log.from)
  const current = yield* store.findReservation(transferId, { forUpdate: true })
  const matches = current !== undefined && current.chainId === sender.chainId && current.contract === sender.contract &&
    current.fromAccount === sender.account && current.toAccount === recipient.account && current.kind === "confidential"
  if (!matches) return "unmatched" as const
  if (!(yield* store.insertChainCredit(transferInRow(recipient, log, current.recipientCredited ? "already_booked" : "booked"), nowMs))) {
    return "duplicate" as const
  }
  if (current.status === "failed" || current.status === "expired") {
    yield* Effect.logWarning("a released reservation's transfer was mined: applied late").pipe(
      Effect.annotateLogs({ transfer_id: transferId, recorded: current.status })
    )
    yield* applyLate(context, current, nowMs)
    return "booked" as const
  }
  if (current.recipientCredited) return "already_booked" as const
  const balance = yield* store.lockBalance(recipient)
  yield* addCredit(context, recipient, balance, current.amount, `confidential transfer ${transferId}`, nowMs)
  yield* store.markRecipientCredited(transferId)
  return "booked" as const
})

/**
 * Books the recipient side of a confidential transfer. The credit is booked once, by this event
 * or by `settle`, whichever comes first (`recipient_credited`); the sender's debit stays the
 * reservation's (settle, or the expiry sweeper asking the chain), except for a reservation
 * already released, which the chain now contradicts.
 */
const bookTransferIn = Effect.fnUntraced(function*(context: GuardianContext, chainId: bigint, log: TransferIn, nowMs: number) {
  const booked = yield* bookAgainstReservation(context, chainId, log, nowMs)
  if (booked !== "unmatched") return booked
  // Every debit needs the guardian's signature, so this means a second guardian with its
  // own books, a restored backup, or a leaked signing key: an operator must look.
  const recipient = refFor(chainId, log.contract, log.to)
  if (!(yield* context.store.insertChainCredit(transferInRow(recipient, log, "unknown_transfer"), nowMs))) return "duplicate" as const
  yield* alert(
    context,
    recipient,
    "unknown_transfer",
    `ConfidentialTransfer ${log.transferId.toLowerCase()} (${log.txHash}:${log.logIndex}) has no matching reservation; its amount is unknown and not booked`,
    nowMs
  )
  return "unknown_transfer" as const
})

/**
 * Books consecutive credit logs of one contract, in block order, as one unit of the group
 * committer: one transaction, shared with the decisions and settlements queued beside it,
 * instead of one per log. A failure anywhere rolls all of them back (the group runs again unit
 * by unit), and the caller's cursor stays: the range is read again, its booked logs recognised
 * by (tx hash, log index). Re-runnable, as a unit must be: only SQL.
 *
 * @since 0.5.0
 * @category steps
 */
export const bookLogs = (context: GuardianContext, chainId: bigint, logs: ReadonlyArray<CreditLog>, nowMs: number) =>
  context.group.run(
    Effect.forEach(
      logs,
      (log) => log._tag === "Shielded" ? bookShield(context, chainId, log, nowMs) : bookTransferIn(context, chainId, log, nowMs),
      { discard: true }
    ),
    {
      reservations: logs.flatMap((log) => (log._tag === "ConfidentialTransfer" ? [log.transferId.toLowerCase()] : [])),
      balances: logs.flatMap((log) => (log._tag === "Shielded" ? [refFor(chainId, log.contract, log.to)] : [])),
      credits: logs.map((log) => ({ chainId: chainId.toString(), txHash: log.txHash.toLowerCase(), logIndex: log.logIndex }))
    }
  ).pipe(Effect.mapError(storageFailure))
