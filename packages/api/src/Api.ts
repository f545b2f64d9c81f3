/**
 * The public API's contract: the `/v1` HttpApi, its groups and its middleware
 * tags. The server implements it (handlers in packages/server/src/<concern>/http.ts,
 * middleware in packages/server/src/http/); clients derive from it with
 * `HttpApiClient` (packages/sdk/src/ApiClient.ts). Nothing here does I/O.
 *
 * @since 0.1.0
 */
import { Context, Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, HttpApiSecurity, OpenApi } from "effect/http-api"
import { AccountRecord } from "./Accounts.ts"
import {
  AgentList,
  AgentPage,
  AgentRecord,
  AgentTransactionRecord,
  CreateAgentRequest,
  PatchSpendPolicyRequest,
  PendingAgentTransactions,
  SealedAgentTransaction,
  SpendPolicyRecord
} from "./Agents.ts"
import { EncryptionKeyStatus, RegisterEncryptionKeyRequest, RegisteredEncryptionKey } from "./EncryptionKeys.ts"
import { BalancesResponse, SealedBalances } from "./Balances.ts"
import { EventPayload, EventRecord } from "./Events.ts"
import { FaucetGrant, FaucetGrantPage, FaucetRequest } from "./Faucet.ts"
import {
  CreateTransferRequest,
  PreparedTransfer,
  PrepareTransferRequest,
  RefundTransferRequest,
  SealedTransfer,
  TransferPage,
  TransferRecord,
  TransferStatus
} from "./Transfers.ts"
import { Page, PageLimitQuery, pageLimitDefault, pageLimitMax, PageOffsetQuery } from "./Page.ts"
import { completeDocument } from "./OpenApiDocument.ts"
import { pathId } from "./PathIds.ts"
import {
  ApiKeyFiguresList,
  ApiKeyList,
  CreateApiKeyRequest,
  CreatedAgentApiKey,
  type Principal,
  RevokedApiKey,
  RotateApiKeyRequest,
  RotatedAgentApiKey
} from "./ApiKeys.ts"
import {
  CreatedWebhook,
  CreateWebhookRequest,
  DeliveryPage,
  ReplayAccepted,
  RotatedSecret,
  UpdateWebhookRequest,
  WebhookList,
  WebhookRecord
} from "./Webhooks.ts"
import {
  AgentLimitReached,
  AgentNameTaken,
  AgentNotFound,
  ApiKeyNotFound,
  ApprovalAttemptsExhausted,
  ApprovalInProgress,
  DecryptionProofInvalid,
  EncryptionKeyAlreadyRegistered,
  EncryptionKeyInvalid,
  EncryptionKeyRequired,
  InsufficientBalance,
  KycRequired,
  LivemodeUnavailable,
  RecipientNotConfidentialReady,
  RecipientNotFound,
  ServiceUnavailable,
  TestModeOnly,
  TransactionExpired,
  TransactionNotFound,
  TransferNotFound,
  EventNotFound,
  IdempotencyKeyInProgress,
  IdempotencyKeyReused,
  InternalError,
  InvalidPolicy,
  InvalidRequest,
  NotAgentOwner,
  NotTransferRecipient,
  PayloadTooLarge,
  PolicyViolation,
  PreparedTransferUsed,
  RateLimited,
  ReauthenticationRequired,
  RefundExceedsOriginal,
  TransferNotConfidential,
  TransferNotConfirmed,
  Unauthorized,
  AccountSuspended,
  WebhookNotFound
} from "./Errors.ts"

/**
 * The caller authenticated by the API key of the current request.
 *
 * @since 0.1.0
 * @category services
 */
export class CurrentPrincipal extends Context.Service<CurrentPrincipal, Principal>()("@pps/api/CurrentPrincipal") {}

/**
 * Bearer API key authentication (D8) and the per-key rate limit (D7).
 *
 * @since 0.1.0
 * @category middleware
 */
export class Authorization extends HttpApiMiddleware.Service<Authorization, { provides: CurrentPrincipal }>()(
  "@pps/api/Authorization",
  { security: { bearer: HttpApiSecurity.bearer }, error: [Unauthorized, AccountSuspended, RateLimited] }
) {}

