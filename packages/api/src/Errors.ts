/**
 * The error catalogue: every error the public API can answer, in one place, as data.
 *
 * Each entry is one `apiError(tag, { code, status }, answer)` statement: the SPEC code,
 * the status SPEC.md's error table (or a decision in docs/decisions) gives it, and how its message (and
 * `param`/`reason`) is worded. `apiError` generates the class: a Schema error whose
 * encoded form is D1's envelope `{"error":{"code","message","param?","reason?","request_id"}}`
 * with `httpApiStatus` set, whose `_tag` is a plain class field (matchable with
 * `Effect.catchTag`, never encoded into a body), and whose `of(...)` builds the answer.
 * `request_id` is filled in by the server's envelope middleware
 * (packages/server/src/http/Envelope.ts), which knows the request; domain code never sees it.
 *
 * Grouped by concern; within the API, precedence runs highest first in the order checks
 * run: authentication, rate limit, request validation, not found, permission/KYC,
 * policy, balance.
 *
 * Messages hold ids and field names, never amounts, memos, keys or proofs.
 *
 * Clients read the same table: `catalogue` lists every class with its code and status,
 * and `routerErrors` the codes answered outside any endpoint (the SDK's error classes are
 * built from both).
 *
 * @since 0.1.0
 */
import { type Cause, Schema } from "effect"

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
const envelope = <const Code extends string>(code: Code): Envelope<Code> =>
  Schema.Struct({
    error: Schema.Struct({
      code: Schema.Literal(code).annotate({ description: "The error's code (SPEC's table): what a client branches on." }),
      message: Schema.String.annotate({ description: "For people; never holds an amount, memo, key or proof." }),
      param: Schema.optionalKey(Schema.String.annotate({ description: "The field, parameter or header at fault (dotted path)." })),
      reason: Schema.optionalKey(Schema.String.annotate({ description: "A finer, stable reason (e.g. which policy rule)." })),
      request_id: Schema.optionalKey(Schema.String.annotate({ description: "The request's id (`req_…`); quote it when reporting." }))
    }).annotate({ description: "D1's error object." })
  })

/**
 * The type of {@link envelope}'s schema, written out so that declaration emit names it
 * instead of expanding it into every endpoint that can answer the error (the expanded
 * HttpApi groups exceeded what tsc will serialize: TS7056).
 *
 * @since 0.4.0
 * @category models
 */
export type Envelope<Code extends string> = Schema.Struct<{
  readonly error: Schema.Struct<{
    readonly code: Schema.Literal<Code>
    readonly message: Schema.String
    readonly param: Schema.optionalKey<Schema.String>
    readonly reason: Schema.optionalKey<Schema.String>
    readonly request_id: Schema.optionalKey<Schema.String>
  }>
}>

/**
 * An instance of a catalogue class: a yieldable error whose `error` is D1's error object.
 *
 * @since 0.4.0
 * @category models
 */
export interface ApiErrorInstance<Tag extends string, Code extends string> extends Cause.YieldableError {
  readonly _tag: Tag
  readonly error: Envelope<Code>["Type"]["error"]
}

/**
 * A catalogue class, as {@link apiError} returns it. Declared rather than inferred: the
 * inferred type is an anonymous class that declaration emit expands wherever it is used,
 * including Effect's internal `NodeInspectSymbol` member it cannot name (TS4020/TS4023).
 *
 * @since 0.4.0
 * @category models
 */
export interface ApiErrorClass<Tag extends string, Code extends string, Args extends ReadonlyArray<unknown>>
  // Omit (of nothing) keeps the schema's members but drops `Schema.Class`'s construct
  // signature, whose instance lacks `_tag`: the class's own, below, is the only one (as
  // with a class declaration, whose constructor replaces its base's).
  extends Omit<Schema.Class<ApiErrorInstance<Tag, Code>, Envelope<Code>, Cause.YieldableError>, never>
{
  new(props: Envelope<Code>["Type"], options?: Schema.MakeOptions): ApiErrorInstance<Tag, Code>
  readonly code: Code
  readonly status: number
  of(...args: Args): ApiErrorInstance<Tag, Code>
}

