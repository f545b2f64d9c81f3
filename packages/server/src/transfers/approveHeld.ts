/**
 * D27's approval of a held transaction, under the agent's lane so it never races the agent's
 * new transfers (or a rejection, or the expiry sweep): the held row is read again, the asset and
 * recipient rules of the policy in force now are checked, the guardian decides the limits and the
 * balance now (`approved: true` skips only the threshold), and the transfer is recorded and
 * submitted exactly as a new one (authorize.ts, record.ts, submit.ts), with the boxes sealed at
 * its create and its parties' keys as they are now (D55: either may have rotated since).
 *
 * The transfer keeps its id and replay nonce (the boxes are bound to the id; the nonce was never
 * attested, so it is still unused), with a fresh deadline: a held transaction may wait longer than
 * an attestation lives. The deadline is written to the row before the guardian is asked, so a
 * retried approval asks the same question and gets the recorded answer. A retry after that
 * deadline (its process died between the guardian's answer and the record) asks under a fresh
 * one, and the guardian decides it again once the first attestation is dead, under the same nonce
 * (D45): 409 `approval_in_progress` until then.
 *
 * @since 0.1.0
 */
import { Clock, DateTime, Effect, Option } from "effect"
import { bytesToBigInt, getAddress, type Hex } from "viem"
import type { Account } from "@pps/api/Accounts"
import { agentTransactionEvent } from "@pps/api/Agents"
import {
  ApprovalAttemptsExhausted,
  ApprovalInProgress,
  LivemodeUnavailable,
  TransactionExpired,
  TransactionNotFound
} from "@pps/api/Errors"
import type { StoredAgentTransaction } from "../agents/AgentTransactionStore.ts"
import { releaseAdmission } from "../platform/Admission.ts"
import * as Invariant from "../platform/Invariant.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import { type ChainContext, confidentialTokenOf } from "../settlement/Chains.ts"
import { type Authorization, authorizeAndRecord } from "./authorize.ts"
import { settleWithGuardian } from "./complete.ts"
import type { PreparedTransfer, TransfersContext } from "./context.ts"
import { publicAmountBinding } from "./hold.ts"
import { recordAlongside } from "./record.ts"
import { checkPolicy, namesOf, partyKeyOf } from "./resolve.ts"
import { submitAndAwait } from "./submit.ts"
import { transferIdBytes32 } from "./submission.ts"

/**
 * A retried approval reuses the deadline it pinned while at least this much of it is left, or
 * half the attestation's lifetime when that is shorter (so the guardian replays its recorded
 * answer), and otherwise takes a fresh one: the transfer must have time to be mined. Under a fresh
 * deadline the guardian decides again once the earlier attestation is dead, and refuses until
 * then (D45).
 */
const approvalDeadlineReuseMinSeconds = 60

/**
 * Approves a held transaction (the caller has checked ownership): the decided transaction and
 * its transfer.
 *
 * @since 0.1.0
 */
export const approveHeld = Effect.fn("Transfers.approveHeld")(function*(context: TransfersContext, transactionId: string) {
  const firstRead = yield* context.heldStore.findById(transactionId).pipe(
    Unavailable.database("Transfers.approveHeld"),
    Effect.flatMap(Option.match({
      onNone: () => Effect.fail(TransactionNotFound.of(transactionId)),
      onSome: Effect.succeed
    }))
  )
  const decided = yield* context.lanes.alone(firstRead.agent_account_id, approveInTurn(context, transactionId))
  // Decided: the wait for the chain holds no place at the gate (platform/Admission.ts).
  yield* releaseAdmission
  const transfer = yield* submitAndAwait(context, decided.transferId, decided.submission)
  return { transaction: decided.view, transfer }
})

