/**
 * `POST /v1/transfers`: steps 1 to 5 for a new transfer (resolve.ts, seal.ts, authorize.ts,
 * record.ts, submit.ts), or a hold (hold.ts) for an agent above its approval threshold.
 *
 * @since 0.1.0
 */
import { type Domain as GuardianDomain, SpanLog } from "@pps/guardian"
import { Note } from "@pps/crypto"
import { Clock, Effect, Option } from "effect"
import { getAddress } from "viem"
import type { Principal } from "@pps/api/ApiKeys"
import { InvalidRequest, PreparedTransferUsed } from "@pps/api/Errors"
import type { Asset, CreateTransferRequest } from "@pps/api/Transfers"
import { releaseAdmission } from "../platform/Admission.ts"
import * as Invariant from "../platform/Invariant.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import { authorizeAndRecord } from "./authorize.ts"
import type { PreparedTransfer, TransfersContext } from "./context.ts"
import { hold } from "./hold.ts"
import { toTransferRecord } from "./read.ts"
import { recordCreated } from "./record.ts"
import { assetOf, checkPolicy, namesOf, type Parties, resolveParties } from "./resolve.ts"
import { checkPreparedToken, type Money, moneyOf, sealBoxes } from "./seal.ts"
import { submitAndAwait } from "./submit.ts"
import { transferIdBytes32 } from "./submission.ts"
import type { CreateOutcome } from "./Transfers.ts"

/** What a create knows once its boxes are sealed, before the sender's turn. */
interface Sealed {
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
  const decided = yield* decideInSendersTurn(context, { principal, asset, confidential, money, parties, boxed, refundOf, approvalEndsAtMs })
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
 * Steps 3-4 in the sender's lane (the agent's, for an agent): policy, nonce, authorize, record,
 * beside the sender's other new transfers (platform/Lanes.ts: the guardian decides each under the
 * sender's balance lock), never beside an owner's decision on a held one. Two creates of one
 * prepared transfer take turns, so the second finds the id taken.
 */
const decideInSendersTurn = (context: TransfersContext, sealed: Sealed) => {
  const { lanes } = context
  const { boxed, parties } = sealed
  const turn = lanes.alongside(parties.sender.accountId, decide(context, sealed).pipe(SpanLog.stage("Transfers.inActor")))
  // Two stages (SpanLog.ts): the outer one also counts the wait for the sender's turn.
  return (boxed._tag === "Prepared" ? lanes.alone(`prepared:${boxed.transferId}`, turn) : turn).pipe(
    SpanLog.stage("Transfers.actor")
  )
}

/** Steps 3-4 within the sender's turn. */
const decide = Effect.fnUntraced(function*(context: TransfersContext, sealed: Sealed) {
  const { asset, boxed, money, parties } = sealed
  const nowMs = yield* Clock.currentTimeMillis
  // Read inside the lane: a policy change applies to the very next attempt.
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
  const result = yield* authorizeAndRecord(context, prepared, deadlineSeconds, agent, recordCreated(context))
  if (result._tag === "Recorded") return { _tag: "Recorded", transferId: prepared.transferId, submission: result.submission } as const
  if (result._tag === "ApprovalRefused") {
    return yield* Effect.die(new Invariant.InvariantViolation({ invariant: "the guardian refuses a re-decision only to an owner's approval" }))
  }
  return { _tag: "Held", transaction: yield* hold(context, prepared, nowMs, result.sealedAmount, sealed.approvalEndsAtMs) } as const
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