/** Optional details of an error besides its message. */
export interface ErrorDetails {
  readonly param?: string
  readonly reason?: string
}

/** What one error says: its message and details. */
interface Answer extends ErrorDetails {
  readonly message: string
}

const bodyOf = <const Code extends string>(code: Code, answer: Answer) => ({
  error: {
    code,
    message: answer.message,
    ...(answer.param === undefined ? {} : { param: answer.param }),
    ...(answer.reason === undefined ? {} : { reason: answer.reason })
  }
})

/**
 * The class of one catalogue entry: `of(...)` takes what `answer` takes.
 *
 * @since 0.4.0
 * @category constructors
 */
export const apiError = <const Tag extends string, const Code extends string, Args extends ReadonlyArray<unknown>>(
  tag: Tag,
  entry: { readonly code: Code; readonly status: number },
  answer: (...args: Args) => Answer
): ApiErrorClass<Tag, Code, Args> => {
  class ApiError extends Schema.Error<ApiError>(tag)(envelope(entry.code), { httpApiStatus: entry.status }) {
    readonly _tag: Tag = tag
    static readonly code: Code = entry.code
    static readonly status: number = entry.status
    // The body's message, so a failure printed by a client (or a log) says what it is.
    // It is the message sent on the wire: ids and field names, never an amount or memo.
    override get message(): string {
      return this.error.message
    }
    static of(...args: Args): ApiError {
      return new ApiError(bodyOf(entry.code, answer(...args)))
    }
  }
  Object.defineProperty(ApiError, "name", { value: tag })
  return ApiError
}

// ---------------------------------------------------------------------------------------------
// Any endpoint: authentication, rate limit, the request itself, faults
// ---------------------------------------------------------------------------------------------

/**
 * 401 `unauthorized`: missing, malformed, unknown or revoked API key (D8).
 *
 * @since 0.1.0
 * @category errors
 */
export const Unauthorized = apiError("Unauthorized", { code: "unauthorized", status: 401 }, (message: string = "Missing or invalid API key.") => ({ message }))
export type Unauthorized = InstanceType<typeof Unauthorized>

/**
 * 403 `account_suspended` (ext, D60): the key is valid, but the operator suspended its account
 * (or, for an agent's key, the agent's owner). Nothing the account started is lost: what was
 * under way finishes; only new requests are refused until the operator reactivates it.
 *
 * @since 0.11.0
 * @category errors
 */
export const AccountSuspended = apiError(
  "AccountSuspended",
  { code: "account_suspended", status: 403 },
  (message: string = "This account is suspended by the operator; contact them to have it reactivated.") => ({ message })
)
export type AccountSuspended = InstanceType<typeof AccountSuspended>

/**
 * 429 `rate_limited` (ext, D7): the API key sent more requests than its limit;
 * the response carries `Retry-After`.
 *
 * @since 0.1.0
 * @category errors
 */
export const RateLimited = apiError(
  "RateLimited",
  { code: "rate_limited", status: 429 },
  (message: string = "Too many requests for this API key; retry after the number of seconds in Retry-After.") => ({ message })
)
export type RateLimited = InstanceType<typeof RateLimited>

/**
 * 400 `invalid_request`: malformed body, wrong Content-Type, missing or invalid field.
 *
 * @since 0.1.0
 * @category errors
 */
export const InvalidRequest = apiError(
  "InvalidRequest",
  { code: "invalid_request", status: 400 },
  (message: string, details?: ErrorDetails) => ({ message, ...details })
)
export type InvalidRequest = InstanceType<typeof InvalidRequest>

/**
 * 413 `payload_too_large`: the request body is over 64 KiB (D2).
 *
 * @since 0.1.0
 * @category errors
 */
