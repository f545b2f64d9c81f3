/**
 * Transfers: the product's core path (ARCHITECTURE.md, "A confidential transfer,
 * end to end"), for accounts and for agents.
 *
 * 1. Rules that need no amount: asset, memo size, recipient (404 / 422 / self),
 *    KYC (D11: an agent's is its owner's), the mode's chain (D9), the sender's
 *    own key (an agent's amounts are encrypted to its owner's key).
 * 2. The plain form's three sealed boxes (amount and memo to sender and recipient,
 *    amount and r to the guardian), with a fresh opening {amount, r} and the
 *    transfer's id (`TransferSealer`). The plaintext amount and memo are not kept
 *    beyond this step. Then, in the sender's actor (per account, per agent for
 *    agents; a sender's new transfers `SENDER_CONCURRENCY` at a time, an owner's
 *    decision on a held one alone: `KeyedSerializer`): for an agent, D25's
 *    amount-free rules with the policy in force now (asset, recipient, active
 *    hours: 403 `policy_violation`); a fresh replay nonce; steps 3 and 4.
 * 3. Guardian `authorize`: it opens its box, computes the ciphertext, checks an
 *    agent's limits, the balance and the approval threshold, reserves, and signs
 *    the attestation — or answers a policy violation (403), insufficient balance
 *    (402), or "hold for approval": then the sealed transfer is kept as a held
 *    agent transaction (202, D26) and nothing is reserved or signed.
 * 4. One SQL transaction: the transfer row (pending), its
 *    `transfer.initiated` events and its chain submission (the attested call, recorded).
 * 5. Settlement signs and broadcasts that call and waits up to
 *    `TRANSFER_CREATE_TIMEOUT_MS` (D14): `confirmed`, or `pending` and the rest
 *    happens in the background.
 * 6. The outcome: one SQL transaction for the status and its events, and beside
 *    it the guardian's `settle` (commit or release the reservation). A restart
 *    picks up every transfer still pending or not yet settled with the guardian.
 *
 * An owner's approval of a held transaction (D27) runs steps 3-6 again through
 * the same functions (`authorizeAndRecord`, `submitAndAwait`), in the agent's
 * actor, with the boxes sealed at step 2.
 *
 * No SQL transaction spans a guardian or chain call.
 *
 * @since 0.1.0
 */
import { type Domain as GuardianDomain, GuardianClient, SpanLog } from "@pps/guardian"
import { EncryptionKey, Note } from "@pps/crypto"
import {
  Cause,
  Clock,
  Context,
  DateTime,
  Deferred,
  Duration,
  Effect,
  Exit,
  Layer,
  Option,
  Redacted,
  Request,
  Schedule,
  Stream
} from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { type Address, bytesToBigInt, bytesToHex, getAddress, type Hex, hexToBytes, numberToBytes } from "viem"
import { Accounts } from "../accounts/Accounts.ts"
import { AgentStore } from "../agents/AgentStore.ts"
import { type StoredAgentTransaction, AgentTransactionStore } from "../agents/AgentTransactionStore.ts"
import {
  type AgentTransactionRecord,
  agentTransactionEvent,
  amountFreeViolation,
  policySnapshot,
  toAgentTransactionRecord
} from "@pps/api/Agents"
import { type Account, displayHandle, isKycSufficient } from "@pps/api/Accounts"
import { EncryptionKeys } from "../accounts/EncryptionKeys.ts"
import type { Mode, Principal } from "@pps/api/ApiKeys"
import { AppConfig } from "../config/AppConfig.ts"
import { type EventInput, transferEvents, type TransferParty } from "@pps/api/Events"
import { Outbox } from "../events/Outbox.ts"
import {
  EncryptionKeyRequired,
  InsufficientBalance,
  InvalidRequest,
  KycRequired,
  LivemodeUnavailable,
  PolicyViolation,
  PreparedTransferUsed,
  RecipientNotConfidentialReady,
  RecipientNotFound,
  ServiceUnavailable,
  TransactionExpired,
  TransactionNotFound,
  TransferNotFound
} from "@pps/api/Errors"
import { CurrentIdempotencyScope, OperationReplay } from "../platform/IdempotentOperations.ts"
import { makeId } from "../platform/Ids.ts"
import { KeyedSerializer } from "../platform/KeyedSerializer.ts"
import { SecretBox } from "../platform/SecretBox.ts"
import { sharedStatements } from "../platform/SharedStatements.ts"
import { Secrets } from "../platform/Secrets.ts"
import { confidentialTransferCall, publicTransferCall } from "../settlement/calls.ts"
import { type ChainContext, confidentialTokenOf } from "../settlement/Chains.ts"
import { gasLimits, type Resolution, type SubmissionRequest } from "../settlement/domain.ts"
import { GuardianIdentity } from "../settlement/GuardianIdentity.ts"
import { Settlement } from "../settlement/Settlement.ts"
import { releaseAdmission } from "../platform/Admission.ts"
import {
  type Asset,
  assets,
  type CreateTransferRequest,
  memoBytesMax,
  type PreparedTransfer as PreparedTransferResponse,
  type PrepareTransferRequest,
  parseAmount,
  parseRecipient,
  type TransferRecord
} from "@pps/api/Transfers"
import { checkToken, makeToken, preparationKey, preparedTransferLifetimeMs } from "./preparation.ts"
import { type NewTransfer, type StoredTransfer, TransferStore } from "./TransferStore.ts"
import { TransferSealer } from "./TransferSealer.ts"


const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

/**
 * The 32 bytes a transfer id stands for on chain and in the sealed boxes: its
 * ULID's 128 bits, left-padded.
 *
 * @since 0.1.0
 * @category constructors
 */
export const transferIdBytes32 = (transferId: string): Hex => {
  let value = 0n
  for (const char of transferId.slice(transferId.indexOf("_") + 1)) value = value * 32n + BigInt(crockford.indexOf(char))
  return `0x${value.toString(16).padStart(64, "0")}`
}

/** A transfer's attested call as settlement submits it: the same at its record and at a resubmission. */
const transferSubmission = (transfer: {
  readonly transferId: string
  readonly mode: Mode
  readonly confidential: boolean
  readonly contract: Address
  readonly callData: Hex
  readonly deadlineSeconds: bigint
  readonly sender: Address
  readonly nonce: bigint
}): SubmissionRequest => ({
  submissionId: transfer.transferId,
  mode: transfer.mode,
  kind: transfer.confidential ? "confidential_transfer" : "public_transfer",
  target: transfer.contract,
  data: transfer.callData,
  gasLimit: transfer.confidential ? gasLimits.confidential_transfer : gasLimits.public_transfer,
  deadlineSeconds: transfer.deadlineSeconds,
  replayKey: { sender: transfer.sender, nonce: transfer.nonce, transferId: transferIdBytes32(transfer.transferId) }
})

/** How often transfers whose outcome or guardian settlement is missing are looked at again. */
const recoveryEveryMs = 5_000

/**
 * Recovery leaves alone transfers younger than their create request can run
 * (plus this margin): those are driven by the request and by settlement's stream
 * of outcomes, and looking at every in-flight transfer each round would cost the
 * database a read per transfer on the hot path.
 */
const recoveryGraceMs = 5_000

/** Outcomes from settlement's stream completed at once (each a few statements and a guardian call). */
const completionsInParallel = 16
/** Completions written in one transaction at most (see `endTransfers`). */
const completionBatchMax = 64

