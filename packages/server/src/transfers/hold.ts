/**
 * The hold (D26): an agent's transfer above its approval threshold, kept for its owner's
 * decision with its boxes as sealed (the sender's to the owner's key) and its
 * `agent.transaction.pending_approval` event, in one SQL transaction. Nothing was reserved or
 * signed; the owner's approval runs the authorize, record and submit steps again (approveHeld.ts).
 *
 * @since 0.1.0
 */
import { DateTime, Effect } from "effect"
import { type Hex, hexToBytes, numberToBytes } from "viem"
import { agentTransactionEvent, toAgentTransactionRecord } from "@pps/api/Agents"
import { makeId } from "../platform/Ids.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import type { PreparedTransfer, TransfersContext } from "./context.ts"
import { storedFieldsOf } from "./record.ts"

/**
 * The associated data that binds a held standard transfer's sealed public amount to its row.
 *
 * @since 0.1.0
 */
export const publicAmountBinding = (transactionId: string) => `pps/held-public-amount/v1/${transactionId}`

/**
 * Keeps a held transfer for its owner's decision; the held transaction as the API shows it (202).
 *
 * @since 0.1.0
 */
export const hold = Effect.fnUntraced(function*(
  context: TransfersContext,
  prepared: PreparedTransfer,
  nowMs: number,
  sealedAmount: Hex,
  /** The caller's latest end of the window (D57: an x402 requirement's expiry); null: the server's. */
  approvalEndsAtMs: number | null
) {
  const transactionId = makeId("atx", nowMs)
  const requestedAt = DateTime.formatIso(DateTime.makeUnsafe(nowMs))
  const windowEndMs = nowMs + context.config.approvalWindowMs
  const expiresAt = DateTime.formatIso(DateTime.makeUnsafe(approvalEndsAtMs === null ? windowEndMs : Math.min(windowEndMs, approvalEndsAtMs)))
  // Only the owner is ever asked: the agent's owner id is set on every agent account.
  const ownerAccountId = prepared.sender.ownerAccountId!
  const view = {
    transaction_id: transactionId,
    mode: prepared.mode,
    owner_account_id: ownerAccountId,
    status: "pending_approval",
    agent_handle: prepared.sender.handle,
    recipient_display: prepared.recipient.display,
    asset: prepared.asset,
    confidential: prepared.confidential,
    requested_at: requestedAt,
    expires_at: expiresAt,
    decided_at: null
  } as const
  yield* context.sql.withTransaction(Effect.gen(function*() {
    yield* context.heldStore.insert({
      ...storedFieldsOf(prepared),
      transactionId,
      agentAccountId: prepared.sender.accountId,
      ownerAccountId,
      fromKey: prepared.fromKey,
      toKey: prepared.toKey,
      guardianNote: prepared.boxes.guardian,
      publicAmountSealed: prepared.publicAmount === null
        ? null
        : context.secretBox.seal(numberToBytes(prepared.publicAmount, { size: 32 }), publicAmountBinding(transactionId)),
      guardianHeldAmount: hexToBytes(sealedAmount),
      requestedAt,
      expiresAt,
      refundOf: prepared.refundOf
    })
    yield* context.outbox.append([agentTransactionEvent("agent.transaction.pending_approval", view, null)])
    yield* context.operations.bind("agent_transaction", transactionId)
  })).pipe(Unavailable.database("Transfers.hold"))
  return toAgentTransactionRecord(view, null)
})