export const PayloadTooLarge = apiError(
  "PayloadTooLarge",
  { code: "payload_too_large", status: 413 },
  (message: string = "The request body is larger than 64 KiB.") => ({ message })
)
export type PayloadTooLarge = InstanceType<typeof PayloadTooLarge>

/**
 * 409 `idempotency_key_reused` (ext, D6): same Idempotency-Key, different request.
 *
 * @since 0.1.0
 * @category errors
 */
export const IdempotencyKeyReused = apiError(
  "IdempotencyKeyReused",
  { code: "idempotency_key_reused", status: 409 },
  (message: string = "This Idempotency-Key was already used with a different request; use a new key for a new request.") => ({
    message,
    param: "Idempotency-Key"
  })
)
export type IdempotencyKeyReused = InstanceType<typeof IdempotencyKeyReused>

/**
 * 409 `idempotency_key_in_progress` (ext, D6): the first request with this key is still running.
 *
 * @since 0.1.0
 * @category errors
 */
export const IdempotencyKeyInProgress = apiError(
  "IdempotencyKeyInProgress",
  { code: "idempotency_key_in_progress", status: 409 },
  (message: string = "A request with this Idempotency-Key is still in progress; retry later.") => ({ message, param: "Idempotency-Key" })
)
export type IdempotencyKeyInProgress = InstanceType<typeof IdempotencyKeyInProgress>

/**
 * 500 `internal_error`: an unexpected fault; the body holds no internals (D2).
 *
 * @since 0.1.0
 * @category errors
 */
export const InternalError = apiError(
  "InternalError",
  { code: "internal_error", status: 500 },
  (message: string = "An unexpected error occurred; quote the request id when reporting it.") => ({ message })
)
export type InternalError = InstanceType<typeof InternalError>

/**
 * 503 `service_unavailable`: the server is starting, draining or lost a dependency.
 *
 * @since 0.1.0
 * @category errors
 */
export const ServiceUnavailable = apiError(
  "ServiceUnavailable",
  { code: "service_unavailable", status: 503 },
  (message: string = "The service is temporarily unavailable; retry shortly.") => ({ message })
)
export type ServiceUnavailable = InstanceType<typeof ServiceUnavailable>

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
  bodyOf(code, { message, ...details })

// ---------------------------------------------------------------------------------------------
// Accounts, keys and modes (admin codes included)
// ---------------------------------------------------------------------------------------------

/**
 * 403 `kyc_required`: the account's identity verification is not complete (D11).
 *
 * @since 0.1.0
 * @category errors
 */
export const KycRequired = apiError(
  "KycRequired",
  { code: "kyc_required", status: 403 },
  (message: string = "Identity verification is not completed for this account.") => ({ message })
)
export type KycRequired = InstanceType<typeof KycRequired>

/**
 * 403 `livemode_unavailable` (ext, D9): a live key on an endpoint that would touch
 * the mainnet chain while none is configured.
 *
 * @since 0.1.0
 * @category errors
 */
export const LivemodeUnavailable = apiError(
  "LivemodeUnavailable",
  { code: "livemode_unavailable", status: 403 },
  (message: string = "Live mode is not available: no mainnet chain is configured.") => ({ message })
)
export type LivemodeUnavailable = InstanceType<typeof LivemodeUnavailable>

/**
 * 403 `test_mode_only` (ext): the test faucet answers `hc_test_` keys only.
 *
 * @since 0.1.0
 * @category errors
 */
export const TestModeOnly = apiError(
  "TestModeOnly",
  { code: "test_mode_only", status: 403 },
  (message: string = "This endpoint is for test keys (hc_test_) only.") => ({ message })
)
export type TestModeOnly = InstanceType<typeof TestModeOnly>

/**
 * 404 `account_not_found` (admin): no account with that id.
 *
 * @since 0.1.0
 * @category errors
 */
