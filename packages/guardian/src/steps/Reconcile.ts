/**
 * Reconciliation, a check and an alarm, never a block (D39): the on-chain guardian handle of an
 * account must decrypt to the balance the books expect the chain to hold. A mismatch that
 * persists over one re-check raises a `reconciliation_mismatch` alert (health, an error log
 * without amounts, the metric); the account's transfers go on (an outsider's deposit must not
 * block anyone). A match clears the alerts a match resolves, and lifts the one freeze there is
 * (`late_confirmation_overdraw`).
 *
 * @since 0.5.0
 */
import { ElGamal, Point } from "@pps/crypto"
import { Clock, Effect, Metric } from "effect"
import { getAddress } from "viem"
import { GuardianError, type ReconcileRequest, type ReconcileResult } from "../Domain.ts"
import type { AccountRef, ReservationRow } from "../internal/store.ts"
import { alert } from "./Alerts.ts"
import { noEndpoint, storage } from "./Failures.ts"
import { chainBlockRangeMax } from "./FollowChain.ts"
import { type GuardianContext, refFor } from "./GuardianContext.ts"

/** In-flight reservations of one account considered by a reconciliation (each costs one chain read). */
const reconcileInFlightMax = 64
/** Accounts read per page by the reconciliation sweep. */
const reconcilePageMax = 200

/**
 * Counts reconciliation mismatches raised as alerts (one per account and episode: a
 * mismatch already alerted is not counted again until the books matched in between).
 *
 * @since 0.1.0
 * @category metrics
 */
export const reconciliationMismatches = Metric.counter("guardian_reconciliation_mismatches_total", {
  description: "Reconciliation mismatches raised as alerts: the on-chain guardian handle did not decrypt to the booked balance",
  incremental: true
})

/** Alerts a matching reconciliation clears: the books agree with the chain again. */
const alertsClearedByMatch = ["reconciliation_mismatch", "credit_out_of_range", "late_confirmation_overdraw"] as const

/** What the in-flight transfers already mined at `blockNumber` change in `account`'s balance. */
const minedInFlight = Effect.fnUntraced(function*(
  context: GuardianContext,
  account: AccountRef,
  inFlight: ReadonlyArray<ReservationRow>,
  blockNumber: bigint
) {
  let change = 0n
  for (const reservation of inFlight) {
    const mined = yield* context.chain.isNonceUsed(
      BigInt(reservation.chainId),
      getAddress(reservation.contract),
      getAddress(reservation.fromAccount),
      reservation.nonce,
      blockNumber
    )
    if (!mined) continue
    if (reservation.fromAccount === account.account) change -= reservation.amount
    if (
      reservation.kind === "confidential" && reservation.toAccount === account.account &&
      reservation.fromAccount !== account.account && !reservation.recipientCredited
    ) {
      change += reservation.amount
    }
  }
  return change
})

/** What the credit logs past the follower's cursor, up to `blockNumber`, add to `account`'s balance. */
const unbookedCredits = Effect.fnUntraced(function*(context: GuardianContext, account: AccountRef, blockNumber: bigint) {
  const { store } = context
  const cursor = yield* storage(store.cursor(account.chainId, account.contract))
  if (cursor !== undefined && blockNumber - cursor >= chainBlockRangeMax) {
    // Too far behind to count what it has not booked in one read: no verdict rather than a false alarm.
    return yield* new GuardianError({ reason: "chain", message: "the chain follower is too far behind to reconcile" })
  }
  if (cursor === undefined || cursor > blockNumber) return 0n
  const unbooked = yield* context.chain.creditLogs(
    BigInt(account.chainId),
    getAddress(account.contract),
    cursor,
    blockNumber,
    getAddress(account.account)
  )
  let added = 0n
  for (const log of unbooked) {
    if (yield* storage(store.chainCreditRecorded(account.chainId, log.txHash.toLowerCase(), log.logIndex))) continue
    if (log._tag === "Shielded") {
      added += log.amount
      continue
    }
    // A reserved transfer was counted with the in-flight ones; a released one the chain applied is not in the books yet.
    const reservation = yield* storage(store.findReservation(log.transferId.toLowerCase(), { forUpdate: false }))
    if (reservation !== undefined && !reservation.recipientCredited && (reservation.status === "failed" || reservation.status === "expired")) {
      added += reservation.amount
    }
  }
  return added
})

/**
 * The balance the chain should hold at `blockNumber`: the confirmed books, adjusted by
 * the in-flight transfers already mined at that block but not settled yet (a recipient
 * credited by its event already has it), and by the credit logs the follower has not
 * booked yet (past its cursor: the confirmation depth and the poll interval).
 */
