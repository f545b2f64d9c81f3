/**
 * Reserving an authorized amount: the reservation row (which holds the attestation the guardian
 * answers, so a retry replays it), the sender's reserved total and, for an agent, its day's
 * spend. Runs in the decision's transaction, on the sender's locked balance.
 *
 * @since 0.5.0
 */
import { Data, Effect, Schema } from "effect"
import { Authorized, type AuthorizeRequest } from "../Domain.ts"
import { bucketOf } from "../internal/dayWindow.ts"
import type { BalanceRow } from "../internal/store.ts"
import type { GuardianContext } from "./GuardianContext.ts"
import type { Prepared } from "./Prepare.ts"

/**
 * A concurrent twin inserted the same transfer id first (or the released reservation an approval
 * rewrites changed first): roll back and answer from its row.
 *
 * @since 0.5.0
 * @category errors
 */
export class TransferIdRace extends Data.TaggedError("TransferIdRace")<{}> {}

const encodeAuthorized = Schema.encodeSync(Authorized)

/**
 * Reserves `prepared.amount` on the sender's locked `balance` and answers the attestation.
 * `replacing`: the transfer id's released reservation is rewritten instead (D45); the release
 * gave back its amount and its day's spend, so they are counted once.
 *
 * @since 0.5.0
 * @category steps
 */
export const reserve = Effect.fnUntraced(function*(
  context: GuardianContext,
  request: AuthorizeRequest,
  prepared: Prepared,
  digest: string,
  balance: BalanceRow,
  nowMs: number,
  replacing: boolean
) {
  const { store, timing } = context
  const { amount, sender } = prepared
  const spendBucket = request.agent === undefined ? null : bucketOf(nowMs)
  const row = {
    transferId: request.transferId.toLowerCase(),
    chainId: sender.chainId,
    contract: sender.contract,
    fromAccount: sender.account,
    toAccount: prepared.recipient.toLowerCase(),
    kind: request.kind,
    nonce: request.nonce,
    deadline: request.deadline,
    expiresAtMs: (Number(request.deadline) + timing.reservationMarginSeconds) * 1000,
    amount,
    spendBucket,
    requestDigest: digest,
    result: JSON.stringify(encodeAuthorized(prepared.authorized)),
    apiKeyId: request.apiKey ?? null,
    refundOf: request.refundOf?.toLowerCase() ?? null
  }
  const written = replacing ? yield* store.replaceReservation(row, nowMs) : yield* store.insertReservation(row, nowMs)
  if (!written) return yield* new TransferIdRace()
  yield* store.writeBalance(sender, { ...balance, reserved: balance.reserved + amount, owned: true })
  if (spendBucket !== null) yield* store.addSpend(sender, spendBucket, amount)
  return prepared.authorized
})