export const AccountNotFound = apiError("AccountNotFound", { code: "account_not_found", status: 404 }, (accountId: string) => ({
  message: `No account ${accountId}.`,
  param: "account_id"
}))
export type AccountNotFound = InstanceType<typeof AccountNotFound>

/**
 * 404 `key_not_found` (admin): no API key with that id, or already revoked.
 *
 * @since 0.1.0
 * @category errors
 */
export const ApiKeyNotFound = apiError("ApiKeyNotFound", { code: "key_not_found", status: 404 }, (keyId: string) => ({
  message: `No active API key ${keyId}.`,
  param: "key_id"
}))
export type ApiKeyNotFound = InstanceType<typeof ApiKeyNotFound>

/**
 * 409 `key_shown_once` (ext, D44): a retry with the Idempotency-Key of a key's creation. The key
 * exists, but its value was shown once, in the first answer, and is not kept (D8): revoke it if
 * that answer was lost, and create another.
 *
 * @since 0.9.0
 * @category errors
 */
export const KeyShownOnce = apiError("KeyShownOnce", { code: "key_shown_once", status: 409 }, (keyId: string) => ({
  message: `This Idempotency-Key already created API key ${keyId}; its value was shown once, in that answer, and is not kept. ` +
    `If the answer was lost, revoke ${keyId} and create another key.`,
  param: "Idempotency-Key"
}))
export type KeyShownOnce = InstanceType<typeof KeyShownOnce>

/**
 * 403 `reauthentication_required` (ext, D41, D44): a dashboard session creating a key (or adding a
 * passkey) without a passkey assertion in the last five minutes; the page confirms with the
 * passkey (step-up) and retries. API keys never get it.
 *
 * @since 0.9.0
 * @category errors
 */
export const ReauthenticationRequired = apiError(
  "ReauthenticationRequired",
  { code: "reauthentication_required", status: 403 },
  (message: string = "Confirm with your passkey to continue.") => ({ message })
)
export type ReauthenticationRequired = InstanceType<typeof ReauthenticationRequired>

/**
 * 409 `handle_taken` (admin, D10): handles are unique case-insensitively.
 *
 * @since 0.1.0
 * @category errors
 */
export const HandleTaken = apiError("HandleTaken", { code: "handle_taken", status: 409 }, (handle: string) => ({
  message: `The handle @${handle} is taken.`,
  param: "handle"
}))
export type HandleTaken = InstanceType<typeof HandleTaken>

/**
 * 422 `encryption_key_required` (ext): the sender has not registered its own
 * encryption key, so the debit from its confidential balance cannot be encrypted
 * to it (`PUT /v1/accounts/me/encryption-key` first).
 *
 * @since 0.1.0
 * @category errors
 */
export const EncryptionKeyRequired = apiError(
  "EncryptionKeyRequired",
  { code: "encryption_key_required", status: 422 },
  (message: string = "Register this account's encryption key (PUT /v1/accounts/me/encryption-key) first.") => ({ message })
)
export type EncryptionKeyRequired = InstanceType<typeof EncryptionKeyRequired>

/**
 * 422 `encryption_key_invalid` (ext): the key is not a valid BN254 point, or its
 * proof of possession does not verify.
 *
 * @since 0.1.0
 * @category errors
 */
export const EncryptionKeyInvalid = apiError(
  "EncryptionKeyInvalid",
  { code: "encryption_key_invalid", status: 422 },
  (param: string, reason: string) => ({ message: "The encryption key or its proof of possession is invalid.", param, reason })
)
export type EncryptionKeyInvalid = InstanceType<typeof EncryptionKeyInvalid>

/**
 * 409 `encryption_key_already_registered` (ext): the chain's key registry keeps
 * one key per account (a new key would orphan the balance encrypted to the old one).
 *
 * @since 0.1.0
 * @category errors
 */
export const EncryptionKeyAlreadyRegistered = apiError(
  "EncryptionKeyAlreadyRegistered",
  { code: "encryption_key_already_registered", status: 409 },
  (message: string = "This account already has a different registered encryption key.") => ({ message })
)
export type EncryptionKeyAlreadyRegistered = InstanceType<typeof EncryptionKeyAlreadyRegistered>

