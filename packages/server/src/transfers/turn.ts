/**
 * The sender's actor turn (D63): steps 3-4 for the new transfers of one sender (one agent) that
 * queued while its previous turn ran, drained in arrival order (`platform/Lanes.ts`, on
 * `@pps/platform/KeyedLanes`'s `turns`). A turn
 *
 * 1. reads each transfer's amount-free state as of now: an agent's policy (a policy change
 *    applies to the very next turn), a prepared transfer's id not yet taken, a replay nonce;
 * 2. asks the guardian about all of them in one ordered call (`authorizeMany`): it decides them
 *    in that order in one group, each seeing the reservations of the approved ones before it; a
 *    refused or held one reserves nothing and does not block the ones after it;
 * 3. records the attested ones together (record.ts: one transaction for the turn), keeps the held
 *    ones (hold.ts), and answers each transfer with its own outcome.
 *
 * One turn of a sender runs at a time, so a sender's balance and policy checks are serialized by
 * its actor and still batched. Once the guardian is asked, the turn runs to its end whatever its
 * callers do (see `authorizeAndRecord`: a decision without its record would hold the sender's
 * funds until its deadline).
 *
 * @since 0.9.0
 */
import { type Domain as GuardianDomain, SpanLog } from "@pps/guardian"
import { Note } from "@pps/crypto"
import { Clock, Effect, Exit, Option } from "effect"
import { getAddress } from "viem"
import type { Principal } from "@pps/api/ApiKeys"
import { PreparedTransferUsed } from "@pps/api/Errors"
import type { Asset } from "@pps/api/Transfers"
import type { AgentTransactionRecord } from "@pps/api/Agents"
import { transferReached } from "../observability/Metrics.ts"
import * as Invariant from "../platform/Invariant.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import type { SubmissionRequest } from "../settlement/domain.ts"
import { authorizeRequestOf, guardianUnavailable, recordDecision } from "./authorize.ts"
import type { PreparedTransfer, TransfersContext } from "./context.ts"
import { hold } from "./hold.ts"
import { recordCreated } from "./record.ts"
import { checkPolicy, namesOf, type Parties } from "./resolve.ts"
import type { Money, sealBoxes } from "./seal.ts"
import { transferIdBytes32 } from "./submission.ts"

/**
 * What a create knows once its boxes are sealed, before the sender's turn.
 *
 * @since 0.9.0
 * @category models
 */
export interface Sealed {
  readonly principal: Principal
  readonly asset: Asset
  readonly confidential: boolean
  readonly money: Money
  readonly parties: Parties
  readonly boxed: Effect.Success<ReturnType<typeof sealBoxes>>
  /** A refund's original (D43, refund.ts); null for any other transfer. */
  readonly refundOf: string | null
  /** The latest end of a hold's approval window the caller asked for (D57); null: the server's window. */
  readonly approvalEndsAtMs: number | null
}

/**
 * What a turn decided for one transfer: recorded (its call, to submit), or held for its owner.
 *
 * @since 0.9.0
 * @category models
 */
export type Decided =
  | { readonly _tag: "Recorded"; readonly transferId: string; readonly submission: SubmissionRequest }
  | { readonly _tag: "Held"; readonly transaction: AgentTransactionRecord }

/**
 * The most transfers a turn takes: the guardian's bound on one `authorizeMany` (one group).
 *
 * @since 0.9.0
 * @category constants
 */
export const turnMax = 64

/** One transfer ready for the guardian: its prepared record and what the guardian is asked with. */
interface Ask {
  readonly prepared: PreparedTransfer
  readonly deadlineSeconds: bigint
  readonly agent: GuardianDomain.AuthorizeRequest["agent"]
  readonly nowMs: number
  readonly approvalEndsAtMs: number | null
}

/**
 * Decides a sender's queued transfers, in arrival order; one outcome each, in that order.
 *
 * @since 0.9.0
 */
export const decideTurn = (context: TransfersContext, items: ReadonlyArray<Sealed>): Effect.Effect<ReadonlyArray<Exit.Exit<Decided, TurnError>>> =>
  Effect.gen(function*() {
    const nowMs = yield* Clock.currentTimeMillis
    const asks = yield* Effect.forEach(items, (sealed) => Effect.exit(askOf(context, sealed, nowMs)), { concurrency: "unbounded" })
    const ready = asks.flatMap((ask) => (Exit.isSuccess(ask) ? [ask.value] : []))
    const decisions = yield* decideInOrder(context, ready)
    const decided = new Map(ready.map((ask, index) => [ask, decisions[index]!]))
    return yield* Effect.forEach(
      asks,
      (ask): Effect.Effect<Exit.Exit<Decided, TurnError>> =>
        Exit.isSuccess(ask) ? Effect.exit(afterDecision(context, ask.value, decided.get(ask.value)!)) : Effect.succeed(Exit.failCause(ask.cause)),
      { concurrency: "unbounded" }
    )
  }).pipe(Effect.uninterruptible, SpanLog.stage("Transfers.turn"))

