/**
 * The error catalogue: every error the public API can answer, in one place.
 *
 * Each error is a Schema class whose encoded form is D1's envelope
 * `{"error":{"code","message","param?","reason?","request_id"}}` and whose
 * `httpApiStatus` is the status SPEC.md's error table (or DECISIONS.md) gives for
 * its code. The `_tag` is a plain class field, so it is matchable with
 * `Effect.catchTag` but never encoded into a response body. `request_id` is
 * filled in by the server's envelope middleware (packages/server/src/http/Envelope.ts), which knows the
 * request; domain code never sees it.
 *
 * Precedence, highest first (the order checks run in): authentication,
 * rate limit, request validation, not found, permission/KYC, policy, balance.
 *
 * Messages hold ids and field names, never amounts, memos, keys or proofs.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * The body of every error response.
 *
 * @since 0.1.0
 * @category models
 */
export const ErrorBody = Schema.Struct({
  code: Schema.String,
  message: Schema.String,
  param: Schema.optionalKey(Schema.String),
  reason: Schema.optionalKey(Schema.String),
  request_id: Schema.optionalKey(Schema.String)
})

/**
 * The D1 envelope schema for one error code (the code is a literal, so the
 * OpenAPI document lists each code under its status).
 */
const envelope = <const Code extends string>(code: Code) =>
  Schema.Struct({
    error: Schema.Struct({
      code: Schema.Literal(code),
      message: Schema.String,
      param: Schema.optionalKey(Schema.String),
      reason: Schema.optionalKey(Schema.String),
      request_id: Schema.optionalKey(Schema.String)
    })
  })

/** Optional details of an error besides its message. */
export interface ErrorDetails {
  readonly param?: string
  readonly reason?: string
}

const bodyOf = <const Code extends string>(code: Code, message: string, details?: ErrorDetails) => ({
  error: {
    code,
    message,
    ...(details?.param === undefined ? {} : { param: details.param }),
    ...(details?.reason === undefined ? {} : { reason: details.reason })
  }
})

/**
 * 400 `invalid_request`: malformed body, wrong Content-Type, missing or invalid field.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidRequest extends Schema.Error<InvalidRequest>("InvalidRequest")(envelope("invalid_request"), {
  httpApiStatus: 400
}) {
  readonly _tag = "InvalidRequest" as const
  static of(message: string, details?: ErrorDetails) {
    return new InvalidRequest(bodyOf("invalid_request", message, details))
  }
}

/**
 * 401 `unauthorized`: missing, malformed, unknown or revoked API key (D8).
 *
 * @since 0.1.0
 * @category errors
 */
export class Unauthorized extends Schema.Error<Unauthorized>("Unauthorized")(envelope("unauthorized"), {
  httpApiStatus: 401
}) {
  readonly _tag = "Unauthorized" as const
  static of(message = "Missing or invalid API key.") {
    return new Unauthorized(bodyOf("unauthorized", message))
  }
}

/**
 * 403 `kyc_required`: the account's identity verification is not complete (D11).
 *
 * @since 0.1.0
 * @category errors
 */
export class KycRequired extends Schema.Error<KycRequired>("KycRequired")(envelope("kyc_required"), {
  httpApiStatus: 403
}) {
  readonly _tag = "KycRequired" as const
  static of(message = "Identity verification is not completed for this account.") {
    return new KycRequired(bodyOf("kyc_required", message))
  }
}

/**
 * 403 `livemode_unavailable` (ext, D9): a live key on an endpoint that would touch
 * the mainnet chain while none is configured.
 *
 * @since 0.1.0
 * @category errors
 */
export class LivemodeUnavailable extends Schema.Error<LivemodeUnavailable>("LivemodeUnavailable")(
  envelope("livemode_unavailable"),
  { httpApiStatus: 403 }
) {
  readonly _tag = "LivemodeUnavailable" as const
  static of(message = "Live mode is not available: no mainnet chain is configured.") {
    return new LivemodeUnavailable(bodyOf("livemode_unavailable", message))
  }
}

/**
 * 404 `account_not_found` (admin): no account with that id.
 *
 * @since 0.1.0
 * @category errors
 */
