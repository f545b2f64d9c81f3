/**
 * `POST /v1/transfers/{transfer_id}/refund` (ext, D43): the recipient of a confirmed confidential
 * transfer sends up to its amount back to its sender. Not a pipeline of its own: the original is
 * checked here (404 not party to it, D17; 403 not its recipient; 422 a standard transfer; 409 not
 * confirmed), settled with the guardian if that has not happened yet, and the refund is then
 * created by create.ts as any transfer is, in either form (plain or client-sealed), with its
 * recipient and asset fixed to the original's sender and asset and `refund_of` set. So a refund
 * is an ordinary transfer for balances, an agent's policy (a refunding agent's rules all apply,
 * its approval threshold included), events, idempotency and recovery.
 *
 * What the api tier cannot check, the guardian does: the refunds of a transfer never add up to
 * more than it (guardian steps/Refunds.ts, 422 `refund_exceeds_original`).
 *
 * @since 0.10.0
 */
import { Effect, Option } from "effect"
import { displayHandle } from "@pps/api/Accounts"
import type { Principal } from "@pps/api/ApiKeys"
import {
  InvalidRequest,
  NotTransferRecipient,
  TransferNotConfidential,
  TransferNotConfirmed,
  TransferNotFound
} from "@pps/api/Errors"
import type { CreateTransferRequest, RefundTransferRequest } from "@pps/api/Transfers"
import * as Unavailable from "../platform/Unavailable.ts"
import { settleWithGuardian } from "./complete.ts"
import type { TransfersContext } from "./context.ts"
import { create } from "./create.ts"

/**
 * The transfer `transferId` if the principal may refund it, in D17's ranks: unknown or not the
 * caller's, 404; seen but not received by the caller (its sender, an agent's owner), 403; a
 * standard transfer, 422; not confirmed, 409.
 *
 * @since 0.10.0
 */
export const refundable = Effect.fnUntraced(function*(context: TransfersContext, principal: Principal, transferId: string) {
  const found = yield* context.store.findForAccount(transferId, principal.accountId, principal.mode).pipe(
    Unavailable.database("Transfers.refund")
  )
  if (Option.isNone(found)) return yield* Effect.fail(TransferNotFound.of())
  const original = found.value
  if (original.recipient_account_id !== principal.accountId) return yield* Effect.fail(NotTransferRecipient.of(transferId))
  if (!original.confidential) return yield* Effect.fail(TransferNotConfidential.of(transferId))
  if (original.status !== "confirmed") return yield* Effect.fail(TransferNotConfirmed.of(transferId, original.status))
  return original
})

/**
 * Creates a refund of `transferId`: a transfer (201), or an agent's refund held for its owner (202).
 *
 * @since 0.10.0
 */
export const refund = Effect.fn("Transfers.refund")(function*(
  context: TransfersContext,
  principal: Principal,
  transferId: string,
  body: RefundTransferRequest
) {
  const original = yield* refundable(context, principal, transferId)
  // The service never reads the original's amount, so it cannot default the plain form to it.
  if (body.amount === undefined && body.sealed === undefined) {
    return yield* Effect.fail(InvalidRequest.of(
      "Name the `amount` to refund (or send `sealed`): the service cannot read the original's amount. The SDK, the CLI and the dashboard refund the whole amount by default, opening your own copy.",
      { param: "amount" }
    ))
  }
  // The guardian checks a refund against its original only once it has settled the original
  // (guardian steps/Refunds.ts); the recovery round would do it later, the refund needs it now.
  if (!original.guardian_settled) yield* settleWithGuardian(context, original.transfer_id, "confirmed")
  const request: CreateTransferRequest = {
    to: displayHandle(original.sender_handle),
    asset: original.asset,
    ...(body.amount === undefined ? {} : { amount: body.amount }),
    ...(body.memo === undefined ? {} : { memo: body.memo }),
    ...(body.sealed === undefined ? {} : { sealed: body.sealed })
  }
  return yield* create(context, principal, request, original.transfer_id)
})