/**
 * 422 `decryption_proof_invalid`: the proof is malformed, expired, for another
 * account or chain, names a ciphertext no recent block holds, or does not match the
 * balance ciphertext (SPEC, D20, D63).
 *
 * @since 0.1.0
 * @category errors
 */
export const DecryptionProofInvalid = apiError(
  "DecryptionProofInvalid",
  { code: "decryption_proof_invalid", status: 422 },
  (reason: string, message: string = "The decryption proof does not match the balance ciphertext.") => ({
    message,
    param: "decryption_proof",
    reason
  })
)
export type DecryptionProofInvalid = InstanceType<typeof DecryptionProofInvalid>

// ---------------------------------------------------------------------------------------------
// Transfers
// ---------------------------------------------------------------------------------------------

/**
 * 402 `insufficient_balance`: the account holds too little of the asset (SPEC).
 *
 * @since 0.1.0
 * @category errors
 */
export const InsufficientBalance = apiError(
  "InsufficientBalance",
  { code: "insufficient_balance", status: 402 },
  (message: string = "The account's balance of the asset is too low for this transfer.") => ({ message })
)
export type InsufficientBalance = InstanceType<typeof InsufficientBalance>

/**
 * 404 `recipient_not_found`: no account for the handle (SPEC, D15).
 *
 * @since 0.1.0
 * @category errors
 */
export const RecipientNotFound = apiError(
  "RecipientNotFound",
  { code: "recipient_not_found", status: 404 },
  (message: string = "No account has that handle.") => ({ message, param: "to" })
)
export type RecipientNotFound = InstanceType<typeof RecipientNotFound>

/**
 * 422 `recipient_not_confidential_ready`: the recipient has no registered
 * encryption key; retry with `confidential: false` (SPEC, D12, D15).
 *
 * @since 0.1.0
 * @category errors
 */
export const RecipientNotConfidentialReady = apiError(
  "RecipientNotConfidentialReady",
  { code: "recipient_not_confidential_ready", status: 422 },
  (
    message: string =
      "The recipient's wallet has no registered encryption key, so it cannot receive confidential transfers; retry with \"confidential\": false to send a standard transfer."
  ) => ({ message, param: "to" })
)
export type RecipientNotConfidentialReady = InstanceType<typeof RecipientNotConfidentialReady>

/**
 * 404 `transfer_not_found`: unknown id, or one the caller is not party to (D17).
 *
 * @since 0.1.0
 * @category errors
 */
export const TransferNotFound = apiError(
  "TransferNotFound",
  { code: "transfer_not_found", status: 404 },
  (message: string = "No transfer with that id for this account.") => ({ message, param: "transfer_id" })
)
export type TransferNotFound = InstanceType<typeof TransferNotFound>

/**
 * 409 `prepared_transfer_used` (ext, docs/api.md "Client-sealed transfers"): a transfer
 * already exists for this prepared transfer id. A prepared transfer is paid once; a client
 * that lost the answer reads the transfer, or retries with its first Idempotency-Key.
 *
 * @since 0.1.0
 * @category errors
 */
export const PreparedTransferUsed = apiError(
  "PreparedTransferUsed",
  { code: "prepared_transfer_used", status: 409 },
  (transferId: string) => ({
    message: `A transfer was already created from ${transferId}: prepare a new one.`,
    param: "sealed.transfer_id"
  })
)
export type PreparedTransferUsed = InstanceType<typeof PreparedTransferUsed>

/**
 * 403 `not_transfer_recipient` (ext, D43): the caller sees the transfer (its sender, or the
 * owner of an agent party) but did not receive it, and only its recipient may refund it. A
 * caller not party to it at all is answered 404 `transfer_not_found` first (D17).
 *
 * @since 0.10.0
 * @category errors
 */
