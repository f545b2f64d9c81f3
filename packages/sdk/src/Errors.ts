/**
 * One error class per code the API answers (SPEC.md's table, DECISIONS.md, and the
 * extensions in docs/api.md), each a `Client.ApiError` with its `status`, `code`,
 * `message`, `param`, `reason` and the `requestId` to quote. Every request of the SDK
 * rejects with the class of the code it got, so callers can write
 * `if (error instanceof Errors.InsufficientBalance)` or switch on `error.code`.
 *
 * @example
 * ```ts
 * import { Errors } from "@pps/sdk"
 *
 * try {
 *   await pps.transfers.create({ to: "@bob", amount: "12.5" })
 * } catch (error) {
 *   if (error instanceof Errors.InsufficientBalance) console.log("top up first", error.requestId)
 *   else throw error
 * }
 * ```
 *
 * @since 0.3.0
 */
import { ApiError, type ErrorObject } from "./Client.ts"

const define = <const Code extends string>(code: Code, name: string) => {
  const Class = class extends ApiError {
    static readonly code: Code = code
    override readonly name = name
  }
  Object.defineProperty(Class, "name", { value: name })
  return Class
}

/** 400 `invalid_request` (SPEC): a malformed body or a missing field; `param` names it. */
export const InvalidRequest = define("invalid_request", "InvalidRequest")
/** 401 `unauthorized` (SPEC): a missing, unknown or revoked API key. */
export const Unauthorized = define("unauthorized", "Unauthorized")
/** 402 `insufficient_balance` (SPEC). */
export const InsufficientBalance = define("insufficient_balance", "InsufficientBalance")
/** 403 `kyc_required` (SPEC). */
export const KycRequired = define("kyc_required", "KycRequired")
/** 403 `not_agent_owner` (SPEC). */
export const NotAgentOwner = define("not_agent_owner", "NotAgentOwner")
/** 403 `policy_violation`: an agent's spend policy refused the transfer; `reason` says which rule. */
export const PolicyViolation = define("policy_violation", "PolicyViolation")
/** 403 `livemode_unavailable`: a live key while no mainnet is configured. */
export const LivemodeUnavailable = define("livemode_unavailable", "LivemodeUnavailable")
/** 403 `test_mode_only`: the faucet with a live key. */
export const TestModeOnly = define("test_mode_only", "TestModeOnly")
/** 404 `recipient_not_found` (SPEC). */
export const RecipientNotFound = define("recipient_not_found", "RecipientNotFound")
/** 404 `transaction_not_found` (SPEC). */
export const TransactionNotFound = define("transaction_not_found", "TransactionNotFound")
/** 404 `transfer_not_found`. */
export const TransferNotFound = define("transfer_not_found", "TransferNotFound")
/** 404 `agent_not_found`. */
export const AgentNotFound = define("agent_not_found", "AgentNotFound")
/** 404 `webhook_not_found`. */
export const WebhookNotFound = define("webhook_not_found", "WebhookNotFound")
/** 404 `event_not_found`. */
export const EventNotFound = define("event_not_found", "EventNotFound")
/** 404 `not_found`: no such endpoint. */
export const NotFound = define("not_found", "NotFound")
/** 405 `method_not_allowed`. */
export const MethodNotAllowed = define("method_not_allowed", "MethodNotAllowed")
/** 408 `request_timeout`. */
export const RequestTimeout = define("request_timeout", "RequestTimeout")
/** 409 `transaction_expired` (SPEC). */
export const TransactionExpired = define("transaction_expired", "TransactionExpired")
/** 409 `idempotency_key_reused` (D6): the same key with another request. */
export const IdempotencyKeyReused = define("idempotency_key_reused", "IdempotencyKeyReused")
/** 409 `idempotency_key_in_progress` (D6): the first request with the key still runs. */
export const IdempotencyKeyInProgress = define("idempotency_key_in_progress", "IdempotencyKeyInProgress")
/** 409 `agent_name_taken`. */
export const AgentNameTaken = define("agent_name_taken", "AgentNameTaken")
/** 409 `encryption_key_already_registered`. */
export const EncryptionKeyAlreadyRegistered = define("encryption_key_already_registered", "EncryptionKeyAlreadyRegistered")
/** 409 `prepared_transfer_used`: a client-sealed transfer was already created from this preparation. */
export const PreparedTransferUsed = define("prepared_transfer_used", "PreparedTransferUsed")
/** 413 `payload_too_large`. */
export const PayloadTooLarge = define("payload_too_large", "PayloadTooLarge")
/** 422 `recipient_not_confidential_ready` (SPEC): retry with `confidential: false`. */
export const RecipientNotConfidentialReady = define("recipient_not_confidential_ready", "RecipientNotConfidentialReady")
/** 422 `decryption_proof_invalid` (SPEC). */
export const DecryptionProofInvalid = define("decryption_proof_invalid", "DecryptionProofInvalid")
/** 422 `encryption_key_required`: register the account's key first. */
export const EncryptionKeyRequired = define("encryption_key_required", "EncryptionKeyRequired")
/** 400 `encryption_key_invalid`. */
export const EncryptionKeyInvalid = define("encryption_key_invalid", "EncryptionKeyInvalid")
/** 400 `invalid_policy` (SPEC). */
export const InvalidPolicy = define("invalid_policy", "InvalidPolicy")
/** 429 `rate_limited` (D7); the SDK retries it after `Retry-After`. */
export const RateLimited = define("rate_limited", "RateLimited")
/** 500 `internal_error`; quote `requestId`. */
export const InternalError = define("internal_error", "InternalError")
/** 503 `service_unavailable`; the SDK retries it. */
export const ServiceUnavailable = define("service_unavailable", "ServiceUnavailable")

const classes = [
  InvalidRequest, Unauthorized, InsufficientBalance, KycRequired, NotAgentOwner, PolicyViolation, LivemodeUnavailable,
  TestModeOnly, RecipientNotFound, TransactionNotFound, TransferNotFound, AgentNotFound, WebhookNotFound, EventNotFound,
  NotFound, MethodNotAllowed, RequestTimeout, TransactionExpired, IdempotencyKeyReused, IdempotencyKeyInProgress,
  AgentNameTaken, EncryptionKeyAlreadyRegistered, PreparedTransferUsed, PayloadTooLarge, RecipientNotConfidentialReady,
  DecryptionProofInvalid, EncryptionKeyRequired, EncryptionKeyInvalid, InvalidPolicy, RateLimited, InternalError,
  ServiceUnavailable
] as const

const byCode: ReadonlyMap<string, (typeof classes)[number]> = new Map(classes.map((Class) => [Class.code, Class]))

/**
 * Every code this SDK has a class for.
 *
 * @since 0.3.0
 * @category constants
 */
export const codes: ReadonlyArray<string> = classes.map((Class) => Class.code)

/**
 * The error an answer stands for: the class of its D1 code, or a plain `ApiError` for a
 * code this SDK does not know (a newer server) or a body that is not D1's.
 *
 * @since 0.3.0
 * @category constructors
 */
export const fromAnswer = (status: number, body: string, error: ErrorObject | undefined): ApiError => {
  const Class = error === undefined ? undefined : byCode.get(error.code)
  return Class === undefined ? new ApiError(status, body, error) : new Class(status, body, error)
}