/**
 * Turns request decoding failures into 400 `invalid_request` with `param`
 * (without it HttpApi answers an empty 400). It also declares the errors any
 * endpoint can answer outside its handler (413 from the body limit, 500 for a
 * fault, 503 when a dependency the request needs is down), so the OpenAPI document lists them
 * on every operation and every handler may answer them.
 *
 * @since 0.1.0
 * @category middleware
 */
export class RequestValidation extends HttpApiMiddleware.Service<RequestValidation>()("@pps/api/RequestValidation", {
  error: [InvalidRequest, PayloadTooLarge, InternalError, ServiceUnavailable]
}) {}

/**
 * D6: `Idempotency-Key` on POST endpoints. It reads the body (413 or 400 when that fails) and the
 * database (503 when that is down).
 *
 * @since 0.1.0
 * @category middleware
 */
export class Idempotency extends HttpApiMiddleware.Service<Idempotency, { requires: CurrentPrincipal }>()(
  "@pps/api/Idempotency",
  { error: [InvalidRequest, PayloadTooLarge, IdempotencyKeyReused, IdempotencyKeyInProgress, ServiceUnavailable] }
) {}

/**
 * `/v1/accounts`: the caller's own account.
 *
 * @since 0.1.0
 * @category groups
 */
export class AccountsGroup extends HttpApiGroup.make("accounts")
  .add(
    HttpApiEndpoint.get("me", "/accounts/me", { success: AccountRecord }).annotate(
      OpenApi.Description,
      "The account of the API key's holder."
    ),
    HttpApiEndpoint.get("encryptionKey", "/accounts/me/encryption-key", {
      success: EncryptionKeyStatus,
      error: LivemodeUnavailable
    }).annotate(
      OpenApi.Description,
      "(ext) The registered key, if any, and what a proof of possession binds: chain id, each asset's contract, the account's address."
    ),
    HttpApiEndpoint.put("registerEncryptionKey", "/accounts/me/encryption-key", {
      payload: RegisterEncryptionKeyRequest,
      success: RegisteredEncryptionKey,
      error: [EncryptionKeyInvalid, EncryptionKeyAlreadyRegistered, LivemodeUnavailable, ServiceUnavailable]
    }).annotate(
      OpenApi.Description,
      "(ext, D12) Registers the account's encryption public key on chain, with a proof of possession per asset contract."
    ),
    HttpApiEndpoint.post("rotateEncryptionKey", "/accounts/me/encryption-key/rotate", {
      payload: RegisterEncryptionKeyRequest,
      success: RegisteredEncryptionKey,
      error: [EncryptionKeyInvalid, EncryptionKeyRequired, NotAgentOwner, ReauthenticationRequired, LivemodeUnavailable, ServiceUnavailable]
    }).middleware(Idempotency).annotate(
      OpenApi.Description,
      "(ext, D55) Replaces the account's registered encryption key (to rotate it, or to recover after losing it: the old key is not needed) and keeps its balance: the guardian re-encrypts it to the new key and attests, the account's wallet co-signs, and the chain checks both and the new key's proof of possession per asset contract. Transfers sealed afterwards use the new key. 503 while the account has transfers in flight (retry). A dashboard session needs a recent passkey confirmation."
    ),
    HttpApiEndpoint.get("balances", "/accounts/me/balances", {
      query: { decryption_proof: Schema.optionalKey(Schema.String) },
      // Declared so clients that cannot send a body on GET (fetch) send the proof here rather
      // than in the URL, where access logs would keep it (the server reads it itself).
      headers: {
        "x-decryption-proof": Schema.optionalKey(
          Schema.String.annotate({ description: "(ext, D20) The decryption proof, for clients that cannot send a body on GET." })
        )
      },
      success: BalancesResponse,
      error: [KycRequired, DecryptionProofInvalid, EncryptionKeyRequired, LivemodeUnavailable, ServiceUnavailable]
    }).annotate(
      OpenApi.Description,
      "D19/D20: per asset whether the balance is non-zero; with a decryption proof (JSON body, the decryption_proof query parameter or the X-Decryption-Proof header), the proven amounts."
    ),
    HttpApiEndpoint.get("apiKeys", "/accounts/me/api-keys", {
      success: ApiKeyFiguresList,
      error: [KycRequired, LivemodeUnavailable, NotAgentOwner, ServiceUnavailable]
    }).annotate(
      OpenApi.Description,
      "(ext, SPEC Authentication 5, D40) The account's keys of this mode with last use and request count, and each key's total transferred, sealed to the account's key (empty until the account registers a key). Account keys only."
    ),
    HttpApiEndpoint.get("sealedBalances", "/accounts/me/balances/sealed", {
      success: SealedBalances,
      error: [KycRequired, NotAgentOwner, EncryptionKeyRequired, LivemodeUnavailable, ServiceUnavailable]
    }).annotate(
      OpenApi.Description,
      "(ext) The guardian's balance statements sealed to the account's key, with the on-chain ciphertexts and their versions. Agent keys: 403 not_agent_owner."
    )
  )
  .middleware(Authorization)
  .prefix("/v1")
{}

