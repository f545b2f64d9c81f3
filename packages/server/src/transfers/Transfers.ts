/**
 * Transfers: the product's core path (ARCHITECTURE.md, "A confidential transfer,
 * end to end"), for accounts and for agents. This module is the service and its
 * wiring; each step is a top-level function over one `TransfersContext`
 * (context.ts), in a module named for the step:
 *
 * 1. `resolve.ts`: rules that need no amount: asset, memo size, recipient (404 / 422 /
 *    self), KYC (D11: an agent's is its owner's), the mode's chain (D9), the sender's
 *    own key (an agent's amounts are encrypted to its owner's key).
 * 2. `seal.ts`: the plain form's three sealed boxes (amount and memo to sender and
 *    recipient, amount and r to the guardian), with a fresh opening {amount, r} and the
 *    transfer's id (`TransferSealer`), or the sealed form's boxes and token. The
 *    plaintext amount and memo are not kept beyond this step. Then, in the sender's
 *    actor (per account, per agent for agents; `senderTurn.ts`, D73: a turn takes the
 *    sender's creates that waited, in arrival order, and runs alone in the sender's lane,
 *    `platform/Lanes.ts`, as an owner's decision on a held one does): for an agent, D25's
 *    amount-free rules with the policy in force now (asset, recipient, active hours: 403
 *    `policy_violation`); a fresh replay nonce; steps 3 and 4, with one guardian call for
 *    the turn.
 * 3. `authorize.ts`: guardian `authorize`: it opens its box, computes the ciphertext,
 *    checks an agent's limits, the balance and the approval threshold, reserves, and
 *    signs the attestation — or answers a policy violation (403), insufficient balance
 *    (402), or "hold for approval": then the sealed transfer is kept as a held agent
 *    transaction (`hold.ts`, 202, D26) and nothing is reserved or signed.
 * 4. `record.ts`: one SQL transaction: the transfer row (pending), its
 *    `transfer.initiated` events and its chain submission (the attested call, recorded).
 * 5. `submit.ts`: settlement signs and broadcasts that call and waits up to
 *    `TRANSFER_CREATE_TIMEOUT_MS` (D14): `confirmed`, or `pending` and the rest
 *    happens in the background.
 * 6. `complete.ts`: the outcome: one SQL transaction for the status and its events, and
 *    beside it the guardian's `settle` (commit or release the reservation).
 *    `recover.ts`: the outcome stream, and a round that picks up every transfer still
 *    pending or not yet settled with the guardian after a restart.
 *
 * An owner's approval of a held transaction (D27, `approveHeld.ts`) runs steps 3-6 again
 * through the same functions (`authorizeAndRecord`, `submitAndAwait`), in the agent's
 * lane, with the boxes sealed at step 2. `prepare.ts` is the amount-free half of a
 * client-sealed transfer; `read.ts` a transfer as a viewer sees it, and D36's current
 * state of one for a retried create.
 *
 * No SQL transaction spans a guardian or chain call.
 *
 * Failures: a store or chain read that fails is a typed `DependencyUnavailable`
 * (platform/Unavailable.ts), answered here as 503 `service_unavailable`; only a broken
 * invariant dies, through platform/Invariant.ts, naming it. The steps on the per-transfer
 * path are `Effect.fnUntraced`: a span per step would cost every transfer a stack trace
 * and a context (SpanLog.stage); `SpanLog` stages mark them for measurements instead.
 *
 * @since 0.1.0
 */