export const NotTransferRecipient = apiError(
  "NotTransferRecipient",
  { code: "not_transfer_recipient", status: 403 },
  (transferId: string) => ({ message: `Only the recipient of ${transferId} may refund it.`, param: "transfer_id" })
)
export type NotTransferRecipient = InstanceType<typeof NotTransferRecipient>

/**
 * 409 `transfer_not_confirmed` (ext, D43): the transfer to refund is still `pending` (try again
 * once it is confirmed) or `failed` (nothing moved, nothing to refund); `reason` says which.
 *
 * @since 0.10.0
 * @category errors
 */
export const TransferNotConfirmed = apiError(
  "TransferNotConfirmed",
  { code: "transfer_not_confirmed", status: 409 },
  (transferId: string, status: "pending" | "failed") => ({
    message: status === "pending"
      ? `${transferId} is not confirmed yet: refund it once it is.`
      : `${transferId} failed and moved nothing: there is nothing to refund.`,
    param: "transfer_id",
    reason: status
  })
)
export type TransferNotConfirmed = InstanceType<typeof TransferNotConfirmed>

/**
 * 422 `transfer_not_confidential` (ext, D43): a standard transfer (`confidential: false`) is not
 * refunded through the service: its amount is public, and the guardian keeps no refundable total
 * for it. Send a transfer back instead.
 *
 * @since 0.10.0
 * @category errors
 */
export const TransferNotConfidential = apiError(
  "TransferNotConfidential",
  { code: "transfer_not_confidential", status: 422 },
  (transferId: string) => ({
    message: `${transferId} is a standard transfer: only confidential transfers are refunded; send a transfer back instead.`,
    param: "transfer_id"
  })
)
export type TransferNotConfidential = InstanceType<typeof TransferNotConfidential>

/**
 * 422 `refund_exceeds_original` (ext, D43): with this refund, the refunds of the transfer (those
 * confirmed and those in flight) would add up to more than its amount. The guardian decides it;
 * the message never says by how much.
 *
 * @since 0.10.0
 * @category errors
 */
export const RefundExceedsOriginal = apiError(
  "RefundExceedsOriginal",
  { code: "refund_exceeds_original", status: 422 },
  (transferId: string) => ({
    message: `The refunds of ${transferId} would add up to more than its amount: refund less.`,
    param: "amount"
  })
)
export type RefundExceedsOriginal = InstanceType<typeof RefundExceedsOriginal>

// ---------------------------------------------------------------------------------------------
// Agents, spend policies and approvals
// ---------------------------------------------------------------------------------------------

/**
 * 400 `invalid_policy`: a spend policy field fails D22's rules; `param` names it
 * (dotted under `spend_policy.` on agent creation).
 *
 * @since 0.1.0
 * @category errors
 */
export const InvalidPolicy = apiError("InvalidPolicy", { code: "invalid_policy", status: 400 }, (param: string, message: string) => ({
  message,
  param
}))
export type InvalidPolicy = InstanceType<typeof InvalidPolicy>

/**
 * The spend-policy field (D22) each rule of D25 reads: what `param` names in a 403
 * `policy_violation`, so that a client can say which setting refused the transfer.
 *
 * @since 0.5.0
 * @category constants
 */
export const policyFieldOfRule = {
  asset_not_allowed: "assets",
  recipient_not_allowed: "allowed_recipients",
  outside_active_hours: "active_hours",
  per_transaction_limit_exceeded: "per_transaction_limit_usdg",
  daily_limit_exceeded: "daily_limit_usdg"
} as const

/**
 * A rule of D25 that refuses a transfer: `policy_violation`'s `reason`.
 *
 * @since 0.5.0
 * @category models
 */
export type PolicyRule = keyof typeof policyFieldOfRule