// Path ids are checked against D3's shape: one that cannot exist answers the
// resource's 404 (PathIds.ts), never reaches SQL.
const webhookIdParam = pathId("wh", () => WebhookNotFound.of("with that id"))
const webhookIdParams = { webhook_id: webhookIdParam }

/**
 * `/v1/webhooks`: subscriptions, their delivery history and replays (D33-D35).
 * Agent keys: 403 `not_agent_owner` (an agent's events go to its owner's subscriptions, D30).
 *
 * @since 0.1.0
 * @category groups
 */
export class WebhooksGroup extends HttpApiGroup.make("webhooks")
  .add(
    HttpApiEndpoint.post("create", "/webhooks", {
      payload: CreateWebhookRequest,
      success: CreatedWebhook.pipe(HttpApiSchema.status(201)),
      error: [InvalidRequest, NotAgentOwner]
    }).middleware(Idempotency).annotate(
      OpenApi.Description,
      "Subscribes an https URL to event types; the signing secret is in this answer only."
    ),
    HttpApiEndpoint.get("list", "/webhooks", { success: WebhookList, error: NotAgentOwner }).annotate(
      OpenApi.Description,
      "The account's subscriptions in the key's mode, newest first, without secrets."
    ),
    HttpApiEndpoint.get("get", "/webhooks/:webhook_id", {
      params: webhookIdParams,
      success: WebhookRecord,
      error: [WebhookNotFound, NotAgentOwner]
    }).annotate(OpenApi.Description, "(ext, D59) One subscription, without its secret."),
    HttpApiEndpoint.patch("update", "/webhooks/:webhook_id", {
      params: webhookIdParams,
      payload: UpdateWebhookRequest,
      success: WebhookRecord,
      error: [InvalidRequest, WebhookNotFound, NotAgentOwner]
    }).annotate(
      OpenApi.Description,
      "(ext, D59) Changes a subscription's url, events or enabled; absent fields stay. A disabled subscription gets no new deliveries; its pending ones wait until it is enabled."
    ),
    HttpApiEndpoint.delete("remove", "/webhooks/:webhook_id", {
      params: webhookIdParams,
      success: HttpApiSchema.NoContent,
      error: [WebhookNotFound, NotAgentOwner]
    }).annotate(OpenApi.Description, "Deletes a subscription; its pending deliveries are cancelled at once."),
    HttpApiEndpoint.post("rotateSecret", "/webhooks/:webhook_id/rotate-secret", {
      params: webhookIdParams,
      success: RotatedSecret,
      error: [WebhookNotFound, NotAgentOwner]
    }).middleware(Idempotency).annotate(
      OpenApi.Description,
      "(ext) A new signing secret, shown once; the previous one also signs until previous_secret_expires_at."
    ),
    HttpApiEndpoint.get("deliveries", "/webhooks/:webhook_id/deliveries", {
      params: webhookIdParams,
      query: {
        limit: Schema.optionalKey(PageLimitQuery),
        offset: Schema.optionalKey(PageOffsetQuery)
      },
      success: DeliveryPage,
      error: [WebhookNotFound, NotAgentOwner]
    }).annotate(OpenApi.Description, `Delivery history, newest first; limit 1-${pageLimitMax} (default ${pageLimitDefault}).`),
    HttpApiEndpoint.post("replay", "/webhooks/:webhook_id/replay/:event_id", {
      params: { webhook_id: webhookIdParam, event_id: pathId("evt", () => EventNotFound.of("with that id")) },
      success: ReplayAccepted.pipe(HttpApiSchema.status(202)),
      error: [WebhookNotFound, EventNotFound, NotAgentOwner]
    }).middleware(Idempotency).annotate(OpenApi.Description, "Delivers one event again, as a new delivery.")
  )
  .middleware(Authorization)
  .prefix("/v1")
{}

