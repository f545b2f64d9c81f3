/**
 * The errors of the SDK, for both surfaces' Promise side: `ApiError` (the API answered an
 * error status), one subclass per code the API answers (SPEC.md's table, docs/decisions, and
 * the extensions in docs/api.md), and `TransportError` (no usable answer). Every request
 * of the Promise surface (`Pps`) rejects with the class of the code it got, so callers can
 * write `if (error instanceof Errors.InsufficientBalance)` or switch on `error.code`,
 * which is typed as the contract's union of codes (`Errors.Code`), not as `string`.
 *
 * @example
 * ```ts
 * import { Errors, Pps } from "@pps/sdk"
 *
 * const pps = new Pps({ apiKey: process.env.PPS_API_KEY!, baseUrl: "http://127.0.0.1:8080" })
 * try {
 *   await pps.transfers.create({ to: "@bob", amount: "12.5", confidential: false })
 * } catch (error) {
 *   if (error instanceof Errors.InsufficientBalance) console.log("top up first", error.requestId)
 *   else if (error instanceof Errors.ApiError && error.code === "policy_violation") console.log(error.reason)
 *   else throw error
 * }
 * ```
 *
 * The codes come from the contract's catalogue (`@pps/api/Errors`), so a code the API
 * answers has a class here (the tests check every one). The Effect surface (`ApiClient`)
 * fails with the contract's own error classes instead (match them with `Effect.catchTag`).
 *
 * @since 0.3.0
 */
import { catalogue, routerErrors } from "@pps/api/Errors"

/**
 * Every code the API can answer: the contract's catalogue and the codes its router answers
 * outside any endpoint. Derived from `@pps/api/Errors`, so a code added there is here.
 *
 * @since 0.5.0
 * @category models
 */
export type Code = (typeof catalogue)[keyof typeof catalogue]["code"] | keyof typeof routerErrors

const knownCodes: ReadonlySet<string> = new Set<string>([
  ...Object.values(catalogue).map((Class) => Class.code),
  ...Object.keys(routerErrors)
])

/**
 * Whether a string is one of the contract's codes.
 *
 * @since 0.5.0
 * @category guards
 */
export const isCode = (code: string): code is Code => knownCodes.has(code)

/**
 * The error object of the API's error body (D1), as received: its `code` is
 * the wire's string (a newer server may answer a code this SDK does not know);
 * `ApiError.code` is the typed one.
 *
 * @since 0.1.0
 * @category models
 */
export interface ErrorObject {
  readonly code: string
  readonly message: string
  readonly param?: string
  readonly reason?: string
  readonly request_id?: string
}

/**
 * The API answered with an error status. `body` is the answer exactly as received; `error`
 * is its D1 error object when it had one.
 *
 * @since 0.1.0
 * @category errors
 */
export class ApiError extends Error {
  override readonly name: string = "ApiError"
  readonly status: number
  readonly body: string
  readonly error: ErrorObject | undefined
  constructor(status: number, body: string, error: ErrorObject | undefined) {
    super(error === undefined ? `HTTP ${status}` : `HTTP ${status} ${error.code}: ${error.message}`)
    this.status = status
    this.body = body
    this.error = error
  }
  /**
   * The D1 `code`, one of the contract's (`Code`); undefined when the body was not a D1
   * error body, or its code is newer than this SDK (then `error.code` holds it).
   */
  get code(): Code | undefined {
    const code = this.error?.code
    return code !== undefined && isCode(code) ? code : undefined
  }
  /** The request's id (`req_…`): quote it when reporting a problem. */
  get requestId(): string | undefined {
    return this.error?.request_id
  }
  /** The field or header a validation error names (D1 `param`). */
  get param(): string | undefined {
    return this.error?.param
  }
  /** Why, for errors that say (a policy violation's rule, a refused proof). */
  get reason(): string | undefined {
    return this.error?.reason
  }
}

/**
 * An SDK error that is not an API answer: a failure found in this process, with a
 * `reason` from a closed list to branch on and a message for people (ids, never amounts).
 *
 * @since 0.5.0
 * @category errors
 */
export class ReasonedError<Reason extends string> extends Error {
  readonly reason: Reason
  constructor(reason: Reason, message: string, options?: { readonly cause?: unknown }) {
    super(message, options)
    this.reason = reason
  }
}

/**
 * Why a call got no usable answer.
 *
 * @since 0.1.0
 * @category models
 */
export type TransportFailure = "unreachable" | "malformed_response"

/**
 * No answer came back (`unreachable`), or a success answer was not the documented shape
 * (`malformed_response`).
 *
 * @since 0.1.0
 * @category errors
 */
export class TransportError extends ReasonedError<TransportFailure> {
  override readonly name = "TransportError"
}