const expectedOnChain = Effect.fnUntraced(function*(context: GuardianContext, account: AccountRef, blockNumber: bigint) {
  const [balance, inFlight] = yield* storage(Effect.all([
    context.store.readBalance(account),
    context.store.openReservationsOf(account, reconcileInFlightMax)
  ]))
  const mined = yield* minedInFlight(context, account, inFlight, blockNumber)
  const unbooked = yield* unbookedCredits(context, account, blockNumber)
  return { expected: balance.confirmed + mined + unbooked, frozen: balance.frozenReason !== null }
})

/** One comparison of the books with the chain's head. */
const checkOnce = Effect.fnUntraced(function*(context: GuardianContext, account: AccountRef) {
  const { chain } = context
  const chainId = BigInt(account.chainId)
  const head = yield* chain.head(chainId)
  const { expected, frozen } = yield* expectedOnChain(context, account, head.blockNumber)
  const onChain = yield* chain.encryptedBalance(chainId, getAddress(account.contract), getAddress(account.account), head.blockNumber)
  const commitment = Point.parse(onChain.commitment, { allowIdentity: true })
  const handle = Point.parse(onChain.guardianHandle, { allowIdentity: true })
  const matched = expected >= 0n && expected < ElGamal.amountLimit && commitment.ok && handle.ok &&
    ElGamal.matches(context.keys.encryption.secretKey, commitment.value, handle.value, expected)
  return { matched, frozen }
})

/** The books agree with the chain: clear the alerts a match resolves, lift the freeze. */
const clearOnMatch = Effect.fnUntraced(function*(context: GuardianContext, account: AccountRef, frozen: boolean, nowMs: number) {
  const cleared = yield* storage(context.store.clearAlerts(account, alertsClearedByMatch))
  if (frozen) yield* storage(context.store.setFrozen(account, null, nowMs))
  if (cleared > 0 || frozen) {
    yield* Effect.logWarning("books and chain agree again: alerts cleared").pipe(
      Effect.annotateLogs({ chain_id: account.chainId, contract: account.contract, account: account.account, unfrozen: frozen })
    )
  }
})

/**
 * Reconciles one account (re-checked once after `reconcileRetryDelayMs` before it raises an
 * alert: the books trail the chain by the follower's poll and the confirmation depth).
 *
 * @since 0.5.0
 * @category steps
 */
export const reconcileAccount = Effect.fnUntraced(function*(context: GuardianContext, account: AccountRef) {
  if (!context.chain.knows(BigInt(account.chainId))) return yield* noEndpoint(account.chainId)
  let check = yield* checkOnce(context, account)
  if (!check.matched) {
    yield* Effect.sleep(context.timing.reconcileRetryDelayMs)
    check = yield* checkOnce(context, account)
  }
  const nowMs = yield* Clock.currentTimeMillis
  if (check.matched) {
    yield* clearOnMatch(context, account, check.frozen, nowMs)
    return { status: "matched", frozen: false } satisfies ReconcileResult
  }
  const raised = yield* storage(alert(
    context,
    account,
    "reconciliation_mismatch",
    "the on-chain guardian handle does not decrypt to the booked balance",
    nowMs
  ))
  if (raised) yield* Metric.update(reconciliationMismatches, 1)
  return { status: "mismatched", frozen: check.frozen } satisfies ReconcileResult
})

/**
 * @since 0.5.0
 * @category steps
 */
export const reconcile = Effect.fn("Guardian.reconcile")(function*(context: GuardianContext, request: typeof ReconcileRequest.Type) {
  return yield* reconcileAccount(context, refFor(request.chainId, request.contract, request.account))
})

/**
 * Reconciles every owned account on every chain the guardian has an endpoint for, page by page;
 * one account's failure does not stop the others.
 *
 * @since 0.5.0
 * @category steps
 */
export const reconcileAll = (context: GuardianContext) =>
  Effect.gen(function*() {
    let checked = 0
    let mismatched = 0
    let after: AccountRef | undefined
    for (;;) {
      const page = yield* storage(context.store.ownedAccounts(after, reconcilePageMax))
      for (const account of page) {
        if (!context.chain.knows(BigInt(account.chainId))) continue
        const outcome = yield* Effect.result(reconcileAccount(context, account))
        checked++
        if (outcome._tag === "Success" && outcome.success.status === "mismatched") mismatched++
      }
      if (page.length < reconcilePageMax) break
      after = page[page.length - 1]
    }
    return { checked, mismatched }
  }).pipe(Effect.withSpan("Guardian.reconcileAll"))