/** Creates recorded in one transaction at most (see `recordTransfers`). */
const recordBatchMax = 64

/**
 * A created transfer's row, its `transfer.initiated` events and its chain submission;
 * `recordTransfers` writes those asked together. The asker's idempotency key is bound to
 * the transfer in the same transaction.
 */
class RecordTransfer extends Request.Class<
  { readonly transfer: NewTransfer; readonly events: ReadonlyArray<EventInput>; readonly submission: SubmissionRequest },
  void,
  SqlError.SqlError
> {}

/** A settlement outcome to write into its transfer; `endTransfers` writes those asked together. */
class EndTransfer extends Request.Class<
  { readonly resolution: Resolution },
  Option.Option<StoredTransfer>,
  SqlError.SqlError
> {}

/**
 * A retried approval reuses the deadline it pinned while at least this much of it is
 * left (so the guardian replays its recorded answer); otherwise it takes a fresh one.
 */
const approvalDeadlineReuseMinSeconds = 60

/** The associated data that binds a held standard transfer's sealed public amount to its row. */
const publicAmountBinding = (transactionId: string) => `pps/held-public-amount/v1/${transactionId}`

/**
 * The recipient as resolved: one of our accounts, or an outside address.
 */
interface Recipient {
  readonly account: Account | null
  readonly address: Address
  readonly display: string
  /** The key its balance is encrypted to (for an agent, its owner's), when registered. */
  readonly key: Option.Option<Uint8Array>
}

/**
 * A transfer once sealed: everything the guardian request, the calldata and the
 * transfer row need. No plaintext, except a standard transfer's public amount.
 */
