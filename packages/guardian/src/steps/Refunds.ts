/**
 * Refunds (D43): the guardian's half of "the sum of refunds of one transfer never exceeds it",
 * which the api tier cannot check (it never reads an amount). A refund names its original; it is
 * decided like any transfer, and before its amount rules the original is checked: a confidential
 * transfer this guardian attested and settled as confirmed, on the same chain and contract, from
 * the refund's recipient to the refund's sender. Then the refunds of the original that count (in
 * flight and confirmed), this one added, must not exceed the original's amount.
 *
 * Where the total is held: every refund of a transfer debits that transfer's recipient, so all
 * of them are decided under one lock, the recipient's balance row (Decide.ts locks the sender's
 * before anything else): the original's lane. The total is the sum of the refunds' reservations,
 * read under that lock, so it can never be stale, and a failed or expired refund drops out of it
 * with its reservation's status, with no second counter to keep in step.
 *
 * @since 0.10.0
 */
import { Effect } from "effect"
import { RefundExceeded, Refused } from "../Domain.ts"
import type { GuardianContext } from "./GuardianContext.ts"
import type { Prepared } from "./Prepare.ts"

/**
 * The refusal or the `RefundExceeded` answer of a refund of `refundOf`, or undefined when it may
 * go on to the other amount rules. Runs under the refund's sender's balance lock.
 *
 * @since 0.10.0
 * @category steps
 */
export const checkRefund = Effect.fnUntraced(function*(
  context: GuardianContext,
  refundOf: string,
  prepared: Prepared,
  transferId: string
) {
  const originalId = refundOf.toLowerCase()
  const original = yield* context.store.findReservation(originalId, { forUpdate: false })
  const { sender } = prepared
  // Not one of this guardian's confidential transfers between these parties, reversed.
  if (
    original === undefined || original.kind !== "confidential" || original.chainId !== sender.chainId ||
    original.contract !== sender.contract || original.toAccount !== sender.account ||
    original.fromAccount !== prepared.recipient.toLowerCase()
  ) {
    return new Refused({ transferId, reason: "refund_original_unknown" })
  }
  // In flight (the api tier settles it before asking: a state that passes) or never mined.
  if (original.status === "reserved") return new Refused({ transferId, reason: "refund_original_unsettled" })
  if (original.status !== "confirmed") return new Refused({ transferId, reason: "refund_original_unknown" })
  const refunded = yield* context.store.refundedOf(originalId)
  if (refunded + prepared.amount > original.amount) return new RefundExceeded({ transferId })
  return undefined
})