/**
 * Why a sealed copy or statement was refused. None of them is a transport
 * problem: each means the service handed over something this key cannot
 * vouch for.
 *
 * - `sealed_copy_unopenable`: the transfer's sealed copy does not open with
 *   this key (usually: not the key registered for the account).
 * - `sealed_copy_mismatch`: it opens, but its amount is not the one the
 *   transfer's ciphertext encrypts.
 * - `sealed_copy_unverifiable`: the caller received a standard
 *   (non-confidential) transfer that is not confirmed yet: its ciphertext has
 *   no handle for the recipient and its public amount is not on chain yet, so
 *   the copy cannot be checked and is not shown (once confirmed, the public
 *   amount is the check, D62).
 * - `statement_unopenable`, `statement_mismatch`: the same for a balance statement.
 * - `balances_mismatch`: the balances endpoint accepted the proof but answered
 *   amounts other than the proven ones.
 *
 * @since 0.1.0
 * @category models
 */
export type ConfidentialFailure =
  | "sealed_copy_unopenable"
  | "sealed_copy_mismatch"
  | "sealed_copy_unverifiable"
  | "statement_unopenable"
  | "statement_mismatch"
  | "balances_mismatch"

/**
 * A sealed copy or statement failed its check. The message names ids and
 * assets, never an amount or a memo.
 *
 * @since 0.1.0
 * @category errors
 */
export class ConfidentialError extends ReasonedError<ConfidentialFailure> {
  override readonly name = "ConfidentialError"
}

/**
 * @since 0.1.0
 * @category models
 */
export type SealedTransferFailure =
  | "amount_invalid"
  | "memo_too_long"
  | "sender_key_mismatch"
  | "sender_key_missing"
  | "guardian_key_mismatch"
  | "recipient_key_mismatch"
  | "chain_mismatch"
  | "contract_mismatch"
  | "recipient_address_mismatch"
  | "deployment_unpinned"
  | "chain_unavailable"
  | "refund_amount_unknown"
  | "not_transfer_recipient"

/**
 * The transfer was not sent: its amount or memo is invalid, a key, chain, contract or
 * recipient address the API answered is not the one it must be (the message names both),
 * a check the options ask for cannot be made (`deployment_unpinned`: before any request;
 * `chain_unavailable`: the RPC did not answer), no sender key was given for an account
 * that is not an agent (`sender_key_missing`), or a refund of the whole amount (D43) has no key
 * pair to read that amount with (`refund_amount_unknown`), or names a transfer this account sent
 * (`not_transfer_recipient`: only its recipient refunds it, as the API's 403 says). The message never contains the amount or the memo.
 *
 * @since 0.1.0
 * @category errors
 */
export class SealedTransferError extends ReasonedError<SealedTransferFailure> {
  override readonly name = "SealedTransferError"
}

/**
 * An `ApiError` whose code is `C`: what an instance of `ErrorClass<C>` is, so that
 * `error.code` after an `instanceof` check is the literal.
 *
 * @since 0.5.0
 * @category models
 */
export interface CodedError<C extends Code> extends ApiError {
  readonly code: C
}

/**
 * One error class of this SDK: an `ApiError` subclass for one code. Declared rather than
 * inferred: the inferred anonymous class would be expanded into the published `.d.ts`
 * with Node's `Error` statics, which a browser project's types do not have.
 *
 * @since 0.4.0
 * @category models
 */
export interface ErrorClass<C extends Code> {
  new(status: number, body: string, error: ErrorObject | undefined): CodedError<C>
  readonly prototype: CodedError<C>
  readonly code: C
}

const define = <const C extends Code>(code: C, name: string): ErrorClass<C> => {
  const Class = class extends ApiError {
    static readonly code: C = code
    override readonly name = name
    // The class's code: an instance of it answered this code (see `fromAnswer`).
    override get code(): C {
      return code
    }
  }
  Object.defineProperty(Class, "name", { value: name })
  return Class
}

