/**
 * What a failed call tells the agent: the SDK's errors turned into one line an LLM can act on.
 * A refusal names the rule and the field it is about (a spend policy's per-transaction limit is
 * about `amount`, an allowed-recipients list about `to`), then the API's code, reason and
 * request id for a person reading the transcript; a payment whose outcome is unknown (no
 * answer, a 5xx, the first attempt still running) says to call `pay` again with the same
 * idempotency key, which never pays twice (D6, D36). The API's messages hold ids, never
 * amounts, and so do these lines.
 *
 * @since 0.1.0
 */
import { type PolicyRule, policyFieldOfRule } from "@pps/api/Errors"
import { Errors } from "@pps/sdk"
import { ToolRefused } from "./Tools.ts"

/**
 * Each rule of D25 (`policy_violation`'s `reason`) as the agent is told it: the rule, then the
 * tool parameter at fault and the policy field that refused it (the API's `param`).
 */
const policyRules = {
  per_transaction_limit_exceeded: (field: string) => `per-transaction limit: amount is above the spend policy's ${field}`,
  daily_limit_exceeded: (field: string) => `daily limit: amount would take today's payments above the spend policy's ${field}`,
  recipient_not_allowed: (field: string) => `recipient not allowed: to is not in the spend policy's ${field}`,
  outside_active_hours: (field: string) => `outside active hours: now is outside the spend policy's ${field} (in its time_zone)`,
  asset_not_allowed: (field: string) => `asset not allowed: asset is not in the spend policy's ${field}`
} satisfies Record<PolicyRule, (field: string) => string>

const isPolicyRule = (reason: string | undefined): reason is PolicyRule => reason !== undefined && Object.hasOwn(policyRules, reason)

/** A policy violation's line, when its rule is one of D25's. */
const policyLine = (error: Errors.ApiError): string | undefined => {
  const reason = error.reason
  return isPolicyRule(reason) ? policyRules[reason](error.param ?? policyFieldOfRule[reason]) : undefined
}

/** Refusals of other codes, named as a rule with its field. */
const codeRules: Readonly<Record<string, string>> = {
  insufficient_balance: "insufficient balance: amount is more than the balance of asset",
  recipient_not_found: "recipient not found: to names no account",
  recipient_not_confidential_ready: "recipient not ready: to has no registered encryption key yet",
  transfer_not_found: "not found: transfer_id names no transfer of yours",
  transaction_not_found: "not found: transaction_id names no held transaction of yours",
  idempotency_key_reused:
    "idempotency key reused: idempotency_key already names a payment (with other arguments, or sealed by another run of this server), so nothing more was paid; find it with list_transfers, or omit the key for a new payment"
}

/** The codes after which a payment may or may not have happened. */
const unknownOutcome: ReadonlySet<string> = new Set(["idempotency_key_in_progress", "internal_error", "service_unavailable", "rate_limited", "request_timeout"])

/** `(policy_violation per_transaction_limit_exceeded, request req_…)`: what a person needs to look the call up. */
const reference = (error: Errors.ApiError): string => {
  const code = [error.error?.code ?? `HTTP ${error.status}`, error.reason].filter((part) => part !== undefined).join(" ")
  return error.requestId === undefined ? `(${code})` : `(${code}, request ${error.requestId})`
}

/** The line for an API refusal: its rule and field when known, else its code, field and message. */
const refusedLine = (error: Errors.ApiError): string => {
  const code = error.error?.code ?? ""
  const rule = (code === "policy_violation" ? policyLine(error) : undefined) ?? codeRules[code]
  if (rule !== undefined) return `refused: ${rule} ${reference(error)}`
  const field = error.param === undefined ? "" : `${error.param}: `
  return `refused: ${field}${error.error?.message ?? error.message} ${reference(error)}`
}

/**
 * A failed read (`get_transfer`, `list_transfers`, `get_spend_policy`, `wait_for_approval`, `balance`).
 *
 * @since 0.1.0
 * @category errors
 */
export const ofRead = (error: unknown): ToolRefused => {
  if (error instanceof Errors.ApiError) return new ToolRefused({ message: refusedLine(error) })
  if (error instanceof Errors.TransportError) return new ToolRefused({ message: `the service did not answer (${error.reason}): try again later` })
  if (error instanceof Errors.ConfidentialError) return new ToolRefused({ message: `not decrypted: ${error.reason}: ${error.message}` })
  return new ToolRefused({ message: `failed: ${error instanceof Error ? error.message : String(error)}` })
}

/**
 * A failed `pay`: refused (nothing was paid), not sent (a check on this machine failed before
 * anything left it), or of unknown outcome (retry with `idempotencyKey`).
 *
 * @since 0.1.0
 * @category errors
 */
export const ofPay = (error: unknown, idempotencyKey: string): ToolRefused => {
  const retry = `call pay again with idempotency_key "${idempotencyKey}" and the same arguments: it never pays twice`
  if (error instanceof Errors.ApiError) {
    const code = error.error?.code ?? ""
    if (unknownOutcome.has(code) || error.status >= 500) {
      return new ToolRefused({ message: `the payment's outcome is not known yet ${reference(error)}: ${retry}` })
    }
    return new ToolRefused({ message: `${refusedLine(error)}; nothing was paid` })
  }
  if (error instanceof Errors.TransportError) {
    return new ToolRefused({ message: `the service did not answer (${error.reason}), so the payment's outcome is not known: ${retry}` })
  }
  if (error instanceof Errors.SealedTransferError) {
    return new ToolRefused({ message: `not sent: a check on this machine failed (${error.reason}): ${error.message}; nothing was paid` })
  }
  // Anything else: whether it was sent is not known here, and a retry with the key is always safe.
  return new ToolRefused({ message: `failed (${error instanceof Error ? error.message : String(error)}): ${retry}` })
}
