/**
 * The sender's actor (the card's per-account and per-agent actor, D73): steps 3-4 of a new
 * transfer, taken in the sender's turns (`@pps/platform/KeyedActors`). A turn takes every
 * transfer of the sender that waited for it (up to `authorizeManyMax`), in arrival order, and:
 *
 * 1. for each, in order: the agent's amount-free policy as it is now, a prepared transfer's id
 *    not yet taken, the replay nonce (`beforeGuardian`); a create that waited while a guardian
 *    call went unanswered is answered 503 without a call of its own;
 * 2. asks the guardian once for all of them (`AuthorizeMany`), which decides them in that order
 *    under the sender's balance lock: each sees the reservations of the approved ones before it,
 *    and a refused or held one reserves nothing and does not block those after it;
 * 3. for each, together: the decision recorded, held or answered (`recordDecision`, `hold`). The
 *    records of one turn share one SQL transaction (record.ts).
 *
 * A turn runs in the sender's lane (`alone`), so an owner's decision on a held transaction, a
 * rejection and the expiry sweep never interleave with it. Each transfer's steps run in its own
 * request's context (its idempotency scope, log annotations, span), captured when it was sent:
 * the turn runs in the actor's fiber, and a client that hangs up does not cut a turn between the
 * guardian's decision and the record of it.
 *
 * The actor is per node. With several api nodes a sender's transfers can reach the guardian from
 * each node's actor: the guardian's group commit stays the point where they meet
 * (docs/architecture.md, "Where each invariant is serialized").
 *
 * @since 0.11.0
 */
import { type Domain as GuardianDomain, SpanLog } from "@pps/guardian"
import { Note } from "@pps/crypto"
import { Cause, Clock, type Context, Effect, Exit, Option, Schedule } from "effect"
import { getAddress } from "viem"
import type { Principal } from "@pps/api/ApiKeys"
import { PreparedTransferUsed, ServiceUnavailable } from "@pps/api/Errors"
import type { Asset } from "@pps/api/Transfers"
import { transferReached } from "../observability/Metrics.ts"
import * as Invariant from "../platform/Invariant.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import type { SubmissionRequest } from "../settlement/domain.ts"
import type { AgentTransactionRecord } from "@pps/api/Agents"
import { authorizeRequest, guardianUnavailable, recordDecision } from "./authorize.ts"
import type { PreparedTransfer, TransfersContext } from "./context.ts"
import { hold } from "./hold.ts"
import { recordCreated } from "./record.ts"
import { checkPolicy, namesOf, type Parties } from "./resolve.ts"
import type { Money, sealBoxes } from "./seal.ts"
import { transferIdBytes32 } from "./submission.ts"

/**
 * What a create knows once its boxes are sealed, before the sender's turn.
 *
 * @since 0.11.0
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
 * A create in the sender's mailbox: its sealed transfer and its request's context.
 *
 * @since 0.11.0
 * @category models
 */
export interface SenderMail {
  readonly sealed: Sealed
  readonly caller: Context.Context<never>
  /** When the create was sent to the actor (Clock ms). */
  readonly sentAtMs: number
}

/**
 * What the sender's turn decided for one create: recorded (to submit), or held for the owner.
 *
 * @since 0.11.0
 * @category models
 */
export type Decided =
  | { readonly _tag: "Recorded"; readonly transferId: string; readonly submission: SubmissionRequest }
  | { readonly _tag: "Held"; readonly transaction: AgentTransactionRecord }

/**
 * Why the turn answers a create with a failure.
 *
 * @since 0.11.0
 * @category models
 */
export type DecideError = Effect.Error<ReturnType<typeof beforeGuardian>> | Effect.Error<ReturnType<typeof afterGuardian>>

/** A create past step 1 of its turn: the transfer as the guardian will be asked about it. */
interface Asked {
  readonly sealed: Sealed
  readonly prepared: PreparedTransfer
  readonly request: GuardianDomain.AuthorizeRequest
  readonly nowMs: number
}

/**
 * The sender's turn over its waiting creates (`@pps/platform/KeyedActors`'s `Turn`): one exit per
 * create, in their order.
 *
 * @since 0.11.0
 */
export const senderTurn = (context: TransfersContext) => (senderId: string, mail: ReadonlyArray<SenderMail>) =>
  context.lanes.alone(
    senderId,
    Effect.gen(function*() {
      const asked = yield* Effect.forEach(mail, ({ caller, sealed, sentAtMs }) => Effect.exit(asCaller(beforeGuardian(context, sealed, sentAtMs), caller)))
      const ready = asked.flatMap((exit, index) => Exit.isSuccess(exit) ? [{ index, asked: exit.value }] : [])
      for (const { asked } of ready) yield* transferReached("created", asked.prepared.mode)
      const outcomes = yield* askGuardianMany(context, ready.map(({ asked }) => asked.request))
      // Together, so that the records of the turn share one transaction (record.ts's resolver takes
      // the requests made at once: usually all of them).
      const decided = yield* Effect.forEach(
        ready,
        ({ asked, index }, position) => Effect.exit(asCaller(afterGuardian(context, asked, outcomes[position]!), mail[index]!.caller)),
        { concurrency: "unbounded" }
      )
      const answers: Array<Exit.Exit<Decided, DecideError>> = [...asked] as Array<Exit.Exit<never, DecideError>>
      ready.forEach(({ index }, position) => {
        answers[index] = decided[position]!
      })
      return answers as ReadonlyArray<Exit.Exit<Decided, DecideError>>
    }).pipe(SpanLog.stage("Transfers.inActor"))
  ).pipe(Effect.uninterruptible)