import { EncryptionKey } from "@pps/crypto"
import { Context, Effect, Layer, type Option } from "effect"
import { AgentStore } from "../agents/AgentStore.ts"
import { type StoredAgentTransaction, AgentTransactionStore } from "../agents/AgentTransactionStore.ts"
import { type AgentTransactionRecord, toAgentTransactionRecord } from "@pps/api/Agents"
import type { Principal } from "@pps/api/ApiKeys"
import type {
  ApprovalAttemptsExhausted,
  ApprovalInProgress,
  EncryptionKeyRequired,
  InsufficientBalance,
  InvalidRequest,
  KycRequired,
  LivemodeUnavailable,
  NotTransferRecipient,
  PolicyViolation,
  PreparedTransferUsed,
  RecipientNotConfidentialReady,
  RecipientNotFound,
  RefundExceedsOriginal,
  ServiceUnavailable,
  TransactionExpired,
  TransactionNotFound,
  TransferNotConfidential,
  TransferNotConfirmed,
  TransferNotFound
} from "@pps/api/Errors"
import type {
  CreateTransferRequest,
  PreparedTransfer as PreparedTransferResponse,
  PrepareTransferRequest,
  RefundTransferRequest,
  TransferRecord
} from "@pps/api/Transfers"
import * as Invariant from "../platform/Invariant.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import { answerServiceUnavailable, type DependencyUnavailable } from "../platform/Unavailable.ts"
import { approveHeld } from "./approveHeld.ts"
import { makeTransfersContext, type TransfersContext } from "./context.ts"
import { create } from "./create.ts"
import { prepare } from "./prepare.ts"
import { current, get, toTransferRecord } from "./read.ts"
import { completeOutcomes, recoverForever } from "./recover.ts"
import { refund } from "./refund.ts"
import { type StoredTransfer, TransferStore } from "./TransferStore.ts"

export { transferIdBytes32 } from "./submission.ts"

/**
 * What `POST /v1/transfers` created: a transfer (201), or, for an agent above
 * its approval threshold, a held transaction (202, D26).
 *
 * @since 0.1.0
 * @category models
 */
export type CreateOutcome =
  | { readonly _tag: "Transfer"; readonly transfer: TransferRecord }
  | { readonly _tag: "Held"; readonly transaction: AgentTransactionRecord }

/**
 * @since 0.1.0
 * @category services
 */
