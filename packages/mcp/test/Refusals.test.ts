/**
 * What a failed `pay` tells the agent, for every rule of D25 and the outcomes the e2e suite
 * cannot provoke on demand (a 503, no answer): each refusal names its rule, the tool parameter
 * and the policy field the API named, and says nothing was paid; an unknown outcome says to
 * retry with the same idempotency key.
 */
import { policyFieldOfRule, type PolicyRule } from "@pps/api/Errors"
import { Errors } from "@pps/sdk"
import { describe, expect, it } from "vitest"
import * as Refusals from "../src/Refusals.ts"

const answered = (status: number, error: Errors.ErrorObject) => Errors.fromAnswer(status, JSON.stringify({ error }), error)

const expected: Record<PolicyRule, RegExp> = {
  per_transaction_limit_exceeded: /^refused: per-transaction limit: amount is above the spend policy's per_transaction_limit_usdg /,
  daily_limit_exceeded: /^refused: daily limit: amount would take today's payments above the spend policy's daily_limit_usdg /,
  recipient_not_allowed: /^refused: recipient not allowed: to is not in the spend policy's allowed_recipients /,
  outside_active_hours: /^refused: outside active hours: now is outside the spend policy's active_hours \(in its time_zone\) /,
  asset_not_allowed: /^refused: asset not allowed: asset is not in the spend policy's assets /
}

describe("Refusals.ofPay", () => {
  it("names each spend policy rule, the parameter and the policy field, and says nothing was paid", () => {
    for (const [rule, field] of Object.entries(policyFieldOfRule)) {
      const error = answered(403, { code: "policy_violation", message: "m", reason: rule, param: field, request_id: "req_1" })
      const { message } = Refusals.ofPay(error, "mcp_k")
      expect(message, rule).toMatch(expected[rule as PolicyRule])
      expect(message, rule).toMatch(new RegExp(`\\(policy_violation ${rule}, request req_1\\); nothing was paid$`))
    }
  })

  it("names insufficient balance; says an unanswered or failed payment is retried with its key", () => {
    expect(Refusals.ofPay(answered(402, { code: "insufficient_balance", message: "m" }), "mcp_k").message)
      .toBe("refused: insufficient balance: amount is more than the balance of asset (insufficient_balance); nothing was paid")
    const retry = /call pay again with idempotency_key "mcp_k" and the same arguments: it never pays twice$/
    expect(Refusals.ofPay(answered(503, { code: "service_unavailable", message: "m" }), "mcp_k").message).toMatch(retry)
    expect(Refusals.ofPay(new Errors.TransportError("unreachable", "cannot reach"), "mcp_k").message).toMatch(retry)
    expect(Refusals.ofPay(new Error("anything else"), "mcp_k").message).toMatch(retry)
    expect(Refusals.ofPay(new Errors.SealedTransferError("guardian_key_mismatch", "the guardian's key is not the chain's"), "mcp_k").message)
      .toBe("not sent: a check on this machine failed (guardian_key_mismatch): the guardian's key is not the chain's; nothing was paid")
  })
})