export class AccountNotFound extends Schema.Error<AccountNotFound>("AccountNotFound")(envelope("account_not_found"), {
  httpApiStatus: 404
}) {
  readonly _tag = "AccountNotFound" as const
  static of(accountId: string) {
    return new AccountNotFound(bodyOf("account_not_found", `No account ${accountId}.`, { param: "account_id" }))
  }
}

/**
 * 404 `key_not_found` (admin): no API key with that id, or already revoked.
 *
 * @since 0.1.0
 * @category errors
 */
export class ApiKeyNotFound extends Schema.Error<ApiKeyNotFound>("ApiKeyNotFound")(envelope("key_not_found"), {
  httpApiStatus: 404
}) {
  readonly _tag = "ApiKeyNotFound" as const
  static of(keyId: string) {
    return new ApiKeyNotFound(bodyOf("key_not_found", `No active API key ${keyId}.`, { param: "key_id" }))
  }
}

/**
 * 409 `handle_taken` (admin, D10): handles are unique case-insensitively.
 *
 * @since 0.1.0
 * @category errors
 */
export class HandleTaken extends Schema.Error<HandleTaken>("HandleTaken")(envelope("handle_taken"), {
  httpApiStatus: 409
}) {
  readonly _tag = "HandleTaken" as const
  static of(handle: string) {
    return new HandleTaken(bodyOf("handle_taken", `The handle @${handle} is taken.`, { param: "handle" }))
  }
}

/**
 * 404 `webhook_not_found` (D33): no subscription with that id for the caller's
 * account and mode (another account's id, or a deleted one, is not found too).
 *
 * @since 0.1.0
 * @category errors
 */
export class WebhookNotFound extends Schema.Error<WebhookNotFound>("WebhookNotFound")(envelope("webhook_not_found"), {
  httpApiStatus: 404
}) {
  readonly _tag = "WebhookNotFound" as const
  static of(webhookId: string) {
    return new WebhookNotFound(bodyOf("webhook_not_found", `No webhook subscription ${webhookId}.`, { param: "webhook_id" }))
  }
}

/**
 * 404 `event_not_found` (D35): no event with that id for the subscription's
 * account and mode (or it is past retention).
 *
 * @since 0.1.0
 * @category errors
 */
export class EventNotFound extends Schema.Error<EventNotFound>("EventNotFound")(envelope("event_not_found"), {
  httpApiStatus: 404
}) {
  readonly _tag = "EventNotFound" as const
  static of(eventId: string) {
    return new EventNotFound(bodyOf("event_not_found", `No event ${eventId} for this subscription.`, { param: "event_id" }))
  }
}

/**
 * 413 `payload_too_large`: the request body is over 64 KiB (D2).
 *
 * @since 0.1.0
 * @category errors
 */
export class PayloadTooLarge extends Schema.Error<PayloadTooLarge>("PayloadTooLarge")(envelope("payload_too_large"), {
  httpApiStatus: 413
}) {
  readonly _tag = "PayloadTooLarge" as const
  static of(message = "The request body is larger than 64 KiB.") {
    return new PayloadTooLarge(bodyOf("payload_too_large", message))
  }
}

/**
 * 409 `idempotency_key_reused` (ext, D6): same Idempotency-Key, different request.
 *
 * @since 0.1.0
 * @category errors
 */
export class IdempotencyKeyReused extends Schema.Error<IdempotencyKeyReused>("IdempotencyKeyReused")(
  envelope("idempotency_key_reused"),
  { httpApiStatus: 409 }
) {
  readonly _tag = "IdempotencyKeyReused" as const
  static of(
    message = "This Idempotency-Key was already used with a different request; use a new key for a new request."
  ) {
    return new IdempotencyKeyReused(bodyOf("idempotency_key_reused", message, { param: "Idempotency-Key" }))
  }
}

/**
 * 409 `idempotency_key_in_progress` (ext, D6): the first request with this key is still running.
 *
 * @since 0.1.0
 * @category errors
 */
export class IdempotencyKeyInProgress extends Schema.Error<IdempotencyKeyInProgress>("IdempotencyKeyInProgress")(
  envelope("idempotency_key_in_progress"),
  { httpApiStatus: 409 }
) {
  readonly _tag = "IdempotencyKeyInProgress" as const
  static of(message = "A request with this Idempotency-Key is still in progress; retry later.") {
    return new IdempotencyKeyInProgress(bodyOf("idempotency_key_in_progress", message, { param: "Idempotency-Key" }))
  }
}

