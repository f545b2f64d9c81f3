/**
 * The amount-dependent part of a decision, in D25's order (per-transaction limit, daily limit,
 * balance, approval threshold), after a refund's own rule (D43: the refunds of its original may
 * not exceed it, Refunds.ts), on the sender's locked balance: the answer, and the reservation
 * when the answer is to authorize.
 *
 * @since 0.5.0
 */
import { EncryptionKey, Note } from "@pps/crypto"
import { Effect } from "effect"
import { bytesToHex, getAddress, type Hex, hexToBytes } from "viem"
import { type AuthorizeRequest, HoldForApproval, InsufficientBalance, PolicyViolation, Refused } from "../Domain.ts"
import { bucketRange, dayWindow } from "../internal/dayWindow.ts"
import type { BalanceRow } from "../internal/store.ts"
import type { GuardianContext } from "./GuardianContext.ts"
import type { KeyCheck } from "./PartyKeys.ts"
import type { Prepared } from "./Prepare.ts"
import { checkRefund } from "./Refunds.ts"
import { reserve } from "./Reserve.ts"

/** An agent's per-transaction and daily limits: the violation, or undefined when within them. */
const checkLimits = Effect.fnUntraced(function*(
  context: GuardianContext,
  agent: NonNullable<AuthorizeRequest["agent"]>,
  prepared: Prepared,
  transferId: string,
  nowMs: number
) {
  if (prepared.amount > agent.policy.perTransactionLimit) {
    return new PolicyViolation({ transferId, reason: "per_transaction_limit_exceeded" })
  }
  const window = dayWindow(nowMs, agent.policy.timeZone)
  if (window === undefined) return new Refused({ transferId, reason: "time_zone_invalid" })
  const { endBucket, firstBucket } = bucketRange(window)
  const spent = yield* context.store.spentIn(prepared.sender, firstBucket, endBucket)
  if (spent + prepared.amount > agent.policy.dailyLimit) return new PolicyViolation({ transferId, reason: "daily_limit_exceeded" })
  return undefined
})

/**
 * An agent's transfer above its approval threshold, not approved yet: held, its amount sealed to
 * the owner's key so the owner can see what it approves (undefined: not held).
 */
const holdForApproval = (request: AuthorizeRequest, transferId: string, amount: bigint): HoldForApproval | Refused | undefined => {
  const agent = request.agent
  if (agent === undefined || agent.approved || agent.policy.hitlThreshold === null || amount <= agent.policy.hitlThreshold) {
    return undefined
  }
  const ownerKey = EncryptionKey.parsePublicKey(hexToBytes(request.fromKey as Hex))
  if (!ownerKey.ok) return new Refused({ transferId, reason: "sender_key_invalid" })
  const sealedAmount = Note.sealHeldAmount({
    context: { chainId: request.chainId, contract: getAddress(request.contract), transferId: hexToBytes(transferId as Hex) },
    ownerKey: ownerKey.value,
    amount
  })
  return new HoldForApproval({ transferId, sealedAmount: bytesToHex(sealedAmount) })
}

/**
 * The request's nonce as the decision found it: free, taken by another transfer, or held by this
 * transfer id's own released reservation, which an approval decided afresh rewrites (D45).
 *
 * @since 0.9.0
 * @category models
 */
export type NonceState = "free" | "taken" | "released"

/**
 * Decides a prepared request on the sender's locked `balance`: a refusal, a violation, a hold,
 * or the reservation and its attestation.
 *
 * @since 0.5.0
 * @category steps
 */
export const evaluate = Effect.fnUntraced(function*(
  context: GuardianContext,
  request: AuthorizeRequest,
  prepared: Prepared,
  keyCheck: KeyCheck,
  digest: string,
  nonce: NonceState,
  nowMs: number,
  balance: BalanceRow
) {
  const transferId = request.transferId.toLowerCase()
  if (nonce === "taken") return new Refused({ transferId, reason: "nonce_reused" })
  // First use of an address with no registered key: its key is pinned now (a concurrent
  // first use may have pinned another one, which then stands).
  for (const pin of keyCheck.pins) {
    const pinned = yield* context.store.pinKey(pin.ref, pin.key, nowMs)
    if (pinned !== pin.key) return new Refused({ transferId, reason: pin.refusal })
  }
  // First: a refund larger than what is left of its original is refused whoever sends it.
  if (request.refundOf !== undefined) {
    const refused = yield* checkRefund(context, request.refundOf, prepared, transferId)
    if (refused !== undefined) return refused
  }
  if (request.agent !== undefined) {
    const violation = yield* checkLimits(context, request.agent, prepared, transferId, nowMs)
    if (violation !== undefined) return violation
  }
  if (balance.confirmed - balance.reserved < prepared.amount) return new InsufficientBalance({ transferId })
  const held = holdForApproval(request, transferId, prepared.amount)
  if (held !== undefined) return held
  return yield* reserve(context, request, prepared, digest, balance, nowMs, nonce === "released")
})
