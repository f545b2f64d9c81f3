/**
 * The admin API (ext): operators' account and key management, served on its
 * own listener bound to loopback (`ADMIN_HOST`:`ADMIN_PORT`) and authenticated by
 * `ADMIN_TOKEN`. The `pnpm admin` command speaks it; tests and demos use it.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, HttpApiSecurity } from "effect/http-api"
import { AccountRecord, KycStatus } from "@pps/api/Accounts"
import { ApiKeyRecord, Mode } from "@pps/api/ApiKeys"
import { RequestValidation } from "@pps/api/Api"
import { AccountNotFound, ApiKeyNotFound, HandleTaken, InvalidRequest, Unauthorized } from "@pps/api/Errors"
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
    HttpApiEndpoint.get("getAccount", "/accounts/:account_id", {
      params: { account_id: Schema.String },
      success: AccountRecord,
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
    })
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

