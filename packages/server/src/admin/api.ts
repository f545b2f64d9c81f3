/**
 * The admin API (ext): the operator's console (accounts and their keys, the account
 * directory, suspension, the audit log and webhook health, D60), served on its own
 * listener bound to loopback (`ADMIN_HOST`:`ADMIN_PORT`) and authenticated by
 * `ADMIN_TOKEN`. The `npm run -s admin --` command speaks it (docs/operations.md,
 * "The admin command"); tests and demos use it.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, HttpApiSecurity } from "effect/http-api"
import { AccountRecord, AccountType, KycStatus } from "@pps/api/Accounts"
import { Page, PageLimitQuery, PageOffsetQuery } from "@pps/api/Page"
import { OperatorAccount } from "../accounts/AccountStore.ts"
import { AuditAction, AuditRecord } from "../audit/AuditLog.ts"
import { WebhookHealthRecord } from "./WebhookHealth.ts"
import { ApiKeyRecord, Mode } from "@pps/api/ApiKeys"
import { RequestValidation } from "@pps/api/Api"
import { AccountNotFound, ApiKeyNotFound, HandleTaken, InvalidRequest, ServiceUnavailable, Unauthorized } from "@pps/api/Errors"
import { AdminWebhookLoopbackGroup } from "./webhookLoopback.ts"

/**
 * Bearer `ADMIN_TOKEN`.
 *
 * @since 0.1.0
 * @category middleware
 */
export class AdminAuthorization extends HttpApiMiddleware.Service<AdminAuthorization>()("server/admin/AdminAuthorization", {
  security: { bearer: HttpApiSecurity.bearer },
  error: Unauthorized
}) {}

const Name = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(100))

/**
 * @since 0.1.0
 * @category models
 */
export const CreatedAccount = Schema.Struct({
  account_id: Schema.String,
  handle: Schema.String,
  key_id: Schema.String,
  api_key: Schema.String
})

/**
 * @since 0.1.0
 * @category models
 */
export const CreatedKey = Schema.Struct({ key_id: Schema.String, name: Schema.String, mode: Mode, api_key: Schema.String })

const ColumnOutcome = Schema.Struct({
  resealed: Schema.Int,
  already_current: Schema.Int,
  changed_meanwhile: Schema.Int,
  remaining: Schema.Int,
  unopenable: Schema.Int,
  unopenable_ids: Schema.Array(Schema.String)
})

/**
 * D54: a re-seal's outcome (or the status, which opens nothing): the current KEK's id, the accepted
 * ones, per column what was done and what is left under another KEK.
 *
 * @since 0.12.0
 * @category models
 */
export const ResealOutcome = Schema.Struct({
  kek_id: Schema.String,
  accepted_kek_ids: Schema.Array(Schema.String),
  columns: Schema.Record(Schema.String, ColumnOutcome),
  remaining: Schema.Int
})

/**
 * D54: the custodial wallets as sealed under `WALLET_KEK` (no key opens here), for a backup that
 * proves itself on restore: each value, what it is bound to, and the address it must yield.
 *
 * @since 0.12.0
 * @category models
 */
export const SealedWallets = Schema.Struct({
  kek_id: Schema.String,
  wallets: Schema.Array(Schema.Struct({
    account_id: Schema.String,
    address: Schema.String,
    wallet_key_sealed: Schema.String.annotate({ description: "base64" })
  }))
})

/**
 * @since 0.1.0
 * @category groups
 */