const transferIdParams = { transfer_id: pathId("tr", () => TransferNotFound.of()) }

// A boolean query parameter: the text `true` or `false`, decoded to a boolean.
const BooleanQuery = Schema.Union([Schema.Literal("true").transform(true), Schema.Literal("false").transform(false)])

/**
 * `/v1/transfers` (D13-D18).
 *
 * @since 0.1.0
 * @category groups
 */
export class TransfersGroup extends HttpApiGroup.make("transfers")
  .add(
    HttpApiEndpoint.post("create", "/transfers", {
      payload: CreateTransferRequest,
      success: [TransferRecord.pipe(HttpApiSchema.status(201)), AgentTransactionRecord.pipe(HttpApiSchema.status(202))],
      error: [
        InvalidRequest,
        KycRequired,
        LivemodeUnavailable,
        PolicyViolation,
        InsufficientBalance,
        RecipientNotFound,
        RecipientNotConfidentialReady,
        EncryptionKeyRequired,
        PreparedTransferUsed,
        ServiceUnavailable
      ]
    }).middleware(Idempotency).annotate(
      OpenApi.Description,
      "Creates a transfer; waits up to the create timeout for settlement (confirmed) or answers pending (D14). An agent's transfer above its approval threshold is held: 202 with the held transaction (D26). Either `amount` and `memo` (the server sees them for this request), or `sealed`: boxes the client sealed to a prepared transfer (ext; no request carries the amount in clear, and the server cannot open the boxes as long as the client sealed them to the real guardian's and recipient's keys: docs/security.md)."
    ),
    HttpApiEndpoint.post("prepare", "/transfers/prepare", {
      payload: PrepareTransferRequest,
      success: PreparedTransfer,
      error: [
        InvalidRequest,
        KycRequired,
        LivemodeUnavailable,
        PolicyViolation,
        RecipientNotFound,
        RecipientNotConfidentialReady,
        EncryptionKeyRequired
      ]
    }).middleware(Idempotency).annotate(
      OpenApi.Description,
      "(ext) Prepares a confidential transfer that the client seals itself: the transfer id the boxes are bound to, the chain, the contract, the sender's, recipient's and guardian's keys, and a token for `POST /v1/transfers` with `sealed`. Applies every amount-free rule of create."
    ),
    HttpApiEndpoint.get("list", "/transfers", {
      query: {
        limit: Schema.optionalKey(PageLimitQuery),
        offset: Schema.optionalKey(PageOffsetQuery),
        status: Schema.optionalKey(TransferStatus),
        from: Schema.optionalKey(Schema.String.annotate({ description: "Only transfers created after this instant (ISO 8601, exclusive; D16)." })),
        to: Schema.optionalKey(Schema.String.annotate({ description: "Only transfers created before this instant (ISO 8601, exclusive; D16)." })),
        include_agents: Schema.optionalKey(BooleanQuery.annotate({ description: "(ext) Also the transfers of the caller's agents." }))
      },
      success: TransferPage,
      error: InvalidRequest
    }).annotate(OpenApi.Description, "D16: transfers the caller sent or received, newest first. With `include_agents=true` (ext), also those of the caller's agents (SPEC Events: the account and any agent under it)."),
    HttpApiEndpoint.post("refund", "/transfers/:transfer_id/refund", {
      params: transferIdParams,
      payload: RefundTransferRequest,
      success: [TransferRecord.pipe(HttpApiSchema.status(201)), AgentTransactionRecord.pipe(HttpApiSchema.status(202))],
      error: [
        InvalidRequest,
        TransferNotFound,
        NotTransferRecipient,
        TransferNotConfirmed,
        TransferNotConfidential,
        KycRequired,
        LivemodeUnavailable,
        PolicyViolation,
        RefundExceedsOriginal,
        InsufficientBalance,
        RecipientNotFound,
        RecipientNotConfidentialReady,
        EncryptionKeyRequired,
        PreparedTransferUsed,
        ServiceUnavailable
      ]
    }).middleware(Idempotency).annotate(
      OpenApi.Description,
      "(ext, D43) The recipient of a confirmed confidential transfer sends up to its amount back to its sender: a new transfer, created as `POST /v1/transfers` creates one (201, or 202 for an agent's refund above its approval threshold), whose `refund_of` names the original. Either `amount` and `memo` (the server sees them for this request), or `sealed`: boxes sealed to a transfer prepared to the original's sender (`POST /v1/transfers/prepare`). The guardian refuses a refund that would take the refunds of the original above its amount (422 refund_exceeds_original)."
    ),
    HttpApiEndpoint.get("get", "/transfers/:transfer_id", {
      params: transferIdParams,
      success: TransferRecord,
      error: TransferNotFound
    }),
    HttpApiEndpoint.get("sealed", "/transfers/:transfer_id/sealed", {
      params: transferIdParams,
      success: SealedTransfer,
      error: TransferNotFound
    }).annotate(OpenApi.Description, "(ext, D18) The amount and memo sealed to the caller's own key.")
  )
  .middleware(Authorization)
  .prefix("/v1")
{}

