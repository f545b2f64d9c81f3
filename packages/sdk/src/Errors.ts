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
 * The codes come from the contract's catalogue (`@pps/api/Errors`), so a code the API
 * answers has a class here (the tests check every one).
 *
 * @since 0.3.0
 */
import { catalogue, type routerErrors } from "@pps/api/Errors"
import { ApiError, type ErrorObject } from "./Client.ts"

/**
 * One error class of this SDK: an `ApiError` subclass for one code. Declared rather than
 * inferred: the inferred anonymous class would be expanded into the published `.d.ts`
 * with Node's `Error` statics, which a browser project's types do not have.
 *
 * @since 0.4.0
 * @category models
 */
export interface ErrorClass<Code extends string> {
  new(status: number, body: string, error: ErrorObject | undefined): ApiError
  readonly prototype: ApiError
  readonly code: Code
}

const define = <const Code extends string>(code: Code, name: string): ErrorClass<Code> => {
  const Class = class extends ApiError {
    static readonly code: Code = code
    override readonly name = name
  }
  Object.defineProperty(Class, "name", { value: name })
  return Class
}

/** 400 `invalid_request` (SPEC): a malformed body or a missing field; `param` names it. */
export const InvalidRequest = define(catalogue.InvalidRequest.code, "InvalidRequest")
/** 401 `unauthorized` (SPEC): a missing, unknown or revoked API key. */
export const Unauthorized = define(catalogue.Unauthorized.code, "Unauthorized")
/** 402 `insufficient_balance` (SPEC). */
export const InsufficientBalance = define(catalogue.InsufficientBalance.code, "InsufficientBalance")
/** 403 `kyc_required` (SPEC). */
export const KycRequired = define(catalogue.KycRequired.code, "KycRequired")
/** 403 `not_agent_owner` (SPEC). */
export const NotAgentOwner = define(catalogue.NotAgentOwner.code, "NotAgentOwner")
/** 403 `policy_violation`: an agent's spend policy refused the transfer; `reason` says which rule. */
export const PolicyViolation = define(catalogue.PolicyViolation.code, "PolicyViolation")
/** 403 `livemode_unavailable`: a live key while no mainnet is configured. */
export const LivemodeUnavailable = define(catalogue.LivemodeUnavailable.code, "LivemodeUnavailable")
/** 403 `test_mode_only`: the faucet with a live key. */
export const TestModeOnly = define(catalogue.TestModeOnly.code, "TestModeOnly")
/** 404 `recipient_not_found` (SPEC). */
export const RecipientNotFound = define(catalogue.RecipientNotFound.code, "RecipientNotFound")
/** 404 `transaction_not_found` (SPEC). */
export const TransactionNotFound = define(catalogue.TransactionNotFound.code, "TransactionNotFound")
/** 404 `transfer_not_found`. */
export const TransferNotFound = define(catalogue.TransferNotFound.code, "TransferNotFound")
/** 404 `agent_not_found`. */
export const AgentNotFound = define(catalogue.AgentNotFound.code, "AgentNotFound")
/** 404 `webhook_not_found`. */
export const WebhookNotFound = define(catalogue.WebhookNotFound.code, "WebhookNotFound")
/** 404 `event_not_found`. */
export const EventNotFound = define(catalogue.EventNotFound.code, "EventNotFound")
/** 404 `not_found`: no such endpoint. */
export const NotFound = define("not_found" satisfies keyof typeof routerErrors, "NotFound")
/** 405 `method_not_allowed`. */
export const MethodNotAllowed = define("method_not_allowed" satisfies keyof typeof routerErrors, "MethodNotAllowed")
/** 408 `request_timeout`. */
export const RequestTimeout = define("request_timeout" satisfies keyof typeof routerErrors, "RequestTimeout")
/** 431 `headers_too_large`. */
export const HeadersTooLarge = define("headers_too_large" satisfies keyof typeof routerErrors, "HeadersTooLarge")
/** 409 `transaction_expired` (SPEC). */
export const TransactionExpired = define(catalogue.TransactionExpired.code, "TransactionExpired")
/** 409 `idempotency_key_reused` (D6): the same key with another request. */
export const IdempotencyKeyReused = define(catalogue.IdempotencyKeyReused.code, "IdempotencyKeyReused")
/** 409 `idempotency_key_in_progress` (D6): the first request with the key still runs. */
export const IdempotencyKeyInProgress = define(catalogue.IdempotencyKeyInProgress.code, "IdempotencyKeyInProgress")
/** 409 `agent_name_taken`. */
export const AgentNameTaken = define(catalogue.AgentNameTaken.code, "AgentNameTaken")
/** 409 `encryption_key_already_registered`. */
export const EncryptionKeyAlreadyRegistered = define(catalogue.EncryptionKeyAlreadyRegistered.code, "EncryptionKeyAlreadyRegistered")
/** 409 `prepared_transfer_used`: a client-sealed transfer was already created from this preparation. */
export const PreparedTransferUsed = define(catalogue.PreparedTransferUsed.code, "PreparedTransferUsed")
/** 413 `payload_too_large`. */
export const PayloadTooLarge = define(catalogue.PayloadTooLarge.code, "PayloadTooLarge")
/** 422 `recipient_not_confidential_ready` (SPEC): retry with `confidential: false`. */
export const RecipientNotConfidentialReady = define(catalogue.RecipientNotConfidentialReady.code, "RecipientNotConfidentialReady")
/** 422 `decryption_proof_invalid` (SPEC). */
export const DecryptionProofInvalid = define(catalogue.DecryptionProofInvalid.code, "DecryptionProofInvalid")
/** 422 `encryption_key_required`: register the account's key first. */
export const EncryptionKeyRequired = define(catalogue.EncryptionKeyRequired.code, "EncryptionKeyRequired")
/** 422 `encryption_key_invalid`: the key or its proof of possession does not verify. */
export const EncryptionKeyInvalid = define(catalogue.EncryptionKeyInvalid.code, "EncryptionKeyInvalid")
/** 400 `invalid_policy` (SPEC). */
export const InvalidPolicy = define(catalogue.InvalidPolicy.code, "InvalidPolicy")
/** 429 `rate_limited` (D7); the SDK retries it after `Retry-After`. */
export const RateLimited = define(catalogue.RateLimited.code, "RateLimited")
/** 500 `internal_error`; quote `requestId`. */
export const InternalError = define(catalogue.InternalError.code, "InternalError")
/** 503 `service_unavailable`; the SDK retries it. */
export const ServiceUnavailable = define(catalogue.ServiceUnavailable.code, "ServiceUnavailable")

const classes = [
  InvalidRequest, Unauthorized, InsufficientBalance, KycRequired, NotAgentOwner, PolicyViolation, LivemodeUnavailable,
  TestModeOnly, RecipientNotFound, TransactionNotFound, TransferNotFound, AgentNotFound, WebhookNotFound, EventNotFound,
  NotFound, MethodNotAllowed, RequestTimeout, HeadersTooLarge, TransactionExpired, IdempotencyKeyReused, IdempotencyKeyInProgress,
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