export class Transfers extends Context.Service<Transfers, {
  readonly create: (
    principal: Principal,
    request: CreateTransferRequest
  ) => Effect.Effect<
    CreateOutcome,
    | InvalidRequest
    | KycRequired
    | LivemodeUnavailable
    | RecipientNotFound
    | RecipientNotConfidentialReady
    | EncryptionKeyRequired
    | PolicyViolation
    | InsufficientBalance
    | PreparedTransferUsed
    | ServiceUnavailable
  >
  /**
   * (ext, D43) Sends up to a received transfer's amount back to its sender: a transfer (201) whose
   * `refund_of` is the original, or an agent's refund held for its owner (202).
   */
  readonly refund: (
    principal: Principal,
    transferId: string,
    request: RefundTransferRequest
  ) => Effect.Effect<
    CreateOutcome,
    | InvalidRequest
    | TransferNotFound
    | NotTransferRecipient
    | TransferNotConfidential
    | TransferNotConfirmed
    | KycRequired
    | LivemodeUnavailable
    | RecipientNotFound
    | RecipientNotConfidentialReady
    | EncryptionKeyRequired
    | PolicyViolation
    | RefundExceedsOriginal
    | InsufficientBalance
    | PreparedTransferUsed
    | ServiceUnavailable
  >
  /** (ext) The amount-free half of a client-sealed transfer: its id, keys and token. */
  readonly prepare: (
    principal: Principal,
    request: PrepareTransferRequest
  ) => Effect.Effect<
    PreparedTransferResponse,
    | InvalidRequest
    | KycRequired
    | LivemodeUnavailable
    | RecipientNotFound
    | RecipientNotConfidentialReady
    | EncryptionKeyRequired
    | PolicyViolation
    | ServiceUnavailable
  >
  /**
   * D27: approves a held transaction (the caller has checked ownership): re-checks,
   * authorizes, records and submits it. The decided transaction and its transfer.
   */
  readonly approveHeld: (transactionId: string) => Effect.Effect<
    { readonly transaction: StoredAgentTransaction; readonly transfer: StoredTransfer },
    | TransactionNotFound
    | TransactionExpired
    | LivemodeUnavailable
    | PolicyViolation
    | RefundExceedsOriginal
    | InsufficientBalance
    | ApprovalInProgress
    | ApprovalAttemptsExhausted
    | ServiceUnavailable
  >
  readonly get: (principal: Principal, transferId: string) => Effect.Effect<TransferRecord, TransferNotFound | ServiceUnavailable>
  /**
   * D36: a recorded transfer as its create request would answer now: submitted if a
   * crash left it unsubmitted, awaited up to the create timeout (D14), its outcome
   * written. None for an unknown id. The database's outage is left typed: the caller answers it.
   */
  readonly current: (transferId: string) => Effect.Effect<Option.Option<StoredTransfer>, DependencyUnavailable>
  readonly record: (stored: StoredTransfer, viewerAccountId: string) => TransferRecord
}>()("server/transfers/Transfers") {
  static readonly layer = Layer.effect(
    Transfers,
    Effect.gen(function*() {
      const context = yield* makeTransfersContext
      // Checked once here, so that a bad key stops the server at start, not each transfer's sealing.
      yield* Invariant.check(
        EncryptionKey.parsePublicKey(context.guardianIdentity.encryptionKey).ok,
        "the guardian's encryption key is a valid point"
      )
      // Outcomes as they happen, and a periodic look at anything left unfinished.
      yield* Effect.forkScoped(completeOutcomes(context))
      yield* Effect.forkScoped(recoverForever(context))
      yield* registerReplays(context)
      return Transfers.of({
        create: (principal, request) =>
          create(context, principal, request, null).pipe(
            Effect.catchTag("RefundExceedsOriginal", (cause) =>
              Effect.die(new Invariant.InvariantViolation({ invariant: "only a refund is refused as exceeding its original", cause }))),
            answerServiceUnavailable,
            Effect.annotateLogs({ account_id: principal.accountId })
          ),
        refund: (principal, transferId, request) =>
          refund(context, principal, transferId, request).pipe(
            answerServiceUnavailable,
            Effect.annotateLogs({ account_id: principal.accountId, refund_of: transferId })
          ),
        prepare: (principal, request) =>
          prepare(context, principal, request).pipe(
            answerServiceUnavailable,
            Effect.annotateLogs({ account_id: principal.accountId })
          ),
        approveHeld: (transactionId) =>
          approveHeld(context, transactionId).pipe(
            answerServiceUnavailable,
            Effect.annotateLogs({ transaction_id: transactionId })
          ),
        get: (principal, transferId) => get(context, principal, transferId).pipe(answerServiceUnavailable),
        record: toTransferRecord,
        current: (transferId) => current(context, transferId)
      })
    })
  ).pipe(Layer.provideMerge(Layer.mergeAll(TransferStore.layer, AgentStore.layer, AgentTransactionStore.layer)))
}

/**
 * D36: a retry whose first request was cut off is answered from what it recorded. A replay
 * resolver has no error channel (platform/IdempotentOperations.ts, `OperationResolver`): a
 * database outage there dies as the typed `DependencyUnavailable`, which the envelope answers
 * 503 like any other outage (http/Envelope.ts).
 */
const registerReplays = (context: TransfersContext) =>
  Effect.andThen(
    context.operations.register("transfer", (transferId, principal) =>
      current(context, transferId).pipe(
        Effect.flatMap(Invariant.some("a transfer bound to an idempotency key exists (bound in the transaction that records it)")),
        Effect.map((t) => ({ status: 201, body: toTransferRecord(t, principal.accountId) })),
        Effect.catchTag("DependencyUnavailable", Effect.die)
      )),
    context.operations.register("agent_transaction", (transactionId) =>
      context.heldStore.findById(transactionId).pipe(
        Unavailable.database("Transfers.replay"),
        Effect.flatMap(Invariant.some("a held transaction bound to an idempotency key exists (bound in the transaction that holds it)")),
        Effect.map((held) => ({ status: 202, body: toAgentTransactionRecord(held, null) })),
        Effect.catchTag("DependencyUnavailable", Effect.die)
      ))
  )