const agentIdParams = { account_id: pathId("acct", () => AgentNotFound.of("with that id")) }
const transactionIdParams = { transaction_id: pathId("atx", () => TransactionNotFound.of("with that id")) }
const readTransactionIdParams = { transaction_id: pathId("atx", () => TransactionNotFound.of("with that id", "any")) }
const agentKeyIdParams = { ...agentIdParams, key_id: pathId("key", () => ApiKeyNotFound.of("with that id")) }

/**
 * Agents, spend policies and approvals (D21-D29): `/v1/accounts/me/agents`,
 * `/v1/agents/{account_id}/spend-policy`, `/v1/agents/transactions/...`.
 *
 * @since 0.1.0
 * @category groups
 */
export class AgentsGroup extends HttpApiGroup.make("agents")
  .add(
    HttpApiEndpoint.post("create", "/accounts/me/agents", {
      payload: CreateAgentRequest,
      success: AgentRecord.pipe(HttpApiSchema.status(201)),
      error: [InvalidRequest, InvalidPolicy, NotAgentOwner, AgentNameTaken, AgentLimitReached]
    }).middleware(Idempotency).annotate(
      OpenApi.Description,
      "D21: creates an agent account @owner/name with its own custodial wallet and its spend policy (D22)."
    ),
    HttpApiEndpoint.get("list", "/accounts/me/agents", { success: AgentList }).annotate(
      OpenApi.Description,
      "The agents of the caller's account (in the key's mode), oldest first: all of them, at most `AGENTS_PER_ACCOUNT_MAX` (D61)."
    ),
    HttpApiEndpoint.get("page", "/agents", {
      query: { limit: Schema.optionalKey(PageLimitQuery), offset: Schema.optionalKey(PageOffsetQuery) },
      success: AgentPage,
      error: InvalidRequest
    }).annotate(
      OpenApi.Description,
      "(ext, D61) The agents of the caller's account (in the key's mode), oldest first, one page at a time in D16's envelope; an agent key sees none."
    ),
    HttpApiEndpoint.get("getPolicy", "/agents/:account_id/spend-policy", {
      params: agentIdParams,
      success: SpendPolicyRecord,
      error: [AgentNotFound, NotAgentOwner]
    }).annotate(OpenApi.Description, "D29, D42: the agent's spend policy: its owner's, and the agent's own key for itself."),
    HttpApiEndpoint.post("createKey", "/agents/:account_id/keys", {
      params: agentIdParams,
      payload: CreateApiKeyRequest,
      success: CreatedAgentApiKey.pipe(HttpApiSchema.status(201)),
      error: [InvalidRequest, AgentNotFound, NotAgentOwner, ReauthenticationRequired]
    }).middleware(Idempotency).annotate(
      OpenApi.Description,
      "(ext, D44) An API key for the caller's agent, of the agent's mode; its value is in this answer only. Owner only (an agent key: 403 not_agent_owner); a dashboard session needs a recent passkey confirmation (403 reauthentication_required). A retry with the same Idempotency-Key answers 409 key_shown_once: the value is never kept."
    ),
    HttpApiEndpoint.get("listKeys", "/agents/:account_id/keys", {
      params: agentIdParams,
      success: ApiKeyList,
      error: [AgentNotFound, NotAgentOwner]
    }).annotate(OpenApi.Description, "(ext, D44) The agent's API keys, never their values, with last use and request count; owner only."),
    HttpApiEndpoint.post("revokeKey", "/agents/:account_id/keys/:key_id/revoke", {
      params: agentKeyIdParams,
      success: RevokedApiKey,
      error: [AgentNotFound, NotAgentOwner, ApiKeyNotFound]
    }).middleware(Idempotency).annotate(
      OpenApi.Description,
      "(ext, D44) Revokes one of the agent's keys: the next request with it answers 401. Revoking a revoked key answers the same; owner only."
    ),
    HttpApiEndpoint.post("rotateKey", "/agents/:account_id/keys/:key_id/rotate", {
      params: agentKeyIdParams,
      payload: RotateApiKeyRequest,
      success: RotatedAgentApiKey.pipe(HttpApiSchema.status(201)),
      error: [InvalidRequest, AgentNotFound, NotAgentOwner, ApiKeyNotFound, ReauthenticationRequired]
    }).middleware(Idempotency).annotate(
      OpenApi.Description,
      "(ext, D56) Replaces one of the agent's active keys in one step: a new key (named as the old one unless `name` is given) and the old key's revocation commit together, and the next request with the old key answers 401. Its value is in this answer only; a retry with the same Idempotency-Key answers 409 key_shown_once. A key already revoked, or not the agent's: 404 key_not_found. Owner only; a dashboard session needs a recent passkey confirmation."
    ),
    HttpApiEndpoint.patch("patchPolicy", "/agents/:account_id/spend-policy", {
      params: agentIdParams,
      payload: PatchSpendPolicyRequest,
      success: SpendPolicyRecord,
      error: [InvalidPolicy, AgentNotFound, NotAgentOwner]
    }).annotate(
      OpenApi.Description,
      "D24: changes only the fields present (null clears an optional one), validates the whole policy, applies to the next attempt."
    ),
    HttpApiEndpoint.get("pending", "/agents/transactions/pending", { success: PendingAgentTransactions }).annotate(
      OpenApi.Description,
      "D28: held transactions awaiting a decision, oldest first: the owner sees its agents', an agent key its own. No amounts."
    ),
    HttpApiEndpoint.get("getTransaction", "/agents/transactions/:transaction_id", {
      params: readTransactionIdParams,
      success: AgentTransactionRecord,
      error: TransactionNotFound
    }).annotate(
      OpenApi.Description,
      "(D42) A held transaction's state, never its amount: for its owner's key and the agent's own. Past its window it reads expired even before the sweep records it."
    ),
    HttpApiEndpoint.get("sealedTransaction", "/agents/transactions/:transaction_id/sealed", {
      params: transactionIdParams,
      success: SealedAgentTransaction,
      error: [TransactionNotFound, NotAgentOwner, LivemodeUnavailable]
    }).annotate(
      OpenApi.Description,
      "(ext) The held amount and memo sealed to the owner's key, for the owner's client to decrypt what it is asked to approve."
    ),
    HttpApiEndpoint.post("approve", "/agents/transactions/:transaction_id/approve", {
      params: transactionIdParams,
      success: AgentTransactionRecord,
      error: [
        TransactionNotFound,
        TransactionExpired,
        NotAgentOwner,
        PolicyViolation,
        RefundExceedsOriginal,
        InsufficientBalance,
        ApprovalInProgress,
        ApprovalAttemptsExhausted,
        LivemodeUnavailable,
        ServiceUnavailable
      ]
    }).middleware(Idempotency).annotate(
      OpenApi.Description,
      "D27: re-checks limits and balance now (and for a held refund, D43, what is left of its original), then signs and submits the transfer at once."
    ),
    HttpApiEndpoint.post("reject", "/agents/transactions/:transaction_id/reject", {
      params: transactionIdParams,
      success: AgentTransactionRecord,
      error: [TransactionNotFound, TransactionExpired, NotAgentOwner]
    }).middleware(Idempotency).annotate(OpenApi.Description, "D27: discards the held transaction; no funds move.")
  )
  .middleware(Authorization)
  .prefix("/v1")
{}