interface PreparedTransfer {
  readonly transferId: string
  readonly bindingId: Hex
  readonly mode: Mode
  readonly chainId: number
  readonly contract: Address
  readonly sender: Account
  readonly senderAddress: Address
  readonly recipient: { readonly account: Account | null; readonly address: Address; readonly display: string }
  readonly asset: Asset
  readonly confidential: boolean
  readonly apiKeyId: string
  readonly nonce: bigint
  /** The key the sender's balance is encrypted to (an agent's owner's). */
  readonly fromKey: Uint8Array
  /** The recipient's registered key; null for a standard transfer to an address without one. */
  readonly toKey: Uint8Array | null
  readonly boxes: Note.TransferBoxes
  readonly sealedDigest: Hex
  /** Standard transfers only: the amount paid out in clear on chain. */
  readonly publicAmount: bigint | null
  /**
   * The client sealed the boxes (the sealed form): a guardian box that does not open, or
   * holds 0, is the client's mistake (400), not ours.
   */
  readonly clientSealed: boolean
}

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
   * D27: approves a held transaction (the caller has checked ownership): re-checks,
   * authorizes, records and submits it. The decided transaction and its transfer.
   */
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
  >
  readonly approveHeld: (transactionId: string) => Effect.Effect<
    { readonly transaction: StoredAgentTransaction; readonly transfer: StoredTransfer },
    | TransactionNotFound
    | TransactionExpired
    | LivemodeUnavailable
    | PolicyViolation
    | InsufficientBalance
    | ServiceUnavailable
  >
  readonly get: (principal: Principal, transferId: string) => Effect.Effect<TransferRecord, TransferNotFound>
  /**
   * D36: a recorded transfer as its create request would answer now: submitted if a
   * crash left it unsubmitted, awaited up to the create timeout (D14), its outcome
   * written. None for an unknown id.
   */
  readonly current: (transferId: string) => Effect.Effect<Option.Option<StoredTransfer>>
  readonly record: (stored: StoredTransfer, viewerAccountId: string) => TransferRecord
}>()("server/transfers/Transfers") {
  static readonly layer = Layer.effect(
    Transfers,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const sql = yield* SqlClient.SqlClient
      const store = yield* TransferStore
      const accounts = yield* Accounts
      const keys = yield* EncryptionKeys
      const settlement = yield* Settlement
      const guardian = yield* GuardianClient.GuardianClient
      const guardianIdentity = yield* GuardianIdentity
      const outbox = yield* Outbox
      const actors = yield* KeyedSerializer
      const agentStore = yield* AgentStore
      const heldStore = yield* AgentTransactionStore
      const secretBox = yield* SecretBox
      const sealer = yield* TransferSealer
      // The layer's scope, for work nobody waits for (interrupted when the server stops).
      const scope = yield* Effect.scope
      const operations = yield* OperationReplay
      const preparationSecret = preparationKey(Redacted.value((yield* Secrets).apiKeyPepper))

      // Checked once here, so that a bad key stops the server at start, not each transfer's sealing.
      if (!EncryptionKey.parsePublicKey(guardianIdentity.encryptionKey).ok) {
        return yield* Effect.die(new Error("the guardian's encryption key is not a valid point"))
      }

      const party = (account: Account): TransferParty => ({
        accountId: account.accountId,
        handle: account.handle,
        ownerAccountId: account.ownerAccountId
      })

      /** The account whose KYC and key stand for this one (D11: agents inherit their owner's). */
      const principalOf = (account: Account) =>
        account.ownerAccountId === null
          ? Effect.succeed(account)
          : accounts.get(account.ownerAccountId).pipe(Effect.map(Option.getOrThrow))

      const record = (t: StoredTransfer, viewerAccountId: string): TransferRecord => ({
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
        confirmed_at: t.confirmed_at
      })

      const resolveRecipient = (chain: ChainContext, sender: Account, to: string) =>
        Effect.gen(function*() {
          const ref = parseRecipient(to)
          if (ref === undefined) {
            return yield* Effect.fail(InvalidRequest.of("`to` must be an @handle or a 0x address.", { param: "to" }))
          }
          const account = ref._tag === "Handle"
            ? yield* accounts.findByHandle(ref.handle).pipe(Effect.orDie)
            : yield* accounts.findByWalletAddress(ref.address).pipe(Effect.orDie)
          if (ref._tag === "Handle" && Option.isNone(account)) return yield* Effect.fail(RecipientNotFound.of())
          // D38: an agent of the other mode is unknown to this key.
          if (ref._tag === "Handle" && Option.isSome(account) && account.value.type === "agent") {
            const inMode = yield* agentStore.findInMode(account.value.accountId, chain.mode).pipe(Effect.orDie)
            if (Option.isNone(inMode)) return yield* Effect.fail(RecipientNotFound.of())
          }
          if (Option.isSome(account)) {
            if (account.value.accountId === sender.accountId) {
              return yield* Effect.fail(InvalidRequest.of("A transfer to yourself is not allowed.", { param: "to" }))
            }
            const keyHolder = yield* principalOf(account.value).pipe(Effect.orDie)
            const key = yield* keys.keyOfAccount(keyHolder.accountId, chain.mode).pipe(Effect.orDie)
            return {
              account: account.value,
              address: getAddress(account.value.walletAddress),
              display: ref._tag === "Handle" ? displayHandle(account.value.handle) : getAddress(ref.address),
              key
            } satisfies Recipient
          }
          const address = getAddress((ref as { readonly address: Address }).address)
          const key = yield* keys.keyOfAddress(chain, address).pipe(Effect.orDie)
          return { account: null, address, display: address, key } satisfies Recipient
        })

      /**
       * Completions under way or just done, by transfer id. The request that waits for its
       * transfer and the background stream of outcomes both see each resolution: the first runs
       * the completion, the other waits for it, so a transfer's outcome costs one read, one
       * status change and one guardian settlement, not two of each. Kept a minute (far longer
       * than the two lie apart); a failed completion is forgotten at once, for a retry.
       */
      const completions = new Map<string, { readonly done: Deferred.Deferred<Option.Option<StoredTransfer>, SqlError.SqlError>; readonly atMs: number }>()
      const completionMemoryMs = 60_000

      /** Writes the outcome once (status + events) and settles it with the guardian; the transfer as it ends. */
      const complete = (resolution: Resolution) =>
        // Not interruptible but for the wait on another's completion: the request that runs it may
        // be cut off by its client, and the outcome stream may be waiting on this very completion.
        Effect.uninterruptibleMask((restore) => Effect.suspend(() => {
          const nowMs = Date.now()
          const known = completions.get(resolution.submissionId)
          if (known !== undefined) return restore(Deferred.await(known.done))
          if (completions.size > 4_096) {
            for (const [id, entry] of completions) if (nowMs - entry.atMs > completionMemoryMs) completions.delete(id)
          }
          const done = Deferred.makeUnsafe<Option.Option<StoredTransfer>, SqlError.SqlError>()
          completions.set(resolution.submissionId, { done, atMs: nowMs })
          return completeOnce(resolution).pipe(
            Effect.onExit((exit) =>
              Effect.andThen(
                Effect.sync(() => {
                  if (exit._tag === "Failure") completions.delete(resolution.submissionId)
                }),
                Deferred.done(done, exit)
              )
            )
          )
        }))

      /**
       * Ends transfers in SQL: the status changes and their events, in one transaction for all
       * the completions asked for in the same turn (a block's confirmations wake their waiting
       * requests and the outcome stream together), so a block costs one UPDATE, one INSERT of
       * events and one commit instead of those per transfer. Each asker gets its transfer as it
       * ended, or None when it had ended before. When the shared transaction fails, each
       * completion is tried again alone, so one transfer's fault never becomes another's (as in
       * the guardian's group commit).
       */
      const endInOneTransaction = (entries: ReadonlyArray<Request.Entry<EndTransfer>>) =>
        sql.withTransaction(Effect.gen(function*() {
          const asked = new Map(entries.map(({ request: { resolution } }) => [resolution.submissionId, resolution]))
          const ended = yield* store.finish(entries.map(({ request: { resolution } }) => ({
            transferId: resolution.submissionId,
            status: resolution._tag === "Confirmed" ? "confirmed" as const : "failed" as const,
            txHash: resolution.txHash,
            blockTimestampSeconds: resolution._tag === "Confirmed" ? resolution.blockTimestampSeconds : null
          })))
          yield* outbox.append(ended.flatMap((t) =>
            transferEvents({
              event: t.status === "confirmed" ? "transfer.confirmed" : "transfer.failed",
              mode: t.mode,
              transferId: t.transfer_id,
              sender: { accountId: t.sender_account_id, handle: t.sender_handle, ownerAccountId: t.sender_owner_account_id },
              recipient: t.recipient_account_id === null || t.recipient_handle === null
                ? null
                : { accountId: t.recipient_account_id, handle: t.recipient_handle, ownerAccountId: t.recipient_owner_account_id },
              recipientDisplay: t.recipient_display,
              asset: t.asset,
              confidential: t.confidential,
              txHash: asked.get(t.transfer_id)?.txHash ?? null
            })
          ))
          return new Map(ended.map((t) => [t.transfer_id, t]))
        }))
      const answer = (
        entries: ReadonlyArray<Request.Entry<EndTransfer>>,
        exit: Exit.Exit<ReadonlyMap<string, StoredTransfer>, SqlError.SqlError>
      ) => {
        for (const entry of entries) {
          entry.completeUnsafe(Exit.map(exit, (ended) => Option.fromNullishOr(ended.get(entry.request.resolution.submissionId))))
        }
      }
      // The batch bounds a transaction's length, its row locks and the statement shapes it prepares.
      const endTransfers = sharedStatements(sql, endInOneTransaction, answer, completionBatchMax)

      /**
       * The SQL end and the guardian's settlement, side by side: the settlement's round trip was
       * the longest step of a create's answer after the chain (docs/benchmarks.md, "A transfer's
       * time, stage by stage"). Neither reads what the other writes: the SQL end writes this
       * resolution (final once for a submission), and the guardian decides the reservation from
       * its own record under the reservation's row lock (a failure only once the chain says the
       * attestation can never be mined), so a settlement before, after or twice (another
       * completion, a retry, the recovery round) changes the books at most once. A crash between
       * the two commits leaves one of them for the recovery round. The caller is answered once
       * both are done: when the guardian answered, a read of its books after a `confirmed` answer
       * sees the transfer; when it did not (down, killed mid-call), the answer is still the
       * chain's and the books catch up at the recovery round, as before.
       */
      const completeOnce = (resolution: Resolution) =>
        Effect.gen(function*() {
          const status = resolution._tag === "Confirmed" ? "confirmed" as const : "failed" as const
          const [ended, settled] = yield* Effect.zip(
            Effect.request(new EndTransfer({ resolution }), endTransfers),
            guardianSettle(resolution.submissionId, status),
            { concurrent: true }
          )
          // The mark only spares the recovery round a second settlement: not awaited. One this
          // process does not write (a crash, a shutdown) leaves the transfer to that round.
          if (settled) yield* Effect.forkIn(markSettled(resolution.submissionId), scope)
          return Option.isSome(ended) ? ended : yield* store.findById(resolution.submissionId)
        })

      /** The guardian's settlement of a transfer; false when it failed (logged: the recovery round retries). */
      const guardianSettle = (transferId: string, outcome: "confirmed" | "failed") =>
        guardian.settle({ transferId: transferIdBytes32(transferId), outcome }).pipe(
          Effect.as(true),
          // Any cause, not only a typed failure: a guardian child killed mid-call ends the call
          // with an interruption (its client's scope closes), which is not this fiber's own and
          // must not end the completion or the loop that runs it. Retried by the recovery round;
          // the reservation also expires on its own.
          Effect.catchCause((cause) =>
            Effect.logWarning("guardian settle failed; will retry").pipe(
              Effect.annotateLogs({ transfer_id: transferId, error: Cause.pretty(cause) }),
              Effect.as(false)
            )
          )
        )

      /** Records that the guardian settled the transfer, so the recovery round leaves it. */
      const markSettled = (transferId: string) =>
        store.markGuardianSettled(transferId).pipe(
          Effect.catchCause((cause) =>
            Effect.logWarning("marking a transfer settled with the guardian failed; the recovery round settles it again").pipe(
              Effect.annotateLogs({ transfer_id: transferId, error: Cause.pretty(cause) })
            )
          )
        )

      const settleWithGuardian = (transferId: string, outcome: "confirmed" | "failed") =>
        guardianSettle(transferId, outcome).pipe(Effect.flatMap((settled) => (settled ? markSettled(transferId) : Effect.void)))

      /** Transfers a crash or an outage left unfinished. */
      const recover = (mode: Mode) =>
        Effect.gen(function*() {
          const nowMs = yield* Clock.currentTimeMillis
          const createdBefore = DateTime.formatIso(
            DateTime.makeUnsafe(nowMs - config.transferCreateTimeoutMs - recoveryGraceMs)
          )
          const open = yield* store.unfinished(mode, createdBefore)
          for (const t of open) {
            if (t.status !== "pending") {
              yield* settleWithGuardian(t.transfer_id, t.status)
              continue
            }
            const outcome = yield* settlement.awaitResolution(t.transfer_id, 0)
            if (Option.isSome(outcome)) {
              yield* complete(outcome.value)
              continue
            }
            // Pending without a submission (the process died between commit and submit): submit now.
            yield* resubmit(t)
          }
        })

      /** Submits a recorded transfer's attested call; a no-op when it was submitted already. */
      const resubmit = (t: StoredTransfer) =>
        Effect.gen(function*() {
          const boxes = yield* store.boxes(t.transfer_id)
          const chain = settlement.chain(t.mode)
          if (Option.isNone(boxes) || Option.isNone(chain)) return
          yield* settlement.submit(transferSubmission({
            transferId: t.transfer_id,
            mode: t.mode,
            confidential: t.confidential,
            contract: confidentialTokenOf(chain.value, t.asset),
            callData: bytesToHex(boxes.value.callData),
            deadlineSeconds: BigInt(t.deadline_seconds),
            sender: getAddress(Option.getOrThrow(yield* accounts.get(t.sender_account_id)).walletAddress),
            nonce: BigInt(t.replay_nonce)
          })).pipe(Effect.catch((error) => Effect.logWarning("resubmission failed; will retry", error)))
        })

      // Outcomes as they happen, and a periodic look at anything left unfinished.
      yield* Effect.forkScoped(
        settlement.resolutions.pipe(
          Stream.filter((resolution) => resolution.submissionId.startsWith("tr_")),
          // One completion's fault (a defect, an interruption from a callee) is logged and the
          // stream goes on: ending it would leave every later outcome to the recovery round.
          // Several at once: a completion waits on SQL and on the guardian, and a watcher round
          // can confirm hundreds of transfers whose requests stopped waiting (answered `pending`).
          // `complete` runs each transfer's completion once, however many ask.
          Stream.mapEffect(
            (resolution) =>
              complete(resolution).pipe(
                Effect.catchCause((cause) => Effect.logError("completing a transfer failed", Cause.pretty(cause)))
              ),
            { concurrency: completionsInParallel, unordered: true }
          ),
          Stream.runDrain
        )
      )
      const modes = (["test", "live"] as const).filter((mode) => Option.isSome(settlement.chain(mode)))
      yield* Effect.forkScoped(
        Effect.forEach(modes, recover, { discard: true }).pipe(
          // Any cause ends this round only, never the loop (see the outcome stream above).
          Effect.catchCause((cause) => Effect.logError("transfer recovery round failed", Cause.pretty(cause))),
          Effect.repeat(Schedule.spaced(Duration.millis(recoveryEveryMs)))
        )
      )

      /**
       * Records transfers as they are created: each row, its events and its asker's idempotency
       * binding, in one transaction for all the creates asked for in the same turn (the guardian
       * answers a group of decisions at once, so their creates reach this step together): one
       * INSERT of rows, one of events and one commit instead of those per create. When the
       * shared transaction fails, each create is recorded again alone, so one create's fault
       * (a claim another run took over, a row that cannot be written) never becomes another's.
       */
      const recordInOneTransaction = (entries: ReadonlyArray<Request.Entry<RecordTransfer>>) =>
        sql.withTransaction(Effect.gen(function*() {
          // Each under its own request's key: the batch runs in its first asker's context.
          yield* operations.bindEach("transfer", entries.map((entry) => ({
            scope: Context.get(entry.context, CurrentIdempotencyScope),
            operationId: entry.request.transfer.transferId
          })))
          yield* store.insert(entries.map((entry) => entry.request.transfer))
          yield* outbox.append(entries.flatMap((entry) => entry.request.events))
          yield* settlement.record(entries.map((entry) => entry.request.submission))
        }))
      const recordTransfers = sharedStatements(
        sql,
        recordInOneTransaction,
        (entries, exit: Exit.Exit<void, SqlError.SqlError>) => entries.forEach((entry) => entry.completeUnsafe(exit)),
        recordBatchMax
      )
      /** The record step of a new transfer (`authorizeAndRecord`'s `write`). */
      const recordCreated = (transfer: NewTransfer, events: ReadonlyArray<EventInput>, submission: SubmissionRequest) =>
        Effect.request(new RecordTransfer({ transfer, events, submission }), recordTransfers)
      /** The record step in a transaction of its own, with what must commit with it (an approval's decision). */
      const recordAlongside = <E>(alongside: Effect.Effect<void, E | SqlError.SqlError>) =>
      (transfer: NewTransfer, events: ReadonlyArray<EventInput>, submission: SubmissionRequest) =>
        sql.withTransaction(alongside.pipe(
          Effect.andThen(store.insert([transfer])),
          Effect.andThen(outbox.append(events)),
          Effect.andThen(settlement.record([submission]))
        ))

      /**
       * The guardian's decision on a sealed transfer and, when it attests, `write`: the
       * transfer row, its `transfer.initiated` events and its chain submission (the attested
       * call, `recorded`, signed by `submitAndAwait` once this commits) in SQL (`recordCreated` for a new
       * transfer, batched; `recordAlongside` for an approved held one, with the approval's own
       * state change and event). This is the one place a transfer is attested and recorded.
       *
       * Not interruptible: once the guardian is asked, its decision commits there whether or
       * not this request is still wanted (a reservation under the transfer's id), so a client
       * that hangs up must not cut the step between that decision and the row that records
       * it, or the reservation would hold the sender's funds until its deadline with no
       * transfer to settle it, and the client's retry would find them gone (402). The wait is
       * bounded by the guardian client's timeout.
       */
      const authorizeAndRecord = <E>(
        prepared: PreparedTransfer,
        deadlineSeconds: bigint,
        agent: GuardianDomain.AuthorizeRequest["agent"],
        write: (
          transfer: NewTransfer,
          events: ReadonlyArray<EventInput>,
          submission: SubmissionRequest
        ) => Effect.Effect<void, E | SqlError.SqlError>
      ) =>
        Effect.gen(function*() {
          const authorization = yield* guardian.authorize({
            transferId: prepared.bindingId,
            chainId: BigInt(prepared.chainId),
            contract: prepared.contract,
            kind: prepared.confidential ? "confidential" : "public",
            from: prepared.senderAddress,
            to: prepared.recipient.address,
            fromKey: bytesToHex(prepared.fromKey),
            ...(prepared.confidential
              ? { toKey: bytesToHex(prepared.toKey!), sealedDigest: prepared.sealedDigest }
              : { amount: prepared.publicAmount! }),
            nonce: prepared.nonce,
            deadline: deadlineSeconds,
            guardianNote: bytesToHex(prepared.boxes.guardian),
            apiKey: prepared.apiKeyId,
            ...(agent === undefined ? {} : { agent })
          }).pipe(Effect.catch((error) =>
            Effect.logError("guardian unavailable", error).pipe(Effect.andThen(Effect.fail(ServiceUnavailable.of())))
          ))
          switch (authorization._tag) {
            case "InsufficientBalance":
              return yield* Effect.fail(InsufficientBalance.of())
            case "PolicyViolation":
              return yield* Effect.fail(PolicyViolation.of(authorization.reason))
            case "HoldForApproval":
              return { _tag: "Hold", sealedAmount: authorization.sealedAmount as Hex } as const
            case "Refused":
              // A frozen account (books disagree with the chain), or an approval retried after its
              // first attestation's deadline (the guardian keeps that reservation until it expires),
              // is a state that passes: 503, retry later. Any other refusal is a fault of our own
              // request: a defect.
              if (prepared.clientSealed && (authorization.reason === "note_invalid" || authorization.reason === "amount_zero")) {
                return yield* Effect.fail(InvalidRequest.of(
                  authorization.reason === "amount_zero"
                    ? "The sealed amount must be above 0."
                    : "`sealed.guardian` does not open as the guardian's note for this prepared transfer (wrong key, binding or format).",
                  { param: "sealed.guardian" }
                ))
              }
              if (prepared.clientSealed && authorization.reason === "transfer_id_reused") {
                return yield* Effect.fail(PreparedTransferUsed.of(prepared.transferId))
              }
              if (authorization.reason === "account_frozen" || authorization.reason === "transfer_id_reused") {
                return yield* Effect.logWarning("guardian refused a transfer for now").pipe(
                  Effect.annotateLogs({ transfer_id: prepared.transferId, reason: authorization.reason }),
                  Effect.andThen(Effect.fail(ServiceUnavailable.of()))
                )
              }
              return yield* Effect.logError("guardian refused a transfer").pipe(
                Effect.annotateLogs({ transfer_id: prepared.transferId, reason: authorization.reason }),
                Effect.andThen(Effect.die(new Error(`guardian refused: ${authorization.reason}`)))
              )
          }
          const ciphertext = authorization.ciphertext
          const callData = prepared.confidential
            ? confidentialTransferCall({
              from: prepared.senderAddress,
              to: prepared.recipient.address,
              transferId: prepared.bindingId,
              nonce: prepared.nonce,
              ciphertext: {
                commitment: hexToBytes(ciphertext.commitment as Hex),
                fromHandle: hexToBytes(ciphertext.fromHandle as Hex),
                toHandle: hexToBytes(ciphertext.toHandle! as Hex),
                guardianHandle: hexToBytes(ciphertext.guardianHandle as Hex)
              },
              sealedDigest: prepared.sealedDigest,
              deadlineSeconds: authorization.deadline
            }, authorization.signature as Hex)
            : publicTransferCall({
              from: prepared.senderAddress,
              to: prepared.recipient.address,
              transferId: prepared.bindingId,
              nonce: prepared.nonce,
              amount: prepared.publicAmount!,
              commitment: hexToBytes(ciphertext.commitment as Hex),
              fromHandle: hexToBytes(ciphertext.fromHandle as Hex),
              guardianHandle: hexToBytes(ciphertext.guardianHandle as Hex),
              deadlineSeconds: authorization.deadline
            }, authorization.signature as Hex)
          const submission = transferSubmission({
            transferId: prepared.transferId,
            mode: prepared.mode,
            confidential: prepared.confidential,
            contract: prepared.contract,
            callData,
            deadlineSeconds: authorization.deadline,
            sender: prepared.senderAddress,
            nonce: prepared.nonce
          })
          const nowMs = yield* Clock.currentTimeMillis
          yield* write({
            transferId: prepared.transferId,
            mode: prepared.mode,
            senderAccountId: prepared.sender.accountId,
            recipientAccountId: prepared.recipient.account?.accountId ?? null,
            recipientAddress: prepared.recipient.address,
            recipientDisplay: prepared.recipient.display,
            asset: prepared.asset,
            confidential: prepared.confidential,
            apiKeyId: prepared.apiKeyId,
            replayNonce: prepared.nonce,
            deadlineSeconds: authorization.deadline,
            senderBox: prepared.boxes.sender,
            recipientBox: prepared.boxes.recipient,
            sealedDigest: prepared.sealedDigest,
            ciphertext: JSON.stringify(ciphertext),
            callData: hexToBytes(callData),
            createdAt: DateTime.formatIso(DateTime.makeUnsafe(nowMs))
          }, transferEvents({
            event: "transfer.initiated",
            mode: prepared.mode,
            transferId: prepared.transferId,
            sender: party(prepared.sender),
            recipient: prepared.recipient.account === null ? null : party(prepared.recipient.account),
            recipientDisplay: prepared.recipient.display,
            asset: prepared.asset,
            confidential: prepared.confidential,
            txHash: null
          }), submission).pipe(Effect.catchTag("SqlError", Effect.die), SpanLog.stage("Transfers.record"))
          return { _tag: "Recorded", submission } as const
        }).pipe(Effect.uninterruptible)

      /** Step 5 of both paths: submit the attested call, wait up to the create timeout (D14). */
      const submitAndAwait = (prepared: PreparedTransfer, recorded: { readonly submission: SubmissionRequest }) =>
        Effect.gen(function*() {
          yield* settlement.submitRecorded(recorded.submission).pipe(Effect.catch((error) =>
            // Recorded and attested: the recovery round submits it; the client sees `pending`.
            Effect.logWarning("submission failed; will retry").pipe(
              Effect.annotateLogs({ transfer_id: prepared.transferId, error: String(error) })
            )
          ))
          const outcome = yield* settlement.awaitResolution(prepared.transferId, config.transferCreateTimeoutMs).pipe(
            Effect.orDie,
            SpanLog.stage("Transfers.awaitOutcome")
          )
          const ended = Option.isSome(outcome)
            ? yield* complete(outcome.value).pipe(Effect.orDie, SpanLog.stage("Transfers.complete"))
            : Option.none()
          return Option.getOrThrow(Option.isSome(ended) ? ended : yield* store.findById(prepared.transferId).pipe(Effect.orDie))
        })

      /** D25's amount-free rules with the policy in force now; the snapshot for the guardian. */
      const checkPolicy = (
        agentAccountId: string,
        attempt: {
          readonly asset: Asset
          readonly recipientNames: ReadonlyArray<string>
          readonly activeHoursAtMs: number | null
        }
      ) =>
        Effect.gen(function*() {
          // Every agent has its policy from creation (one SQL transaction): a missing one is a defect.
          const policy = Option.getOrThrow(yield* agentStore.policyOf(agentAccountId).pipe(Effect.orDie))
          const violation = amountFreeViolation(policy, attempt)
          if (violation !== undefined) return yield* Effect.fail(PolicyViolation.of(violation))
          return policySnapshot(policy, attempt.asset)
        })

      const namesOf = (recipient: { readonly account: Account | null; readonly address: Address }) =>
        recipient.account === null ? [recipient.address.toLowerCase()] : [recipient.account.handle, recipient.address.toLowerCase()]

      /**
       * What the request says about the money: the plain form (SPEC: `amount` and `memo`, seen
       * by this process for the length of the request) or the sealed form (ext: boxes the
       * client sealed to a prepared transfer). Both, or neither, is a malformed body.
       */
      const moneyOf = (body: CreateTransferRequest, asset: Asset) =>
        Effect.gen(function*() {
          if (body.sealed !== undefined) {
            if (body.amount !== undefined || body.memo !== undefined) {
              return yield* Effect.fail(InvalidRequest.of(
                "Send either `amount` (and `memo`) or `sealed`, not both.",
                { param: "sealed" }
              ))
            }
            if (body.confidential === false) {
              return yield* Effect.fail(InvalidRequest.of(
                "A standard transfer pays its amount in clear on chain: send it with `amount`, not `sealed`.",
                { param: "confidential" }
              ))
            }
            const sealed = body.sealed
            if (!/^tr_[0-9A-HJKMNP-TV-Z]{26}$/.test(sealed.transfer_id)) {
              return yield* Effect.fail(InvalidRequest.of(
                "`sealed.transfer_id` must be the id of a prepared transfer.",
                { param: "sealed.transfer_id" }
              ))
            }
            const box = (name: "guardian" | "sender" | "recipient", length: number) =>
              new RegExp(`^0x[0-9a-fA-F]{${length * 2}}$`).test(sealed[name])
                ? Effect.succeed(hexToBytes(sealed[name] as Hex))
                : Effect.fail(InvalidRequest.of(
                  `\`sealed.${name}\` must be a sealed box of exactly ${length} bytes, as 0x-prefixed hex.`,
                  { param: `sealed.${name}` }
                ))
            const boxes: Note.TransferBoxes = {
              guardian: yield* box("guardian", Note.guardianBoxLength),
              sender: yield* box("sender", Note.transferBoxLength),
              recipient: yield* box("recipient", Note.transferBoxLength)
            }
            return { _tag: "Sealed", transferId: sealed.transfer_id, token: sealed.token, boxes } as const
          }
          const amount = body.amount === undefined ? undefined : parseAmount(body.amount, asset)
          if (amount === undefined) {
            return yield* Effect.fail(InvalidRequest.of(
              `\`amount\` must be a decimal string above 0 with at most ${assets[asset]} decimals and at most 1,000,000,000,000 units (and below 2^64 base units).`,
              { param: "amount" }
            ))
          }
          const memo = body.memo ?? ""
          if (Buffer.byteLength(memo, "utf8") > memoBytesMax) {
            return yield* Effect.fail(InvalidRequest.of("`memo` is at most 512 bytes of UTF-8.", { param: "memo" }))
          }
          return { _tag: "Plain", amount, memo } as const
        })

      const assetOf = (name: string | undefined) =>
        (name ?? "USDG") in assets
          ? Effect.succeed((name ?? "USDG") as Asset)
          : Effect.fail(InvalidRequest.of("`asset` must be USDG or ETH.", { param: "asset" }))

      /**
       * Step 1's rules that need no amount, shared by create and prepare, in D37's order:
       * KYC, the mode's chain, an agent's amount-free policy before anything is said about
       * the recipient (unknown, 404; not confidential-ready, 422), then both parties' keys.
       */
      const resolveParties = (principal: Principal, to: string, asset: Asset, confidential: boolean) =>
        Effect.gen(function*() {
          const sender = Option.getOrThrow(yield* accounts.get(principal.accountId).pipe(Effect.orDie))
          const senderPrincipal = yield* principalOf(sender).pipe(Effect.orDie)
          if (!isKycSufficient(senderPrincipal.kycStatus)) return yield* Effect.fail(KycRequired.of())
          const chain = yield* Option.match(settlement.chain(principal.mode), {
            onNone: () => Effect.fail(LivemodeUnavailable.of()),
            onSome: Effect.succeed
          })
          const isAgent = sender.ownerAccountId !== null
          // Checked again, with the policy in force then, in the agent's actor.
          const policyFirst = (recipientNames: ReadonlyArray<string>) =>
            isAgent
              ? Clock.currentTimeMillis.pipe(
                Effect.flatMap((nowMs) => checkPolicy(sender.accountId, { asset, recipientNames, activeHoursAtMs: nowMs }))
              )
              : Effect.void
          const recipient = yield* resolveRecipient(chain, sender, to).pipe(
            Effect.tapError((error) => {
              const ref = parseRecipient(to)
              return error._tag === "RecipientNotFound" && ref?._tag === "Handle" ? policyFirst([ref.handle]) : Effect.void
            })
          )
          yield* policyFirst(namesOf(recipient))
          if (confidential && Option.isNone(recipient.key)) return yield* Effect.fail(RecipientNotConfidentialReady.of())
          const senderKey = yield* keys.keyOfAccount(senderPrincipal.accountId, principal.mode).pipe(Effect.orDie)
          if (Option.isNone(senderKey)) return yield* Effect.fail(EncryptionKeyRequired.of())
          return { sender, isAgent, chain, recipient, senderKey: senderKey.value, contract: confidentialTokenOf(chain, asset) }
        })

      type Parties = Effect.Success<ReturnType<typeof resolveParties>>

      const preparationFactsOf = (principal: Principal, asset: Asset, parties: Parties, transferId: string) => ({
        transferId,
        senderAccountId: parties.sender.accountId,
        mode: principal.mode,
        asset,
        recipientAddress: parties.recipient.address,
        senderKey: bytesToHex(parties.senderKey),
        // A confidential recipient always has a key (resolveParties refused it otherwise).
        recipientKey: bytesToHex(Option.getOrThrow(parties.recipient.key))
      })

      const prepare = Effect.fn("Transfers.prepare")(function*(principal: Principal, body: PrepareTransferRequest) {
        const asset = yield* assetOf(body.asset)
        const parties = yield* resolveParties(principal, body.to, asset, true)
        const nowMs = yield* Clock.currentTimeMillis
        const transferId = makeId("tr", nowMs)
        const facts = {
          ...preparationFactsOf(principal, asset, parties, transferId),
          expiresAtMs: nowMs + preparedTransferLifetimeMs
        }
        return {
          transfer_id: transferId,
          binding_id: transferIdBytes32(transferId),
          chain_id: parties.chain.chainId,
          contract: parties.contract,
          asset,
          to: parties.recipient.display,
          recipient_address: parties.recipient.address,
          sender_key: facts.senderKey,
          recipient_key: facts.recipientKey,
          guardian_key: bytesToHex(guardianIdentity.encryptionKey),
          token: makeToken(preparationSecret, facts),
          expires_at: DateTime.formatIso(DateTime.makeUnsafe(facts.expiresAtMs))
        } satisfies PreparedTransferResponse
      })

      const create = Effect.fn("Transfers.create")(function*(principal: Principal, body: CreateTransferRequest) {
        // 1. Amount-free rules.
        const asset = yield* assetOf(body.asset)
        const money = yield* moneyOf(body, asset)
        const confidential = body.confidential ?? true
        const parties = yield* resolveParties(principal, body.to, asset, confidential)
        const { sender, isAgent, chain, recipient, senderKey, contract } = parties
        if (money._tag === "Sealed") {
          const problem = checkToken(
            preparationSecret,
            money.token,
            preparationFactsOf(principal, asset, parties, money.transferId),
            yield* Clock.currentTimeMillis
          )
          if (problem !== undefined) {
            return yield* Effect.fail(InvalidRequest.of(
              problem === "expired"
                ? "This prepared transfer has expired: prepare it again and seal new boxes."
                : "`sealed.token` does not stand for this transfer: the recipient, asset, keys or transfer id differ from what was prepared.",
              { param: "sealed.token" }
            ))
          }
        }

        // 2. The plain form's boxes, sealed before the sender's turn: sealing needs no state, and
        // off the event loop (TransferSealer) it runs while other requests do. For a standard
        // transfer to an address without a key, the recipient's copy is sealed to the sender
        // (the recipient sees the amount on chain anyway).
        const boxed = money._tag === "Sealed"
          ? { _tag: "Prepared" as const, transferId: money.transferId, boxes: money.boxes }
          : yield* Effect.gen(function*() {
            const transferId = makeId("tr", yield* Clock.currentTimeMillis)
            const boxes = yield* sealer.seal({
              context: { chainId: BigInt(chain.chainId), contract, transferId: hexToBytes(transferIdBytes32(transferId)) },
              note: { amount: money.amount, memo: money.memo },
              senderKey,
              recipientKey: Option.getOrElse(recipient.key, () => senderKey),
              guardianKey: guardianIdentity.encryptionKey
            })
            return { _tag: "Fresh" as const, transferId, boxes }
          })

        // 3-5. In the sender's actor (the agent's, for an agent): policy, nonce, authorize, record,
        // beside the sender's other new transfers (KeyedSerializer: the guardian decides each under
        // the sender's balance lock), never beside an owner's decision on a held one. Two creates
        // of one prepared transfer take turns, so the second finds the id taken.
        const inSendersTurn = <A, E, R>(effect: Effect.Effect<A, E, R>) => {
          const turn = actors.alongside(sender.accountId, effect)
          return boxed._tag === "Prepared" ? actors.withKey(`prepared:${boxed.transferId}`, turn) : turn
        }
        const decided = yield* inSendersTurn(Effect.gen(function*() {
          const nowMs = yield* Clock.currentTimeMillis
          // Read inside the actor: a policy change applies to the very next attempt.
          const policy = isAgent
            ? yield* checkPolicy(sender.accountId, { asset, recipientNames: namesOf(recipient), activeHoursAtMs: nowMs })
            : undefined
          // A prepared transfer is created once: a second create of it (another idempotency key, or
          // none) is told so instead of reaching the guardian with a used id.
          if (boxed._tag === "Prepared" && (yield* store.idTaken(boxed.transferId).pipe(Effect.orDie))) {
            return yield* Effect.fail(PreparedTransferUsed.of(boxed.transferId))
          }
          const { boxes, transferId } = boxed
          const fresh = store.nextNonce(sender.accountId, principal.mode).pipe(Effect.map((nonce) => ({
            nonce,
            deadlineSeconds: BigInt(Math.floor(nowMs / 1000) + config.attestationLifetimeSeconds)
          })))
          // A sealed transfer's id is the client's (prepared): its retry must reach the guardian as
          // the same request, so the guardian replays its decision (see TransferStore.sealedAttempt).
          const { nonce, deadlineSeconds } = yield* (money._tag === "Sealed"
            ? store.sealedAttempt({ transferId, senderAccountId: sender.accountId }, fresh)
            : fresh).pipe(Effect.orDie)
          const prepared: PreparedTransfer = {
            transferId,
            bindingId: transferIdBytes32(transferId),
            mode: principal.mode,
            chainId: chain.chainId,
            contract,
            sender,
            senderAddress: getAddress(sender.walletAddress),
            recipient,
            asset,
            confidential,
            apiKeyId: principal.keyId,
            nonce,
            fromKey: senderKey,
            toKey: Option.getOrNull(recipient.key),
            boxes,
            sealedDigest: Note.sealedDigest(boxes),
            publicAmount: confidential || money._tag === "Sealed" ? null : money.amount,
            clientSealed: money._tag === "Sealed"
          }
          const agent = policy === undefined ? undefined : { policy, approved: false }
          const result = yield* authorizeAndRecord(prepared, deadlineSeconds, agent, recordCreated)
          if (result._tag === "Recorded") return { _tag: "Recorded", prepared, recorded: result } as const
          return { _tag: "Held", transaction: yield* hold(prepared, nowMs, result.sealedAmount) } as const
          // Two stages (SpanLog.ts): the outer one also counts the wait for the sender's turn.
        }).pipe(SpanLog.stage("Transfers.inActor"))).pipe(SpanLog.stage("Transfers.actor"))
        if (decided._tag === "Held") return { _tag: "Held", transaction: decided.transaction } satisfies CreateOutcome

        // 5. Submit and wait (D14); the outcome is also completed in the background. The wait for
        // the chain holds no place at the gate (platform/Admission.ts).
        yield* releaseAdmission
        const stored = yield* submitAndAwait(decided.prepared, decided.recorded)
        return { _tag: "Transfer", transfer: record(stored, principal.accountId) } satisfies CreateOutcome
      })

      /**
       * D26: keeps a held transfer for its owner's decision, with its boxes as sealed
       * (the sender's to the owner's key) and its `agent.transaction.pending_approval`
       * event, in one SQL transaction. Nothing was reserved or signed.
       */
      const hold = (prepared: PreparedTransfer, nowMs: number, sealedAmount: Hex) =>
        Effect.gen(function*() {
          const transactionId = makeId("atx", nowMs)
          const requestedAt = DateTime.formatIso(DateTime.makeUnsafe(nowMs))
          const expiresAt = DateTime.formatIso(DateTime.makeUnsafe(nowMs + config.approvalWindowMs))
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
          yield* sql.withTransaction(Effect.gen(function*() {
            yield* heldStore.insert({
              transactionId,
              mode: prepared.mode,
              agentAccountId: prepared.sender.accountId,
              ownerAccountId,
              transferId: prepared.transferId,
              recipientAccountId: prepared.recipient.account?.accountId ?? null,
              recipientAddress: prepared.recipient.address,
              recipientDisplay: prepared.recipient.display,
              asset: prepared.asset,
              confidential: prepared.confidential,
              apiKeyId: prepared.apiKeyId,
              replayNonce: prepared.nonce,
              sealedDigest: prepared.sealedDigest,
              fromKey: prepared.fromKey,
              toKey: prepared.toKey,
              senderBox: prepared.boxes.sender,
              recipientBox: prepared.boxes.recipient,
              guardianNote: prepared.boxes.guardian,
              publicAmountSealed: prepared.publicAmount === null
                ? null
                : secretBox.seal(numberToBytes(prepared.publicAmount, { size: 32 }), publicAmountBinding(transactionId)),
              guardianHeldAmount: hexToBytes(sealedAmount),
              requestedAt,
              expiresAt
            })
            yield* outbox.append([agentTransactionEvent("agent.transaction.pending_approval", view, null)])
            yield* operations.bind("agent_transaction", transactionId)
          })).pipe(Effect.orDie)
          return toAgentTransactionRecord(view, null)
        })

      /**
       * D27's approval, under the agent's actor so it never races the agent's new
       * transfers (or a rejection, or the expiry sweep): the held row is read again,
       * the asset and recipient rules of the policy in force now are checked, the
       * guardian decides the limits and the balance now (`approved: true` skips only
       * the threshold), and the transfer is recorded and submitted exactly as a new one.
       *
       * The transfer keeps its id and replay nonce (the boxes are bound to the id; the
       * nonce was never attested, so it is still unused), with a fresh deadline: a held
       * transaction may wait longer than an attestation lives. The deadline is written
       * to the row before the guardian is asked, so a retried approval asks the same
       * question and gets the recorded answer.
       */
      const approveHeld = Effect.fn("Transfers.approveHeld")(function*(transactionId: string) {
        const firstRead = yield* heldStore.findById(transactionId).pipe(
          Effect.orDie,
          Effect.flatMap(Option.match({
            onNone: () => Effect.fail(TransactionNotFound.of(transactionId)),
            onSome: Effect.succeed
          }))
        )
        const decided = yield* actors.withKey(firstRead.agent_account_id, Effect.gen(function*() {
          const nowMs = yield* Clock.currentTimeMillis
          const held = Option.getOrThrow(yield* heldStore.findById(transactionId).pipe(Effect.orDie))
          if (held.status === "expired" || (held.status === "pending_approval" && Number(held.expires_at_ms) <= nowMs)) {
            return yield* Effect.fail(TransactionExpired.of(transactionId))
          }
          if (held.status !== "pending_approval") return yield* Effect.fail(TransactionNotFound.of(transactionId))
          const chain = yield* Option.match(settlement.chain(held.mode), {
            onNone: () => Effect.fail(LivemodeUnavailable.of()),
            onSome: Effect.succeed
          })
          const agentAccount = Option.getOrThrow(yield* accounts.get(held.agent_account_id).pipe(Effect.orDie))
          const recipientAccount = held.recipient_account_id === null
            ? null
            : Option.getOrThrow(yield* accounts.get(held.recipient_account_id).pipe(Effect.orDie))
          const recipient = {
            account: recipientAccount,
            address: getAddress(held.recipient_address),
            display: held.recipient_display
          }
          // Active hours bound when the agent may act; the approval is the owner's act.
          const policy = yield* checkPolicy(
            agentAccount.accountId,
            { asset: held.asset, recipientNames: namesOf(recipient), activeHoursAtMs: null }
          )
          const parts = yield* heldStore.sealedParts(transactionId).pipe(Effect.orDie)
          const publicAmount = parts.publicAmountSealed === null
            ? null
            : bytesToBigInt(yield* secretBox.open(parts.publicAmountSealed, publicAmountBinding(transactionId)).pipe(Effect.orDie))
          const pinned = held.approval_deadline_seconds === null ? null : BigInt(held.approval_deadline_seconds)
          const nowSeconds = BigInt(Math.floor(nowMs / 1000))
          const deadlineSeconds = pinned !== null && pinned - nowSeconds >= BigInt(approvalDeadlineReuseMinSeconds)
            ? pinned
            : nowSeconds + BigInt(config.attestationLifetimeSeconds)
          if (deadlineSeconds !== pinned) yield* heldStore.setApprovalDeadline(transactionId, deadlineSeconds).pipe(Effect.orDie)
          const prepared: PreparedTransfer = {
            transferId: held.transfer_id,
            bindingId: transferIdBytes32(held.transfer_id),
            mode: held.mode,
            chainId: chain.chainId,
            contract: confidentialTokenOf(chain, held.asset),
            sender: agentAccount,
            senderAddress: getAddress(agentAccount.walletAddress),
            recipient,
            asset: held.asset,
            confidential: held.confidential,
            apiKeyId: held.api_key_id,
            nonce: BigInt(held.replay_nonce),
            fromKey: parts.fromKey,
            toKey: parts.toKey,
            boxes: { sender: parts.senderBox, recipient: parts.recipientBox, guardian: parts.guardianNote },
            sealedDigest: held.sealed_digest as Hex,
            publicAmount,
            // The guardian opened these boxes once already: it held the transfer only after that.
            clientSealed: false
          }
          const decidedAt = DateTime.formatIso(DateTime.makeUnsafe(nowMs))
          const view = { ...held, status: "approved" as const, decided_at: decidedAt }
          const markApproved = Effect.gen(function*() {
            const changed = yield* heldStore.decide(transactionId, "approved", decidedAt)
            if (!changed) return yield* Effect.fail(TransactionNotFound.of(transactionId))
            yield* operations.bind("approval", transactionId)
            yield* outbox.append([agentTransactionEvent("agent.transaction.approved", view, {
              transfer_id: held.transfer_id,
              tx_hash: null
            })])
          })
          const result = yield* authorizeAndRecord(prepared, deadlineSeconds, { policy, approved: true }, recordAlongside(markApproved)).pipe(
            // Decided elsewhere between our read and our commit (another node). The guardian answered
            // both approvals with the same reservation (same transfer id), so it is released only when
            // no approval recorded the transfer: a rejection or expiry won. Releasing it under an
            // approval that won would let the sender spend the amount twice.
            Effect.tapError((error) =>
              error._tag === "TransactionNotFound"
                ? store.findById(held.transfer_id).pipe(
                  Effect.orDie,
                  Effect.flatMap((recorded) =>
                    Option.isSome(recorded) ? Effect.void : settleWithGuardian(held.transfer_id, "failed")
                  )
                )
                : Effect.void
            ),
            // Only a client-sealed create can fail these: the guardian opened this held transfer's
            // boxes before it held it.
            Effect.catchTags({ InvalidRequest: Effect.die, PreparedTransferUsed: Effect.die })
          )
          if (result._tag === "Hold") return yield* Effect.die(new Error("the guardian held an approved transfer"))
          return { prepared, recorded: result, view }
        }))
        // Decided: the wait for the chain holds no place at the gate (platform/Admission.ts).
        yield* releaseAdmission
        const transfer = yield* submitAndAwait(decided.prepared, decided.recorded)
        return { transaction: decided.view, transfer }
      })

      const current = (transferId: string) =>
        Effect.gen(function*() {
          const found = yield* store.findById(transferId)
          if (Option.isNone(found) || found.value.status !== "pending") return found
          yield* resubmit(found.value)
          const outcome = yield* settlement.awaitResolution(transferId, config.transferCreateTimeoutMs)
          if (Option.isSome(outcome)) yield* complete(outcome.value)
          return yield* store.findById(transferId)
        }).pipe(Effect.orDie)

      // D36: a retry whose first request was cut off is answered from what it recorded.
      yield* operations.register("transfer", (transferId, principal) =>
        current(transferId).pipe(Effect.map((t) => ({ status: 201, body: record(Option.getOrThrow(t), principal.accountId) }))))
      yield* operations.register("agent_transaction", (transactionId) =>
        heldStore.findById(transactionId).pipe(
          Effect.orDie,
          Effect.map((held) => ({ status: 202, body: toAgentTransactionRecord(Option.getOrThrow(held), null) }))
        ))

      return Transfers.of({
        create: (principal, request) =>
          create(principal, request).pipe(Effect.annotateLogs({ account_id: principal.accountId })),
        prepare: (principal, request) =>
          prepare(principal, request).pipe(Effect.annotateLogs({ account_id: principal.accountId })),
        approveHeld: (transactionId) =>
          approveHeld(transactionId).pipe(Effect.annotateLogs({ transaction_id: transactionId })),
        get: (principal, transferId) =>
          store.findForAccount(transferId, principal.accountId, principal.mode).pipe(
            Effect.orDie,
            Effect.flatMap(Option.match({
              onNone: () => Effect.fail(TransferNotFound.of()),
              onSome: (t) => Effect.succeed(record(t, principal.accountId))
            }))
          ),
        record,
        current
      })
    })
  ).pipe(Layer.provideMerge(Layer.mergeAll(TransferStore.layer, AgentStore.layer, AgentTransactionStore.layer)))
}