/** 400 `invalid_request` (SPEC): a malformed body or a missing field; `param` names it. */
export const InvalidRequest = define(catalogue.InvalidRequest.code, "InvalidRequest")
/** 401 `unauthorized` (SPEC): a missing, unknown or revoked API key. */
export const Unauthorized = define(catalogue.Unauthorized.code, "Unauthorized")
/** 403 `account_suspended` (D60): the key is valid, but the operator suspended its account (or the agent's owner). */
export const AccountSuspended = define(catalogue.AccountSuspended.code, "AccountSuspended")
/** 402 `insufficient_balance` (SPEC). */
export const InsufficientBalance = define(catalogue.InsufficientBalance.code, "InsufficientBalance")
/** 403 `kyc_required` (SPEC). */
export const KycRequired = define(catalogue.KycRequired.code, "KycRequired")
/** 403 `not_agent_owner` (SPEC). */
export const NotAgentOwner = define(catalogue.NotAgentOwner.code, "NotAgentOwner")
/** 403 `reauthentication_required` (D44): a dashboard session must confirm with its passkey first. */
export const ReauthenticationRequired = define(catalogue.ReauthenticationRequired.code, "ReauthenticationRequired")
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
/** 404 `key_not_found` (D44): no such key of that agent's. */
export const ApiKeyNotFound = define(catalogue.ApiKeyNotFound.code, "ApiKeyNotFound")
/** 404 `webhook_not_found`. */
export const WebhookNotFound = define(catalogue.WebhookNotFound.code, "WebhookNotFound")
/** 404 `event_not_found`. */
export const EventNotFound = define(catalogue.EventNotFound.code, "EventNotFound")
/** 404 `not_found`: no such endpoint. */
export const NotFound = define("not_found", "NotFound")
/** 405 `method_not_allowed`. */
export const MethodNotAllowed = define("method_not_allowed", "MethodNotAllowed")
/** 408 `request_timeout`. */
export const RequestTimeout = define("request_timeout", "RequestTimeout")
/** 431 `headers_too_large`. */
export const HeadersTooLarge = define("headers_too_large", "HeadersTooLarge")
/** 409 `transaction_expired` (SPEC). */
export const TransactionExpired = define(catalogue.TransactionExpired.code, "TransactionExpired")
/** 409 `approval_in_progress` (D45): an earlier approval's attestation can still be mined; retry after the time in the message. */
export const ApprovalInProgress = define(catalogue.ApprovalInProgress.code, "ApprovalInProgress")
/** 409 `approval_attempts_exhausted` (D45): the guardian decides the approval no more; reject it or let it expire. */
export const ApprovalAttemptsExhausted = define(catalogue.ApprovalAttemptsExhausted.code, "ApprovalAttemptsExhausted")
/** 409 `idempotency_key_reused` (D6): the same key with another request. */
export const IdempotencyKeyReused = define(catalogue.IdempotencyKeyReused.code, "IdempotencyKeyReused")
/** 409 `idempotency_key_in_progress` (D6): the first request with the key still runs. */
export const IdempotencyKeyInProgress = define(catalogue.IdempotencyKeyInProgress.code, "IdempotencyKeyInProgress")
/**
 * 409 `key_shown_once` (D44): a retried key creation; the key exists (the message names it) but
 * its value was shown once, in the first answer: revoke it if that answer was lost.
 */
export const KeyShownOnce = define(catalogue.KeyShownOnce.code, "KeyShownOnce")
/** 409 `agent_name_taken`. */
export const AgentNameTaken = define(catalogue.AgentNameTaken.code, "AgentNameTaken")
/** 409 `agent_limit_reached` (D61): the account has as many agents in this mode as it may. */
export const AgentLimitReached = define(catalogue.AgentLimitReached.code, "AgentLimitReached")
/** 409 `encryption_key_already_registered`. */
export const EncryptionKeyAlreadyRegistered = define(catalogue.EncryptionKeyAlreadyRegistered.code, "EncryptionKeyAlreadyRegistered")
/** 409 `prepared_transfer_used`: a client-sealed transfer was already created from this preparation. */
export const PreparedTransferUsed = define(catalogue.PreparedTransferUsed.code, "PreparedTransferUsed")
/** 403 `not_transfer_recipient` (D43): only a transfer's recipient may refund it. */
export const NotTransferRecipient = define(catalogue.NotTransferRecipient.code, "NotTransferRecipient")
/** 409 `transfer_not_confirmed` (D43): the transfer to refund is pending (`reason: "pending"`) or failed. */
export const TransferNotConfirmed = define(catalogue.TransferNotConfirmed.code, "TransferNotConfirmed")
/** 422 `transfer_not_confidential` (D43): a standard transfer is not refunded through the service. */
export const TransferNotConfidential = define(catalogue.TransferNotConfidential.code, "TransferNotConfidential")
/** 422 `refund_exceeds_original` (D43): the refunds of the transfer would add up to more than it. */
export const RefundExceedsOriginal = define(catalogue.RefundExceedsOriginal.code, "RefundExceedsOriginal")
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
  InvalidRequest, Unauthorized, AccountSuspended, InsufficientBalance, KycRequired, NotAgentOwner, PolicyViolation, LivemodeUnavailable,
  ReauthenticationRequired, TestModeOnly, RecipientNotFound, TransactionNotFound, TransferNotFound, AgentNotFound, ApiKeyNotFound,
  WebhookNotFound, EventNotFound, NotFound, MethodNotAllowed, RequestTimeout, HeadersTooLarge, TransactionExpired,
  ApprovalInProgress, ApprovalAttemptsExhausted, IdempotencyKeyReused, IdempotencyKeyInProgress, KeyShownOnce, AgentNameTaken, AgentLimitReached,
  EncryptionKeyAlreadyRegistered, PreparedTransferUsed, PayloadTooLarge, RecipientNotConfidentialReady,
  NotTransferRecipient, TransferNotConfirmed, TransferNotConfidential, RefundExceedsOriginal,
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
export const codes: ReadonlyArray<Code> = classes.map((Class) => Class.code)

/**
 * Any error of a known code, discriminated by `code`: `switch (error.code)` narrows it.
 *
 * @since 0.5.0
 * @category models
 */
export type AnyCodedError = InstanceType<(typeof classes)[number]>

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