/**
 * `step` in its create's own request context (its idempotency key, log annotations, span), and
 * in no other: the turn's own context is replaced, not merged, so a create without an
 * Idempotency-Key never sees another request's.
 */
const asCaller = <A, E>(step: Effect.Effect<A, E>, caller: Context.Context<never>) =>
  Effect.updateContext(step, (_: Context.Context<never>) => caller)

/** Attempts of a turn's guardian call the guardian did not answer, before each create is told 503. */
const guardianAttemptsMax = 3

/**
 * A failed call is sent again only this soon after the first attempt began: a call refused at once
 * (a guardian restarting) is worth another try; one that timed out has made its creates wait long
 * enough.
 */
const guardianRetryWindowMs = 2_000

/**
 * The guardian's answers to the turn's requests, in their order. A call the guardian did not
 * answer (down, restarting, cut) is sent again, the same requests: the guardian replays what it
 * decided (same transfer ids, nonces and digests), so a turn does not lose its decisions to one
 * dropped answer. After the last attempt each create is answered 503 (logged once); a request the
 * guardian failed alone is that create's. The answers are checked against the requests: a guardian
 * that answered other transfers is a broken invariant.
 */
const askGuardianMany = (
  context: TransfersContext,
  requests: ReadonlyArray<GuardianDomain.AuthorizeRequest>
): Effect.Effect<ReadonlyArray<GuardianDomain.AuthorizeOutcome | ServiceUnavailable>> =>
  requests.length === 0 ? Effect.succeed([]) : Effect.gen(function*() {
    const startedMs = yield* Clock.currentTimeMillis
    const answered = yield* context.guardian.authorizeMany(requests).pipe(
      Effect.retry({
        times: guardianAttemptsMax - 1,
        schedule: Schedule.exponential("100 millis"),
        while: (error) => Effect.map(Clock.currentTimeMillis, (nowMs) => error.isRetryable && nowMs - startedMs < guardianRetryWindowMs)
      }),
      Effect.exit
    )
    if (Exit.isFailure(answered)) {
      yield* Effect.logError("guardian unavailable", answered.cause)
      // A guardian that did not answer (down, frozen, cut off): the creates that arrived while
      // this call waited are told 503 at their turn without a call of their own, so each waits
      // for one failing call, not one per turn. A refusal of the call itself says nothing of them.
      const error = Cause.findErrorOption(answered.cause)
      if (Option.isSome(error) && error.value.isRetryable) context.guardianUnanswered.sinceMs = yield* Clock.currentTimeMillis
      return requests.map(() => ServiceUnavailable.of())
    }
    const outcomes = answered.value
    yield* Invariant.check(
      outcomes.length === requests.length &&
        outcomes.every((outcome, i) => outcome._tag === "GuardianError" || outcome.transferId.toLowerCase() === requests[i]!.transferId.toLowerCase()),
      "the guardian answers a turn's requests one each, in their order"
    )
    return outcomes
  })

/**
 * Step 1 of the turn for one create: the policy in force now (a change applies to the very next
 * attempt), a prepared transfer's id not taken by an earlier create, the replay nonce.
 */
const beforeGuardian = Effect.fnUntraced(function*(context: TransfersContext, sealed: Sealed, sentAtMs: number) {
  // It waited while a guardian call went unanswered: told so now, without a call of its own.
  if (sentAtMs < context.guardianUnanswered.sinceMs) return yield* Effect.fail(ServiceUnavailable.of())
  const { asset, boxed, money, parties } = sealed
  const nowMs = yield* Clock.currentTimeMillis
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
  return { sealed, prepared, request: authorizeRequest(prepared, deadlineSeconds, agent), nowMs } satisfies Asked
})

/**
 * Step 3 of the turn for one create: the guardian's decision recorded (record.ts shares the
 * turn's transaction), held for the owner (D26), or answered as the API's error.
 */
const afterGuardian = Effect.fnUntraced(function*(
  context: TransfersContext,
  asked: Asked,
  outcome: GuardianDomain.AuthorizeOutcome | ServiceUnavailable
) {
  const { prepared, sealed } = asked
  if (outcome._tag === "ServiceUnavailable") return yield* Effect.fail(outcome)
  const decision = outcome._tag === "GuardianError" ? yield* guardianUnavailable(outcome) : outcome
  const result = yield* recordDecision(context, prepared, decision, recordCreated(context))
  if (result._tag === "Recorded") return { _tag: "Recorded", transferId: prepared.transferId, submission: result.submission } satisfies Decided
  if (result._tag === "ApprovalRefused") {
    return yield* Effect.die(new Invariant.InvariantViolation({ invariant: "the guardian refuses a re-decision only to an owner's approval" }))
  }
  const transaction = yield* hold(context, prepared, asked.nowMs, result.sealedAmount, sealed.approvalEndsAtMs)
  return { _tag: "Held", transaction } satisfies Decided
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