/**
 * 429 `rate_limited` (ext, D7): the API key sent more requests than its limit;
 * the response carries `Retry-After`.
 *
 * @since 0.1.0
 * @category errors
 */
export class RateLimited extends Schema.Error<RateLimited>("RateLimited")(envelope("rate_limited"), {
  httpApiStatus: 429
}) {
  readonly _tag = "RateLimited" as const
  static of(message = "Too many requests for this API key; retry after the number of seconds in Retry-After.") {
    return new RateLimited(bodyOf("rate_limited", message))
  }
}

/**
 * 500 `internal_error`: an unexpected fault; the body holds no internals (D2).
 *
 * @since 0.1.0
 * @category errors
 */
export class InternalError extends Schema.Error<InternalError>("InternalError")(envelope("internal_error"), {
  httpApiStatus: 500
}) {
  readonly _tag = "InternalError" as const
  static of(message = "An unexpected error occurred; quote the request id when reporting it.") {
    return new InternalError(bodyOf("internal_error", message))
  }
}

/**
 * 503 `service_unavailable`: the server is starting, draining or lost a dependency.
 *
 * @since 0.1.0
 * @category errors
 */
export class ServiceUnavailable extends Schema.Error<ServiceUnavailable>("ServiceUnavailable")(
  envelope("service_unavailable"),
  { httpApiStatus: 503 }
) {
  readonly _tag = "ServiceUnavailable" as const
  static of(message = "The service is temporarily unavailable; retry shortly.") {
    return new ServiceUnavailable(bodyOf("service_unavailable", message))
  }
}

/**
 * The codes only the envelope middleware produces (outside any endpoint), with
 * their status: they are documented here so the whole table lives in one file.
 *
 * @since 0.1.0
 * @category models
 */
export const routerErrors = {
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  payload_too_large: 413,
  headers_too_large: 431,
  invalid_request: 400,
  internal_error: 500,
  service_unavailable: 503
} as const

/**
 * Builds a D1 error body for the codes answered outside an endpoint.
 *
 * @since 0.1.0
 * @category constructors
 */
export const errorBody = (code: keyof typeof routerErrors, message: string, details?: ErrorDetails) =>
  bodyOf(code, message, details)

/**
 * 402 `insufficient_balance`: the account holds too little of the asset (SPEC).
 *
 * @since 0.1.0
 * @category errors
 */
export class InsufficientBalance extends Schema.Error<InsufficientBalance>("InsufficientBalance")(
  envelope("insufficient_balance"),
  { httpApiStatus: 402 }
) {
  readonly _tag = "InsufficientBalance" as const
  static of(message = "The account's balance of the asset is too low for this transfer.") {
    return new InsufficientBalance(bodyOf("insufficient_balance", message))
  }
}

/**
 * 404 `recipient_not_found`: no account for the handle (SPEC, D15).
 *
 * @since 0.1.0
 * @category errors
 */
export class RecipientNotFound extends Schema.Error<RecipientNotFound>("RecipientNotFound")(
  envelope("recipient_not_found"),
  { httpApiStatus: 404 }
) {
  readonly _tag = "RecipientNotFound" as const
  static of(message = "No account has that handle.") {
    return new RecipientNotFound(bodyOf("recipient_not_found", message, { param: "to" }))
  }
}

/**
 * 422 `recipient_not_confidential_ready`: the recipient has no registered
 * encryption key; retry with `confidential: false` (SPEC, D12, D15).
 *
 * @since 0.1.0
 * @category errors
 */
export class RecipientNotConfidentialReady extends Schema.Error<RecipientNotConfidentialReady>(
  "RecipientNotConfidentialReady"
)(envelope("recipient_not_confidential_ready"), { httpApiStatus: 422 }) {
  readonly _tag = "RecipientNotConfidentialReady" as const
  static of(
    message =
      "The recipient's wallet has no registered encryption key, so it cannot receive confidential transfers; retry with \"confidential\": false to send a standard transfer."
  ) {
    return new RecipientNotConfidentialReady(bodyOf("recipient_not_confidential_ready", message, { param: "to" }))
  }
}

/**
 * 422 `encryption_key_required` (ext): the sender has not registered its own
 * encryption key, so the debit from its confidential balance cannot be encrypted
 * to it (`PUT /v1/accounts/me/encryption-key` first).
 *
 * @since 0.1.0
 * @category errors
 */