/**
 * 403 `policy_violation` (ext, D25): an agent's transfer breaks its spend policy;
 * `reason` says which rule (`asset_not_allowed`, `recipient_not_allowed`,
 * `outside_active_hours`, `per_transaction_limit_exceeded`, `daily_limit_exceeded`) and
 * `param` the policy field it reads (`policyFieldOfRule`).
 *
 * @since 0.1.0
 * @category errors
 */
export const PolicyViolation = apiError("PolicyViolation", { code: "policy_violation", status: 403 }, (reason: PolicyRule) => ({
  message: "The agent's spend policy does not allow this transfer.",
  param: policyFieldOfRule[reason],
  reason
}))
export type PolicyViolation = InstanceType<typeof PolicyViolation>

/**
 * 403 `not_agent_owner` (SPEC, D21, D27, D29): the caller does not own the
 * agent; an agent's own key never does.
 *
 * @since 0.1.0
 * @category errors
 */
export const NotAgentOwner = apiError(
  "NotAgentOwner",
  { code: "not_agent_owner", status: 403 },
  (message: string = "Only the account that owns the agent may do this; agent keys cannot.") => ({ message })
)
export type NotAgentOwner = InstanceType<typeof NotAgentOwner>

/**
 * 404 `agent_not_found` (ext, D29): no agent account with that id.
 *
 * @since 0.1.0
 * @category errors
 */
export const AgentNotFound = apiError("AgentNotFound", { code: "agent_not_found", status: 404 }, (accountId: string) => ({
  message: `No agent account ${accountId}.`,
  param: "account_id"
}))
export type AgentNotFound = InstanceType<typeof AgentNotFound>

/**
 * 409 `agent_name_taken` (ext, D21): the owner already has an agent with that name.
 *
 * @since 0.1.0
 * @category errors
 */
export const AgentNameTaken = apiError("AgentNameTaken", { code: "agent_name_taken", status: 409 }, (name: string) => ({
  message: `This account already has an agent named ${name}.`,
  param: "name"
}))
export type AgentNameTaken = InstanceType<typeof AgentNameTaken>

/**
 * 409 `agent_limit_reached` (ext, D61): the owner already has as many agents, in the key's mode,
 * as one account may have (`AGENTS_PER_ACCOUNT_MAX`); the message names the limit.
 *
 * @since 0.11.0
 * @category errors
 */
export const AgentLimitReached = apiError("AgentLimitReached", { code: "agent_limit_reached", status: 409 }, (limit: number) => ({
  message: `This account already has ${limit} agents in this mode, the most one account may have.`
}))
export type AgentLimitReached = InstanceType<typeof AgentLimitReached>

/**
 * 404 `transaction_not_found` (SPEC, D27, D42): no pending agent transaction with that
 * id in the key's mode (unknown, or already decided) for a decision; for a read (`held:
 * "any"`), no agent transaction of the caller's (its owner's or its agent's) with that id.
 *
 * @since 0.1.0
 * @category errors
 */
export const TransactionNotFound = apiError(
  "TransactionNotFound",
  { code: "transaction_not_found", status: 404 },
  (transactionId: string, held: "pending" | "any" = "pending") => ({
    message: held === "pending" ? `No pending agent transaction ${transactionId}.` : `No agent transaction ${transactionId} for this key.`,
    param: "transaction_id"
  })
)
export type TransactionNotFound = InstanceType<typeof TransactionNotFound>

/**
 * 409 `transaction_expired` (SPEC, D27): the approval window has passed.
 *
 * @since 0.1.0
 * @category errors
 */
export const TransactionExpired = apiError(
  "TransactionExpired",
  { code: "transaction_expired", status: 409 },
  (transactionId: string) => ({ message: `The approval window of ${transactionId} has passed.`, param: "transaction_id" })
)
export type TransactionExpired = InstanceType<typeof TransactionExpired>

/**
 * 409 `approval_in_progress` (ext, D45): an earlier attempt to approve this transaction was
 * attested, its answer never recorded (its process died), and that attestation can still be
 * mined until its deadline: the approval is decided afresh only after it. The transaction stays
 * pending; retry after the time in the message.
 *
 * @since 0.9.0
 * @category errors
 */