/**
 * `/v1/test`: the testnet faucet (ext).
 *
 * @since 0.1.0
 * @category groups
 */
export class TestGroup extends HttpApiGroup.make("test")
  .add(
    HttpApiEndpoint.post("faucet", "/test/faucet", {
      payload: FaucetRequest,
      success: FaucetGrant,
      error: [InvalidRequest, TestModeOnly, ServiceUnavailable]
    }).middleware(Idempotency).annotate(
      OpenApi.Description,
      "(ext) Mints test USDG and shields it into the caller's confidential balance; hc_test_ keys only."
    ),
    HttpApiEndpoint.get("grants", "/test/faucet/grants", {
      query: {
        limit: Schema.optionalKey(PageLimitQuery),
        offset: Schema.optionalKey(PageOffsetQuery)
      },
      success: FaucetGrantPage,
      error: [InvalidRequest, TestModeOnly, ServiceUnavailable]
    }).annotate(
      OpenApi.Description,
      "(ext, D50) The caller's faucet grants sent to the chain, newest first (amounts are public: a shield's always is); hc_test_ keys only."
    )
  )
  .middleware(Authorization)
  .prefix("/v1")
{}

const EventPage = Page(EventRecord).annotate({ identifier: "EventPage", description: "D59: events, newest first." })