export class AdminGroup extends HttpApiGroup.make("admin")
  .add(
    HttpApiEndpoint.post("createAccount", "/accounts", {
      payload: Schema.Struct({
        handle: Schema.String,
        type: Schema.optionalKey(Schema.Literals(["personal", "business"])),
        kyc_status: Schema.optionalKey(KycStatus)
      }),
      success: CreatedAccount.pipe(HttpApiSchema.status(201)),
      error: [InvalidRequest, HandleTaken]
    }),
    // D60: the operator's directory, oldest first, in D16's envelope.
    HttpApiEndpoint.get("listAccounts", "/accounts", {
      query: {
        limit: Schema.optionalKey(PageLimitQuery),
        offset: Schema.optionalKey(PageOffsetQuery),
        handle: Schema.optionalKey(Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(64))),
        type: Schema.optionalKey(AccountType),
        kyc_status: Schema.optionalKey(KycStatus),
        status: Schema.optionalKey(Schema.Literals(["active", "suspended"]))
      },
      success: Page(OperatorAccount),
      error: InvalidRequest
    }),
    HttpApiEndpoint.post("suspendAccount", "/accounts/:account_id/suspend", {
      params: { account_id: Schema.String },
      success: OperatorAccount,
      error: AccountNotFound
    }),
    HttpApiEndpoint.post("reactivateAccount", "/accounts/:account_id/reactivate", {
      params: { account_id: Schema.String },
      success: OperatorAccount,
      error: AccountNotFound
    }),
    // D60: read-only; the holder manages its subscriptions through /v1/webhooks.
    HttpApiEndpoint.get("accountWebhooks", "/accounts/:account_id/webhooks", {
      params: { account_id: Schema.String },
      success: Schema.Struct({ data: Schema.Array(WebhookHealthRecord) }),
      error: AccountNotFound
    }),
    // D60: the audit log, newest first.
    HttpApiEndpoint.get("audit", "/audit", {
      query: {
        limit: Schema.optionalKey(PageLimitQuery),
        offset: Schema.optionalKey(PageOffsetQuery),
        account_id: Schema.optionalKey(Schema.String),
        action: Schema.optionalKey(AuditAction)
      },
      success: Page(AuditRecord),
      error: InvalidRequest
    }),
    // The account record's fields, and (D60) its status, owner and suspension.
    HttpApiEndpoint.get("getAccount", "/accounts/:account_id", {
      params: { account_id: Schema.String },
      success: OperatorAccount,
      error: AccountNotFound
    }),
    HttpApiEndpoint.post("setKyc", "/accounts/:account_id/kyc", {
      params: { account_id: Schema.String },
      payload: Schema.Struct({ status: KycStatus }),
      success: AccountRecord,
      error: AccountNotFound
    }),
    // D41 (ext): a one-time link (24 h) with which the holder enrolls a dashboard passkey.
    HttpApiEndpoint.post("inviteAccount", "/accounts/:account_id/invites", {
      params: { account_id: Schema.String },
      success: Schema.Struct({ account_id: Schema.String, url: Schema.String, expires_at: Schema.String }).pipe(HttpApiSchema.status(201)),
      error: AccountNotFound
    }),
    HttpApiEndpoint.post("createKey", "/keys", {
      payload: Schema.Struct({ account_id: Schema.String, name: Name, mode: Schema.optionalKey(Mode) }),
      success: CreatedKey,
      // 400 `mode`: an agent's keys are of the agent's mode only (D38).
      error: [AccountNotFound, InvalidRequest]
    }),
    HttpApiEndpoint.get("listKeys", "/accounts/:account_id/keys", {
      params: { account_id: Schema.String },
      success: Schema.Struct({ data: Schema.Array(ApiKeyRecord) }),
      error: AccountNotFound
    }),
    HttpApiEndpoint.post("revokeKey", "/keys/:key_id/revoke", {
      params: { key_id: Schema.String },
      success: Schema.Struct({ key_id: Schema.String, revoked: Schema.Literal(true) }),
      error: ApiKeyNotFound
    }),
    HttpApiEndpoint.post("resealWalletKek", "/wallet-kek/reseal", { success: ResealOutcome, error: ServiceUnavailable }),
    HttpApiEndpoint.get("walletKekStatus", "/wallet-kek/status", { success: ResealOutcome, error: ServiceUnavailable }),
    HttpApiEndpoint.get("sealedWallets", "/wallet-kek/sealed-wallets", { success: SealedWallets, error: ServiceUnavailable })
  )
  .middleware(AdminAuthorization)
  .prefix("/admin")
{}

/**
 * @since 0.1.0
 * @category api
 */
export class AdminApi extends HttpApi.make("pps-admin")
  .add(AdminGroup)
  .add(AdminWebhookLoopbackGroup.middleware(AdminAuthorization))
  .middleware(RequestValidation)
{}