/**
 * Step 3 for a turn: one ordered `authorizeMany`. The guardian's outage fails every transfer of
 * the turn (503, retry later); a transfer it could not decide fails alone.
 */
const decideInOrder = (context: TransfersContext, ready: ReadonlyArray<Ask>) =>
  ready.length === 0
    ? Effect.succeed<ReadonlyArray<GuardianDomain.AuthorizeOutcome>>([])
    : Effect.forEach(ready, (ask) => transferReached("created", ask.prepared.mode), { discard: true }).pipe(
      Effect.andThen(context.guardian.authorizeMany(ready.map((ask) => authorizeRequestOf(ask.prepared, ask.deadlineSeconds, ask.agent)))),
      Effect.catch((error) => Effect.succeed(ready.map((): GuardianDomain.AuthorizeOutcome => error)))
    )

/** Step 4 for one transfer of the turn: its record, its hold, or its error. */
const afterDecision = Effect.fnUntraced(function*(
  context: TransfersContext,
  ask: Ask,
  decision: GuardianDomain.AuthorizeOutcome
) {
  const { prepared } = ask
  if (decision._tag === "GuardianError") return yield* guardianUnavailable(decision)
  const result = yield* recordDecision(context, prepared, decision, recordCreated(context))
  if (result._tag === "Recorded") return { _tag: "Recorded", transferId: prepared.transferId, submission: result.submission } satisfies Decided
  if (result._tag === "ApprovalRefused") {
    return yield* Effect.die(new Invariant.InvariantViolation({ invariant: "the guardian refuses a re-decision only to an owner's approval" }))
  }
  return { _tag: "Held", transaction: yield* hold(context, prepared, ask.nowMs, result.sealedAmount, ask.approvalEndsAtMs) } satisfies Decided
})

/** A transfer's amount-free state as of its turn: policy, prepared id, nonce; then what the guardian is asked. */
const askOf = Effect.fnUntraced(function*(context: TransfersContext, sealed: Sealed, nowMs: number) {
  const { asset, boxed, money, parties } = sealed
  // Read in the turn: a policy change applies to the very next attempt.
  const policy = parties.isAgent
    ? yield* checkPolicy(context, parties.sender.accountId, {
      asset,
      recipientNames: namesOf(parties.recipient),
      activeHoursAtMs: nowMs
    })
    : undefined
  // A prepared transfer is created once: a second create of it (another idempotency key, or
  // none) is told so instead of reaching the guardian with a used id.
  if (boxed._tag === "Prepared" && (yield* context.store.idTaken(boxed.transferId).pipe(Unavailable.database("Transfers.create")))) {
    return yield* Effect.fail(PreparedTransferUsed.of(boxed.transferId))
  }
  const { deadlineSeconds, nonce } = yield* attemptOf(context, sealed, nowMs)
  const prepared: PreparedTransfer = {
    transferId: boxed.transferId,
    bindingId: transferIdBytes32(boxed.transferId),
    mode: sealed.principal.mode,
    chainId: parties.chain.chainId,
    contract: parties.contract,
    sender: parties.sender,
    senderAddress: getAddress(parties.sender.walletAddress),
    recipient: parties.recipient,
    asset,
    confidential: sealed.confidential,
    apiKeyId: sealed.principal.keyId,
    nonce,
    fromKey: parties.senderKey,
    toKey: Option.getOrNull(parties.recipient.key),
    boxes: boxed.boxes,
    sealedDigest: Note.sealedDigest(boxed.boxes),
    publicAmount: sealed.confidential || money._tag === "Sealed" ? null : money.amount,
    clientSealed: money._tag === "Sealed",
    refundOf: sealed.refundOf
  }
  const agent: GuardianDomain.AuthorizeRequest["agent"] = policy === undefined ? undefined : { policy, approved: false }
  return { prepared, deadlineSeconds, agent, nowMs, approvalEndsAtMs: sealed.approvalEndsAtMs } satisfies Ask
})

/**
 * The replay nonce and attestation deadline the guardian is asked with: fresh, or, for a sealed
 * transfer, those of its first attempt. A sealed transfer's id is the client's (prepared): its
 * retry must reach the guardian as the same request, so the guardian replays its decision (see
 * TransferStore.sealedAttempt).
 */
const attemptOf = (context: TransfersContext, sealed: Sealed, nowMs: number) => {
  const sender = sealed.parties.sender.accountId
  const fresh = context.store.nextNonce(sender, sealed.principal.mode).pipe(Effect.map((nonce) => ({
    nonce,
    deadlineSeconds: BigInt(Math.floor(nowMs / 1000) + context.config.attestationLifetimeSeconds)
  })))
  return (sealed.money._tag === "Sealed"
    ? context.store.sealedAttempt({ transferId: sealed.boxed.transferId, senderAccountId: sender }, fresh)
    : fresh).pipe(Unavailable.database("Transfers.nonce"))
}

/**
 * What a transfer's turn may fail with.
 *
 * @since 0.9.0
 * @category models
 */
export type TurnError =
  | Effect.Error<ReturnType<typeof askOf>>
  | Effect.Error<ReturnType<typeof afterDecision>>