/** The approval's decision and record, in the agent's turn. */
const approveInTurn = Effect.fnUntraced(function*(context: TransfersContext, transactionId: string) {
  const nowMs = yield* Clock.currentTimeMillis
  const held = yield* context.heldStore.findById(transactionId).pipe(
    Unavailable.database("Transfers.approveHeld"),
    Effect.flatMap(Invariant.some("a held transaction read before the agent's turn is still there (held rows are never deleted)"))
  )
  if (held.status === "expired" || (held.status === "pending_approval" && Number(held.expires_at_ms) <= nowMs)) {
    return yield* Effect.fail(TransactionExpired.of(transactionId))
  }
  if (held.status !== "pending_approval") return yield* Effect.fail(TransactionNotFound.of(transactionId))
  const chain = yield* Option.match(context.settlement.chain(held.mode), {
    onNone: () => Effect.fail(LivemodeUnavailable.of()),
    onSome: Effect.succeed
  })
  const prepared = yield* preparedOfHeld(context, held, chain)
  // Active hours bound when the agent may act; the approval is the owner's act.
  const policy = yield* checkPolicy(
    context,
    prepared.sender.accountId,
    { asset: held.asset, recipientNames: namesOf(prepared.recipient), activeHoursAtMs: null }
  )
  const deadlineSeconds = yield* approvalDeadline(context, held, nowMs)
  const decidedAt = DateTime.formatIso(DateTime.makeUnsafe(nowMs))
  const view = { ...held, status: "approved" as const, decided_at: decidedAt }
  const markApproved = Effect.gen(function*() {
    const changed = yield* context.heldStore.decide(transactionId, "approved", decidedAt)
    if (!changed) return yield* Effect.fail(TransactionNotFound.of(transactionId))
    yield* context.operations.bind("approval", transactionId)
    yield* context.outbox.append([agentTransactionEvent("agent.transaction.approved", view, {
      transfer_id: held.transfer_id,
      tx_hash: null
    })])
  })
  const write = recordAlongside(context, markApproved)
  const result = yield* authorizeAndRecord(context, prepared, deadlineSeconds, { policy, approved: true }, write).pipe(
    Effect.tapError((error) => error._tag === "TransactionNotFound" ? releaseUnlessRecorded(context, held.transfer_id) : Effect.void),
    // Only a client-sealed create can fail these: the guardian opened this held transfer's
    // boxes before it held it.
    Effect.catchTags({
      InvalidRequest: (cause) => Effect.die(new Invariant.InvariantViolation({ invariant: heldBoxesOpen, cause })),
      PreparedTransferUsed: (cause) => Effect.die(new Invariant.InvariantViolation({ invariant: heldBoxesOpen, cause }))
    })
  )
  if (result._tag === "Hold") return yield* Effect.die(new Invariant.InvariantViolation({ invariant: "the guardian never holds an approved transfer" }))
  if (result._tag === "ApprovalRefused") return yield* Effect.fail(notDecidedAgain(transactionId, result))
  return { transferId: prepared.transferId, submission: result.submission, view }
})

/**
 * D45: the guardian does not decide this approval again. Until an earlier attestation's deadline
 * (a process died between the guardian's answer and its record): 409 `approval_in_progress`, for
 * the time it names; once its re-decisions are used up: 409 `approval_attempts_exhausted`. The
 * transaction stays pending either way.
 */
const notDecidedAgain = (transactionId: string, refused: Extract<Authorization, { readonly _tag: "ApprovalRefused" }>) =>
  refused.reason === "redecisions_exhausted"
    ? ApprovalAttemptsExhausted.of(transactionId)
    : ApprovalInProgress.of(
      transactionId,
      refused.liveUntil === null ? null : DateTime.formatIso(DateTime.makeUnsafe(Number(refused.liveUntil) * 1000))
    )

const heldBoxesOpen = "a held transfer's boxes open for the guardian (it opened them before it held the transfer)"

/**
 * Decided elsewhere between our read and our commit (another node). The guardian answered both
 * approvals with the same reservation (same transfer id), so it is released only when no approval
 * recorded the transfer: a rejection or expiry won. Releasing it under an approval that won would
 * let the sender spend the amount twice.
 */
const releaseUnlessRecorded = (context: TransfersContext, transferId: string) =>
  context.store.findById(transferId).pipe(
    Unavailable.database("Transfers.approveHeld"),
    Effect.flatMap((recorded) => Option.isSome(recorded) ? Effect.void : settleWithGuardian(context, transferId, "failed"))
  )

