/**
 * `credit`: a credit the server reports, on a chain the guardian does not follow (no RPC
 * endpoint). Exactly once per credit id, in its own transaction under the account's lock.
 *
 * @since 0.5.0
 */
import { Clock, Effect } from "effect"
import { CreditIdReused, CreditRefused, type CreditRequest } from "../Domain.ts"
import { creditDigest } from "./Digests.ts"
import { storage } from "./Failures.ts"
import { type GuardianContext, refFor } from "./GuardianContext.ts"

/**
 * @since 0.5.0
 * @category steps
 */
export const credit = Effect.fn("Guardian.credit")(function*(context: GuardianContext, request: typeof CreditRequest.Type) {
  const { sql, store } = context
  // On a chain the guardian follows, the event books the credit: a reported one would
  // count twice, and the books must not take the caller's word for an amount (D39).
  if (context.chain.knows(request.chainId)) {
    return yield* new CreditRefused({ creditId: request.creditId, reason: "credits_come_from_the_chain" })
  }
  const account = refFor(request.chainId, request.contract, request.account)
  // Keyed for the same reason as `requestDigest`: the amount must not be guessable from a dump.
  const digest = creditDigest(context.keys.atRestKey, account, request.amount)
  const nowMs = yield* Clock.currentTimeMillis
  const attempt = sql.withTransaction(Effect.gen(function*() {
    const balance = yield* store.lockBalance(account)
    const existing = yield* store.findCredit(request.creditId)
    if (existing !== undefined) return existing === digest ? "duplicate" as const : "conflict" as const
    const inserted = yield* store.insertCredit({ ...account, creditId: request.creditId, amount: request.amount, requestDigest: digest }, nowMs)
    if (!inserted) return "conflict" as const
    yield* store.writeBalance(account, {
      ...balance,
      confirmed: balance.confirmed + request.amount,
      version: balance.version + 1n,
      owned: true
    })
    return "applied" as const
  }))
  const status = yield* storage(context.accountLane.alone(account, attempt))
  if (status === "conflict") return yield* new CreditIdReused({ creditId: request.creditId })
  return { creditId: request.creditId, status }
})