export const ApprovalInProgress = apiError(
  "ApprovalInProgress",
  { code: "approval_in_progress", status: 409 },
  (transactionId: string, liveUntil: string | null) => ({
    message: `An earlier attempt to approve ${transactionId} was attested and can be mined until ` +
      `${liveUntil ?? "its deadline"}; retry after that time (the transaction stays pending).`,
    param: "transaction_id"
  })
)
export type ApprovalInProgress = InstanceType<typeof ApprovalInProgress>

/**
 * 409 `approval_attempts_exhausted` (ext, D45): the guardian has re-checked this transaction for
 * approval under as many different requests as it allows (each a fresh deadline or another
 * policy); it decides it no more. The transaction stays pending: reject it, or let it expire.
 *
 * @since 0.9.0
 * @category errors
 */
export const ApprovalAttemptsExhausted = apiError(
  "ApprovalAttemptsExhausted",
  { code: "approval_attempts_exhausted", status: 409 },
  (transactionId: string) => ({
    message: `${transactionId} was re-checked for approval as many times as allowed; reject it or let it expire.`,
    param: "transaction_id"
  })
)
export type ApprovalAttemptsExhausted = InstanceType<typeof ApprovalAttemptsExhausted>

// ---------------------------------------------------------------------------------------------
// Webhooks and events
// ---------------------------------------------------------------------------------------------

/**
 * 404 `webhook_not_found` (D33): no subscription with that id for the caller's
 * account and mode (another account's id, or a deleted one, is not found too).
 *
 * @since 0.1.0
 * @category errors
 */
export const WebhookNotFound = apiError("WebhookNotFound", { code: "webhook_not_found", status: 404 }, (webhookId: string) => ({
  message: `No webhook subscription ${webhookId}.`,
  param: "webhook_id"
}))
export type WebhookNotFound = InstanceType<typeof WebhookNotFound>

/**
 * 404 `event_not_found` (D35): no event with that id for the subscription's
 * account and mode (or it is past retention).
 *
 * @since 0.1.0
 * @category errors
 */
export const EventNotFound = apiError("EventNotFound", { code: "event_not_found", status: 404 }, (eventId: string) => ({
  message: `No event ${eventId} for this subscription.`,
  param: "event_id"
}))
export type EventNotFound = InstanceType<typeof EventNotFound>

// ---------------------------------------------------------------------------------------------
// The whole table
// ---------------------------------------------------------------------------------------------

/**
 * Every class of the catalogue, by tag: what a client builds its own error classes from
 * (each has `code` and `status`).
 *
 * @since 0.4.0
 * @category models
 */
export const catalogue = {
  Unauthorized,
  AccountSuspended,
  RateLimited,
  InvalidRequest,
  PayloadTooLarge,
  IdempotencyKeyReused,
  IdempotencyKeyInProgress,
  InternalError,
  ServiceUnavailable,
  KycRequired,
  LivemodeUnavailable,
  TestModeOnly,
  AccountNotFound,
  ApiKeyNotFound,
  KeyShownOnce,
  ReauthenticationRequired,
  HandleTaken,
  EncryptionKeyRequired,
  EncryptionKeyInvalid,
  EncryptionKeyAlreadyRegistered,
  DecryptionProofInvalid,
  InsufficientBalance,
  RecipientNotFound,
  RecipientNotConfidentialReady,
  TransferNotFound,
  PreparedTransferUsed,
  NotTransferRecipient,
  TransferNotConfirmed,
  TransferNotConfidential,
  RefundExceedsOriginal,
  InvalidPolicy,
  PolicyViolation,
  NotAgentOwner,
  AgentNotFound,
  AgentNameTaken,
  AgentLimitReached,
  TransactionNotFound,
  TransactionExpired,
  ApprovalInProgress,
  ApprovalAttemptsExhausted,
  WebhookNotFound,
  EventNotFound
} as const
