/**
 * Reading transfers: a stored transfer as a viewer sees it (D13), one transfer by id for a
 * viewer, and D36's current state of a recorded transfer for a retried create.
 *
 * @since 0.1.0
 */
import { Effect, Option } from "effect"
import { displayHandle } from "@pps/api/Accounts"
import type { Principal } from "@pps/api/ApiKeys"
import { TransferNotFound } from "@pps/api/Errors"
import type { TransferRecord } from "@pps/api/Transfers"
import * as Unavailable from "../platform/Unavailable.ts"
import { complete } from "./complete.ts"
import type { TransfersContext } from "./context.ts"
import { resubmit } from "./submit.ts"
import type { StoredTransfer } from "./TransferStore.ts"

/**
 * A stored transfer as `viewerAccountId` sees it.
 *
 * @since 0.1.0
 */
export const toTransferRecord = (t: StoredTransfer, viewerAccountId: string): TransferRecord => ({
  transfer_id: t.transfer_id,
  status: t.status,
  from: displayHandle(t.sender_handle),
  to: t.recipient_display,
  confidential: t.confidential,
  asset: t.asset,
  // The viewer's side; for an owner looking at its agent's transfer, the agent's side.
  direction: t.sender_account_id === viewerAccountId
    ? "sent"
    : t.recipient_account_id === viewerAccountId
    ? "received"
    : t.sender_owner_account_id === viewerAccountId
    ? "sent"
    : "received",
  tx_hash: t.tx_hash,
  created_at: t.created_at,
  confirmed_at: t.confirmed_at,
  refund_of: t.refund_of,
  refunds: t.refund_ids === "" ? [] : t.refund_ids.split(",")
})

/**
 * A transfer the principal's account (or one of its agents) is party to, in its mode.
 *
 * @since 0.1.0
 */
export const get = (context: TransfersContext, principal: Principal, transferId: string) =>
  context.store.findForAccount(transferId, principal.accountId, principal.mode).pipe(
    Unavailable.database("Transfers.get"),
    Effect.flatMap(Option.match({
      onNone: () => Effect.fail(TransferNotFound.of()),
      onSome: (t) => Effect.succeed(toTransferRecord(t, principal.accountId))
    }))
  )

/**
 * D36: a recorded transfer as its create request would answer now: submitted if a crash left it
 * unsubmitted, awaited up to the create timeout (D14), its outcome written. None for an unknown id.
 *
 * @since 0.1.0
 */
export const current = Effect.fnUntraced(function*(context: TransfersContext, transferId: string) {
  const found = yield* context.store.findById(transferId).pipe(Unavailable.database("Transfers.current"))
  if (Option.isNone(found) || found.value.status !== "pending") return found
  yield* resubmit(context, found.value)
  const outcome = yield* context.settlement.awaitResolution(transferId, context.config.transferCreateTimeoutMs).pipe(
    Unavailable.database("Transfers.current")
  )
  if (Option.isSome(outcome)) yield* complete(context, outcome.value)
  return yield* context.store.findById(transferId).pipe(Unavailable.database("Transfers.current"))
})
