/**
 * The public API's contract: the `/v1` HttpApi, its groups and its middleware
 * tags. Handlers live with their concern (`<concern>/http.ts`); middleware
 * implementations in this folder. Nothing here touches SQL.
 *
 * @since 0.1.0
 */
import { Context, Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSecurity, OpenApi } from "effect/http-api"
import { AccountRecord } from "../accounts/domain.ts"
import type { Principal } from "../apikeys/domain.ts"
import {
  IdempotencyKeyInProgress,
  IdempotencyKeyReused,
  InternalError,
  InvalidRequest,
  PayloadTooLarge,
  RateLimited,
  Unauthorized
} from "./errors.ts"

/**
 * The caller authenticated by the API key of the current request.
 *
 * @since 0.1.0
 * @category services
 */
export class CurrentPrincipal extends Context.Service<CurrentPrincipal, Principal>()("server/http/CurrentPrincipal") {}

/**
 * Bearer API key authentication (D8) and the per-key rate limit (D7).
 *
 * @since 0.1.0
 * @category middleware
 */
export class Authorization extends HttpApiMiddleware.Service<Authorization, { provides: CurrentPrincipal }>()(
  "server/http/Authorization",
  { security: { bearer: HttpApiSecurity.bearer }, error: [Unauthorized, RateLimited] }
) {}

/**
 * Turns request decoding failures into 400 `invalid_request` with `param`
 * (without it HttpApi answers an empty 400). It also declares the errors any
 * endpoint can answer outside its handler (413 from the body limit, 500 for a
 * fault), so the OpenAPI document lists them on every operation.
 *
 * @since 0.1.0
 * @category middleware
 */
export class RequestValidation extends HttpApiMiddleware.Service<RequestValidation>()("server/http/RequestValidation", {
  error: [InvalidRequest, PayloadTooLarge, InternalError]
}) {}

/**
 * D6: `Idempotency-Key` on POST endpoints.
 *
 * @since 0.1.0
 * @category middleware
 */
export class Idempotency extends HttpApiMiddleware.Service<Idempotency, { requires: CurrentPrincipal }>()(
  "server/http/Idempotency",
  { error: [InvalidRequest, IdempotencyKeyReused, IdempotencyKeyInProgress] }
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
  .middleware(RequestValidation)
  .annotateMerge(OpenApi.annotations({
    title: "Private Payments Service",
    version: "1",
    description: "Confidential USDG transfers: amounts are encrypted and the service cannot read them."
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