/**
 * `/v1/events` (ext, D59): the account's recorded events; `/v1/events/stream`: as they happen,
 * as server-sent events (D58).
 *
 * @since 0.3.0
 * @category groups
 */
export class EventsGroup extends HttpApiGroup.make("events")
  .add(
    HttpApiEndpoint.get("list", "/events", {
      query: {
        limit: Schema.optionalKey(PageLimitQuery),
        offset: Schema.optionalKey(PageOffsetQuery),
        type: Schema.optionalKey(Schema.String.annotate({ description: "Only events of these types, comma-separated." }))
      },
      success: EventPage,
      error: [InvalidRequest, NotAgentOwner]
    }).annotate(
      OpenApi.Description,
      `(ext, D59) The account's events in the key's mode, newest first, as long as they are kept (D35); limit 1-${pageLimitMax} (default ${pageLimitDefault}). No amounts.`
    ),
    HttpApiEndpoint.get("get", "/events/:event_id", {
      params: { event_id: pathId("evt", () => EventNotFound.of("with that id")) },
      success: EventRecord,
      error: [EventNotFound, NotAgentOwner]
    }).annotate(OpenApi.Description, "(ext, D59) One event of the account in the key's mode; 404 `event_not_found` past retention.")
  )
  .add(
    HttpApiEndpoint.get("stream", "/events/stream", {
      query: {
        after: Schema.optionalKey(Schema.String.annotate({ description: "Continue after this event id or stream cursor (as `Last-Event-ID`)." })),
        types: Schema.optionalKey(Schema.String.annotate({ description: "Only these event types, comma-separated (D58)." }))
      },
      headers: {
        "last-event-id": Schema.optionalKey(Schema.String.annotate({ description: "Continue after this event id or stream cursor (SSE's reconnection header)." }))
      },
      // Server-sent events: `id: <event_id>`, `event: <type>`, `data: <the webhook payload>`,
      // blank line; `: keep-alive` comments. The server writes them itself (it returns the
      // response, so this schema does not encode them); clients decode each `data` as the
      // event's payload, so the typed client reads a `Stream` of payloads.
      success: HttpApiSchema.StreamSse({ data: EventPayload }),
      error: [InvalidRequest, NotAgentOwner]
    }).annotate(
      OpenApi.Description,
      "(ext) Server-sent events: every event a webhook of this account would receive (or those of `types`), in the key's mode, with the same payload, in commit order, as soon as it is recorded (D58). Resumable: `Last-Event-ID` (or `after`) continues after that event or cursor, with nothing skipped or repeated; without one, the stream starts now. Account keys only (an agent's events go to its owner, D30)."
    )
  )
  .middleware(Authorization)
  .prefix("/v1")
{}

/**
 * The public API. Every endpoint may also answer the errors listed on the API
 * itself (malformed requests, unknown routes, faults).
 *
 * @since 0.1.0
 * @category api
 */
export class PublicApi extends HttpApi.make("pps")
  .add(AccountsGroup)
  .add(TransfersGroup)
  .add(AgentsGroup)
  .add(TestGroup)
  .add(WebhooksGroup)
  .add(EventsGroup)
  .middleware(RequestValidation)
  .annotateMerge(OpenApi.annotations({
    title: "Private Payments Service",
    version: "1",
    description: "Confidential USDG transfers: amounts are encrypted and the service cannot read them.",
    transform: completeDocument
  }))
{}

/**
 * Schema of the health answers (outside `/v1`).
 *
 * @since 0.1.0
 * @category models
 */
export const HealthStatus = Schema.Struct({
  status: Schema.Literals(["ok", "starting", "unavailable"]),
  checks: Schema.optionalKey(Schema.Record(Schema.String, Schema.String))
})