export class EncryptionKeyRequired extends Schema.Error<EncryptionKeyRequired>("EncryptionKeyRequired")(
  envelope("encryption_key_required"),
  { httpApiStatus: 422 }
) {
  readonly _tag = "EncryptionKeyRequired" as const
  static of(message = "Register this account's encryption key (PUT /v1/accounts/me/encryption-key) first.") {
    return new EncryptionKeyRequired(bodyOf("encryption_key_required", message))
  }
}

/**
 * 404 `transfer_not_found`: unknown id, or one the caller is not party to (D17).
 *
 * @since 0.1.0
 * @category errors
 */
export class TransferNotFound extends Schema.Error<TransferNotFound>("TransferNotFound")(
  envelope("transfer_not_found"),
  { httpApiStatus: 404 }
) {
  readonly _tag = "TransferNotFound" as const
  static of(message = "No transfer with that id for this account.") {
    return new TransferNotFound(bodyOf("transfer_not_found", message, { param: "transfer_id" }))
  }
}

/**
 * 422 `decryption_proof_invalid`: the proof is malformed, expired, for another
 * account or chain, or does not match the balance ciphertext (SPEC, D20).
 *
 * @since 0.1.0
 * @category errors
 */
export class DecryptionProofInvalid extends Schema.Error<DecryptionProofInvalid>("DecryptionProofInvalid")(
  envelope("decryption_proof_invalid"),
  { httpApiStatus: 422 }
) {
  readonly _tag = "DecryptionProofInvalid" as const
  static of(reason: string, message = "The decryption proof does not match the balance ciphertext.") {
    return new DecryptionProofInvalid(bodyOf("decryption_proof_invalid", message, { param: "decryption_proof", reason }))
  }
}

/**
 * 422 `encryption_key_invalid` (ext): the key is not a valid BN254 point, or its
 * proof of possession does not verify.
 *
 * @since 0.1.0
 * @category errors
 */
export class EncryptionKeyInvalid extends Schema.Error<EncryptionKeyInvalid>("EncryptionKeyInvalid")(
  envelope("encryption_key_invalid"),
  { httpApiStatus: 422 }
) {
  readonly _tag = "EncryptionKeyInvalid" as const
  static of(param: string, reason: string) {
    return new EncryptionKeyInvalid(
      bodyOf("encryption_key_invalid", "The encryption key or its proof of possession is invalid.", { param, reason })
    )
  }
}

/**
 * 409 `encryption_key_already_registered` (ext): the chain's key registry keeps
 * one key per account (a new key would orphan the balance encrypted to the old one).
 *
 * @since 0.1.0
 * @category errors
 */
export class EncryptionKeyAlreadyRegistered extends Schema.Error<EncryptionKeyAlreadyRegistered>(
  "EncryptionKeyAlreadyRegistered"
)(envelope("encryption_key_already_registered"), { httpApiStatus: 409 }) {
  readonly _tag = "EncryptionKeyAlreadyRegistered" as const
  static of(message = "This account already has a different registered encryption key.") {
    return new EncryptionKeyAlreadyRegistered(bodyOf("encryption_key_already_registered", message))
  }
}

/**
 * 403 `test_mode_only` (ext): the test faucet answers `hc_test_` keys only.
 *
 * @since 0.1.0
 * @category errors
 */
export class TestModeOnly extends Schema.Error<TestModeOnly>("TestModeOnly")(envelope("test_mode_only"), {
  httpApiStatus: 403
}) {
  readonly _tag = "TestModeOnly" as const
  static of(message = "This endpoint is for test keys (hc_test_) only.") {
    return new TestModeOnly(bodyOf("test_mode_only", message))
  }
}

/**
 * 400 `invalid_policy`: a spend policy field fails D22's rules; `param` names it
 * (dotted under `spend_policy.` on agent creation).
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidPolicy extends Schema.Error<InvalidPolicy>("InvalidPolicy")(envelope("invalid_policy"), {
  httpApiStatus: 400
}) {
  readonly _tag = "InvalidPolicy" as const
  static of(param: string, message: string) {
    return new InvalidPolicy(bodyOf("invalid_policy", message, { param }))
  }
}

/**
 * 403 `policy_violation` (ext, D25): an agent's transfer breaks its spend policy;
 * `reason` says which rule (`asset_not_allowed`, `recipient_not_allowed`,
 * `outside_active_hours`, `per_transaction_limit_exceeded`, `daily_limit_exceeded`).
 *
 * @since 0.1.0
 * @category errors
 */
