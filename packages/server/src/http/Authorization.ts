/**
 * The Authorization middleware: verifies the bearer API key (D8), applies the
 * per-key rate limit (D7) and provides the caller as `CurrentPrincipal`.
 *
 * Every refusal is the same 401 `unauthorized`: the response never tells a
 * malformed key from an unknown or revoked one; the log line does, by reason.
 *
 * A request without an `Authorization` header may instead carry the dashboard's
 * session cookie (D41): its principal is the session's account in the
 * session's mode; a state-changing request must then come from the dashboard's
 * origin with the session's CSRF token, else 403 `forbidden` (ext).
 *
 * @since 0.1.0
 */
import { Effect, Layer, Option, Redacted } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { ApiKeys } from "../apikeys/ApiKeys.ts"
import { Authorization, CurrentPrincipal } from "@pps/api/Api"
import { RateLimited, Unauthorized } from "@pps/api/Errors"
import { DashboardAuth } from "../dashboard/DashboardAuth.ts"
import { DashboardConfig } from "../dashboard/DashboardConfig.ts"
import { sessionOfRequest } from "../dashboard/http.ts"
import { RateLimiter } from "./RateLimiter.ts"

/**
 * @since 0.1.0
 * @category layers
 */
export const AuthorizationLive = Layer.effect(
  Authorization,
  Effect.gen(function*() {
    const apiKeys = yield* ApiKeys
    const limiter = yield* RateLimiter
    const dashboardAuth = yield* DashboardAuth
    const dashboardConfig = yield* DashboardConfig
    return Authorization.of({
      bearer: (httpEffect, { credential }) =>
        Effect.gen(function*() {
          const presented = Redacted.value(credential)
          // No Authorization header: the dashboard's session cookie may stand in for a
          // key (D41), with its origin and CSRF token checked on state changes.
          const fromSession = presented === "" ? yield* sessionOfRequest(yield* HttpServerRequest.HttpServerRequest).pipe(
                Effect.provideService(DashboardAuth, dashboardAuth),
                Effect.provideService(DashboardConfig, dashboardConfig),
                Effect.orDie
              )
            : Option.none()
          if (Option.isSome(fromSession) && "refusal" in fromSession.value) {
            return HttpServerResponse.jsonUnsafe({ error: { code: "forbidden", message: fromSession.value.refusal } }, { status: 403 })
          }
          const principal = Option.isSome(fromSession) && "session" in fromSession.value ? fromSession.value.session.principal : yield* apiKeys.verify(presented).pipe(
            Effect.catchTag("InvalidApiKey", (error) =>
              Effect.logInfo("api key refused").pipe(
                Effect.annotateLogs("reason", error.reason),
                Effect.andThen(Effect.fail(Unauthorized.of()))
              )),
            // A database fault is not the caller's fault: 500, not 401.
            Effect.catchTag("SqlError", Effect.die)
          )
          const decision = yield* limiter.take(principal.keyId)
          if (!decision.allowed) {
            // Answered here rather than failed with RateLimited, because the
            // response must carry Retry-After; the body is RateLimited's envelope.
            return HttpServerResponse.jsonUnsafe({ error: RateLimited.of().error }, {
              status: 429,
              headers: { "retry-after": String(decision.retryAfterSeconds) }
            })
          }
          return yield* Effect.provideService(httpEffect, CurrentPrincipal, principal).pipe(
            Effect.annotateLogs({ key_id: principal.keyId, account_id: principal.accountId })
          )
        })
    })
  })
)