const keyKept = "a party's key, registered when its transfer was held, stays registered (a rotation replaces it, D55)"

/**
 * The held transfer as its create sealed it, with its parties and their keys as they are now.
 * D55: the keys are read again, not taken from the hold: the guardian encrypts the chain's
 * ciphertext (the handles added to each party's balance) to them and checks them against the key
 * registry, so after a party rotated, its key of the hold would be refused. The boxes stay as the
 * create sealed them, to the keys of then: a party that rotated opens its copy with its old key.
 */
const preparedOfHeld = Effect.fnUntraced(function*(
  context: TransfersContext,
  held: StoredAgentTransaction,
  chain: ChainContext
) {
  const accountOf = (accountId: string, invariant: string) =>
    context.accounts.get(accountId).pipe(Unavailable.database("Transfers.approveHeld"), Effect.flatMap(Invariant.some(invariant)))
  const agentAccount = yield* accountOf(held.agent_account_id, "a held transaction's agent account exists (accounts are never deleted)")
  const recipientAccount = held.recipient_account_id === null
    ? null
    : yield* accountOf(held.recipient_account_id, "a held transaction's recipient account exists (accounts are never deleted)")
  const keyNow = (account: Account | null, address: string) => partyKeyOf(context, chain, account, address, "Transfers.approveHeld")
  const fromKey = yield* keyNow(agentAccount, agentAccount.walletAddress).pipe(Effect.flatMap(Invariant.some(keyKept)))
  // A standard transfer's recipient gets no handle, so no key of it is sent (authorize.ts).
  const toKey = held.confidential
    ? yield* keyNow(recipientAccount, held.recipient_address).pipe(Effect.flatMap(Invariant.some(keyKept)))
    : null
  const parts = yield* context.heldStore.sealedParts(held.transaction_id).pipe(Unavailable.database("Transfers.approveHeld"))
  const publicAmount = parts.publicAmountSealed === null ? null : bytesToBigInt(
    yield* context.secretBox.open(parts.publicAmountSealed, publicAmountBinding(held.transaction_id)).pipe(
      Invariant.orDie("a held transfer's sealed public amount opens with this server's key under its row's binding")
    )
  )
  return {
    transferId: held.transfer_id,
    bindingId: transferIdBytes32(held.transfer_id),
    mode: held.mode,
    chainId: chain.chainId,
    contract: confidentialTokenOf(chain, held.asset),
    sender: agentAccount,
    senderAddress: getAddress(agentAccount.walletAddress),
    recipient: { account: recipientAccount, address: getAddress(held.recipient_address), display: held.recipient_display },
    asset: held.asset,
    confidential: held.confidential,
    apiKeyId: held.api_key_id,
    nonce: BigInt(held.replay_nonce),
    fromKey,
    toKey,
    boxes: { sender: parts.senderBox, recipient: parts.recipientBox, guardian: parts.guardianNote },
    sealedDigest: held.sealed_digest as Hex,
    publicAmount,
    // The guardian opened these boxes once already: it held the transfer only after that.
    clientSealed: false,
    refundOf: held.refund_of
  } satisfies PreparedTransfer
})

/** The approval's attestation deadline: the pinned one while enough of it is left, else a fresh one, pinned now. */
const approvalDeadline = Effect.fnUntraced(function*(context: TransfersContext, held: StoredAgentTransaction, nowMs: number) {
  const pinned = held.approval_deadline_seconds === null ? null : BigInt(held.approval_deadline_seconds)
  const nowSeconds = BigInt(Math.floor(nowMs / 1000))
  const reuseMinSeconds = Math.min(approvalDeadlineReuseMinSeconds, Math.floor(context.config.attestationLifetimeSeconds / 2))
  const deadlineSeconds = pinned !== null && pinned - nowSeconds >= BigInt(reuseMinSeconds)
    ? pinned
    : nowSeconds + BigInt(context.config.attestationLifetimeSeconds)
  if (deadlineSeconds !== pinned) {
    yield* context.heldStore.setApprovalDeadline(held.transaction_id, deadlineSeconds).pipe(
      Unavailable.database("Transfers.approveHeld")
    )
  }
  return deadlineSeconds
})