export class PolicyViolation extends Schema.Error<PolicyViolation>("PolicyViolation")(envelope("policy_violation"), {
  httpApiStatus: 403
}) {
  readonly _tag = "PolicyViolation" as const
  static of(reason: string) {
    return new PolicyViolation(bodyOf("policy_violation", "The agent's spend policy does not allow this transfer.", { reason }))
  }
}

/**
 * 403 `not_agent_owner` (SPEC, D21, D27, D29): the caller does not own the
 * agent; an agent's own key never does.
 *
 * @since 0.1.0
 * @category errors
 */
export class NotAgentOwner extends Schema.Error<NotAgentOwner>("NotAgentOwner")(envelope("not_agent_owner"), {
  httpApiStatus: 403
}) {
  readonly _tag = "NotAgentOwner" as const
  static of(message = "Only the account that owns the agent may do this; agent keys cannot.") {
    return new NotAgentOwner(bodyOf("not_agent_owner", message))
  }
}

/**
 * 404 `agent_not_found` (ext, D29): no agent account with that id.
 *
 * @since 0.1.0
 * @category errors
 */
export class AgentNotFound extends Schema.Error<AgentNotFound>("AgentNotFound")(envelope("agent_not_found"), {
  httpApiStatus: 404
}) {
  readonly _tag = "AgentNotFound" as const
  static of(accountId: string) {
    return new AgentNotFound(bodyOf("agent_not_found", `No agent account ${accountId}.`, { param: "account_id" }))
  }
}

/**
 * 409 `agent_name_taken` (ext, D21): the owner already has an agent with that name.
 *
 * @since 0.1.0
 * @category errors
 */
export class AgentNameTaken extends Schema.Error<AgentNameTaken>("AgentNameTaken")(envelope("agent_name_taken"), {
  httpApiStatus: 409
}) {
  readonly _tag = "AgentNameTaken" as const
  static of(name: string) {
    return new AgentNameTaken(bodyOf("agent_name_taken", `This account already has an agent named ${name}.`, { param: "name" }))
  }
}

/**
 * 404 `transaction_not_found` (SPEC, D27): no pending agent transaction with that
 * id in the key's mode (unknown, or already decided).
 *
 * @since 0.1.0
 * @category errors
 */
export class TransactionNotFound extends Schema.Error<TransactionNotFound>("TransactionNotFound")(
  envelope("transaction_not_found"),
  { httpApiStatus: 404 }
) {
  readonly _tag = "TransactionNotFound" as const
  static of(transactionId: string) {
    return new TransactionNotFound(
      bodyOf("transaction_not_found", `No pending agent transaction ${transactionId}.`, { param: "transaction_id" })
    )
  }
}

/**
 * 409 `transaction_expired` (SPEC, D27): the approval window has passed.
 *
 * @since 0.1.0
 * @category errors
 */
export class TransactionExpired extends Schema.Error<TransactionExpired>("TransactionExpired")(
  envelope("transaction_expired"),
  { httpApiStatus: 409 }
) {
  readonly _tag = "TransactionExpired" as const
  static of(transactionId: string) {
    return new TransactionExpired(
      bodyOf("transaction_expired", `The approval window of ${transactionId} has passed.`, { param: "transaction_id" })
    )
  }
}

/**
 * 409 `prepared_transfer_used` (ext, docs/api.md "Client-sealed transfers"): a transfer
 * already exists for this prepared transfer id. A prepared transfer is paid once; a client
 * that lost the answer reads the transfer, or retries with its first Idempotency-Key.
 *
 * @since 0.1.0
 * @category errors
 */
export class PreparedTransferUsed extends Schema.Error<PreparedTransferUsed>("PreparedTransferUsed")(
  envelope("prepared_transfer_used"),
  { httpApiStatus: 409 }
) {
  readonly _tag = "PreparedTransferUsed" as const
  static of(transferId: string) {
    return new PreparedTransferUsed(
      bodyOf("prepared_transfer_used", `A transfer was already created from ${transferId}: prepare a new one.`, {
        param: "sealed.transfer_id"
      })
    )
  }
}
