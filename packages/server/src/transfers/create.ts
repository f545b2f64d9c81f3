/**
 * `POST /v1/transfers`: steps 1 to 5 for a new transfer (resolve.ts, seal.ts, then in the sender's
 * actor senderTurn.ts with authorize.ts and record.ts, submit.ts), or a hold (hold.ts) for an agent
 * above its approval threshold.
 *
 * @since 0.1.0
 */
import { SpanLog } from "@pps/guardian"
import { Clock, Effect } from "effect"
import type { Principal } from "@pps/api/ApiKeys"
import { InvalidRequest } from "@pps/api/Errors"
import type { CreateTransferRequest } from "@pps/api/Transfers"
import { releaseAdmission } from "../platform/Admission.ts"
import type { TransfersContext } from "./context.ts"
import { toTransferRecord } from "./read.ts"
import { assetOf, resolveParties } from "./resolve.ts"
import { checkPreparedToken, moneyOf, sealBoxes } from "./seal.ts"
import type { Sealed } from "./senderTurn.ts"
import { submitAndAwait } from "./submit.ts"
import type { CreateOutcome } from "./Transfers.ts"

/**
 * Creates a transfer: a transfer (201), or a held agent transaction (202, D26). A refund (D43) is
 * created here too, with `refundOf` naming its original (refund.ts fixes its recipient and asset).
 *
 * @since 0.1.0
 */
export const create = Effect.fn("Transfers.create")(function*(
  context: TransfersContext,
  principal: Principal,
  body: CreateTransferRequest,
  refundOf: string | null
) {
  // 1. Amount-free rules.
  const asset = yield* assetOf(body.asset)
  const money = yield* moneyOf(body, asset)
  const confidential = body.confidential ?? true
  const approvalEndsAtMs = yield* approvalEndOf(body)
  const parties = yield* resolveParties(context, principal, body.to, asset, confidential)
  yield* checkPreparedToken(context, principal, asset, parties, money)
  // 2. The boxes.
  const boxed = yield* sealBoxes(context, parties, money)
  // 3-4. In the sender's turn.
  const decided = yield* decideInSendersTurn(context, { principal, asset, confidential, money, parties, boxed, refundOf, approvalEndsAtMs } satisfies Sealed)
  if (decided._tag === "Held") return { _tag: "Held", transaction: decided.transaction } satisfies CreateOutcome
  // 5. Submit and wait (D14); the outcome is also completed in the background. The wait for
  // the chain holds no place at the gate (platform/Admission.ts).
  yield* releaseAdmission
  const stored = yield* submitAndAwait(context, decided.transferId, decided.submission)
  return { _tag: "Transfer", transfer: toTransferRecord(stored, principal.accountId) } satisfies CreateOutcome
})

/**
 * `approval_expires_at` (D57) read: an ISO 8601 timestamp with its offset, else 400 naming it.
 * The hold takes the earlier of it and the server's window (hold.ts).
 */
const approvalEndOf = (body: CreateTransferRequest) => {
  const text = body.approval_expires_at
  if (text === undefined) return Effect.succeed(null)
  const ms = isoTimestamp.test(text) ? Date.parse(text) : Number.NaN
  return Number.isFinite(ms)
    ? Effect.succeed(ms)
    : Effect.fail(InvalidRequest.of("`approval_expires_at` must be an ISO 8601 timestamp with its offset (2026-11-29T12:00:00Z).", { param: "approval_expires_at" }))
}

/** A date and time with seconds and an offset (`Z` or `±hh:mm`): what D5 answers, and nothing looser. */
const isoTimestamp = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/

/**
 * Steps 3-4 in the sender's actor (senderTurn.ts, D73): with the sender's other waiting creates,
 * in arrival order, in one call to the guardian. Two creates of one prepared transfer take turns
 * by its id first, so the second finds the id taken.
 */
const decideInSendersTurn = (context: TransfersContext, sealed: Sealed) =>
  Effect.gen(function*() {
    const mail = { sealed, caller: yield* Effect.context<never>(), sentAtMs: yield* Clock.currentTimeMillis }
    const turn = context.senders.send(sealed.parties.sender.accountId, mail)
    const { boxed } = sealed
    return yield* (boxed._tag === "Prepared" ? context.lanes.alone(`prepared:${boxed.transferId}`, turn) : turn)
  }).pipe(
    // The wait for the sender's turn and the turn (SpanLog.ts).
    SpanLog.stage("Transfers.actor")
  )
