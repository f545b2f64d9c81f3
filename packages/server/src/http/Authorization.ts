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
 * Who a request's credentials name is `RequestAuthentication`'s one answer: the
 * middleware asks it once per request, and a response that outlives its request
 * (the live event stream) asks it again while it runs, so a revoked key or an ended
 * session stops that response too (SPEC Authentication 5).
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder, HttpApiSecurity } from "effect/http-api"
import type { SqlError } from "effect/sql"
import { ApiKeys } from "../apikeys/ApiKeys.ts"
import { Authorization, CurrentPrincipal } from "@pps/api/Api"
import type { Principal } from "@pps/api/ApiKeys"
import { AccountSuspended, RateLimited, Unauthorized } from "@pps/api/Errors"
import { Accounts } from "../accounts/Accounts.ts"
import { CurrentSession, DashboardAuth, type DashboardSession } from "../dashboard/DashboardAuth.ts"
import { DashboardConfig } from "../dashboard/DashboardConfig.ts"
import { sessionOfRequest } from "../dashboard/http.ts"
import { RateLimiter } from "./RateLimiter.ts"

/**
 * What a request's credentials name now.
 *
 * @since 0.5.0
 * @category models
 */
export type Authentication =
  /** `session`: the dashboard session that stands in for a key, when one does. */
  | { readonly _tag: "Principal"; readonly principal: Principal; readonly session?: DashboardSession }
  /** 401 `unauthorized` whatever the reason (D8); the reason went to the log. */
  | { readonly _tag: "Unauthorized" }
  /** 403 `forbidden`: a session's state-changing request without its origin or CSRF token. */
  | { readonly _tag: "Forbidden"; readonly message: string }
  /** 403 `account_suspended` (D60): valid credentials of a suspended account (or of its agent). */
  | { readonly _tag: "Suspended" }

/**
 * 429 `rate_limited` in D1's envelope with `Retry-After`. Answered as a response rather
 * than failed with RateLimited, because the response must carry the header; the body is
 * RateLimited's envelope (the envelope middleware adds the request id).
 *
 * @since 0.5.0
 * @category constructors
 */
export const rateLimitedResponse = (retryAfterSeconds: number, message?: string) =>
  HttpServerResponse.jsonUnsafe({ error: RateLimited.of(message).error }, {
    status: 429,
    headers: { "retry-after": String(retryAfterSeconds) }
  })

/**
 * @since 0.5.0
 * @category services
 */
export class RequestAuthentication extends Context.Service<RequestAuthentication, {
  /**
   * Who the request's credentials name now: `presented` is its bearer value ("" without an
   * `Authorization` header, when the dashboard's session cookie may stand in).
   * `countUse: false` for a re-check, which is not a request of the key's; nor is it use of
   * a session (its idle clock is not touched).
   */
  readonly authenticate: (
    request: HttpServerRequest.HttpServerRequest,
    presented: string,
    options?: { readonly countUse?: boolean }
  ) => Effect.Effect<Authentication, SqlError.SqlError>
  /**
   * For a response that outlives its request: an effect that answers, each time it runs,
   * whether the current request's credentials still name `principal` (the key not revoked,
   * the session not ended). Cheap in the embedded mode (the verified-key cache, which a
   * revocation evicts before it answers); one indexed read with several nodes.
   */
  readonly recheck: (principal: Principal) => Effect.Effect<
    Effect.Effect<boolean, SqlError.SqlError>,
    never,
    HttpServerRequest.HttpServerRequest | HttpServerRequest.ParsedSearchParams
  >
}>()("server/http/RequestAuthentication") {
  static readonly layer = Layer.effect(
    RequestAuthentication,
    Effect.gen(function*() {
      const apiKeys = yield* ApiKeys
      const dashboardAuth = yield* DashboardAuth
      const dashboardConfig = yield* DashboardConfig
      const accounts = yield* Accounts
      const authenticate = (
        request: HttpServerRequest.HttpServerRequest,
        presented: string,
        options?: { readonly countUse?: boolean }
      ): Effect.Effect<Authentication, SqlError.SqlError> =>
        Effect.gen(function*() {
          // No Authorization header: the dashboard's session cookie may stand in for a
          // key (D41), with its origin and CSRF token checked on state changes.
          if (presented === "") {
            // A re-check (an open event stream) is not the holder using the session: it must
            // not keep the session from idling out.
            const fromSession = yield* sessionOfRequest(request, { touch: options?.countUse !== false }).pipe(
              Effect.provideService(DashboardAuth, dashboardAuth),
              Effect.provideService(DashboardConfig, dashboardConfig)
            )
            if (Option.isSome(fromSession)) {
              if ("refusal" in fromSession.value) return { _tag: "Forbidden", message: fromSession.value.refusal } as const
              const session = fromSession.value.session
              // D60: a session of a suspended account is refused like its keys.
              if (yield* accounts.isSuspended(session.accountId)) return { _tag: "Suspended" } as const
              return { _tag: "Principal", principal: session.principal, session } as const
            }
          }
          return yield* apiKeys.verify(presented, options).pipe(
            Effect.map((principal) => ({ _tag: "Principal", principal }) as const),
            Effect.catchTag("InvalidApiKey", (error) =>
              Effect.logInfo("api key refused").pipe(
                Effect.annotateLogs("reason", error.reason),
                Effect.as({ _tag: "Unauthorized" } as const)
              )),
            Effect.catchTag("SuspendedAccountKey", (error) =>
              Effect.logInfo("api key refused").pipe(
                Effect.annotateLogs({ reason: "account_suspended", account_id: error.accountId }),
                Effect.as({ _tag: "Suspended" } as const)
              ))
          )
        })
      return RequestAuthentication.of({
        authenticate,
        recheck: (principal) =>
          Effect.gen(function*() {
            const request = yield* HttpServerRequest.HttpServerRequest
            // The same decoding of the same header as the middleware's.
            const presented = Redacted.value(yield* HttpApiBuilder.securityDecode(HttpApiSecurity.bearer))
            return authenticate(request, presented, { countUse: false }).pipe(
              Effect.map((found) => found._tag === "Principal" && found.principal.keyId === principal.keyId)
            )
          })
      })
    })
  )
}

/**
 * @since 0.1.0
 * @category layers
 */
export const AuthorizationLive = Layer.effect(
  Authorization,
  Effect.gen(function*() {
    const authentication = yield* RequestAuthentication
    const limiter = yield* RateLimiter
    return Authorization.of({
      bearer: (httpEffect, { credential }) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const found = yield* authentication.authenticate(request, Redacted.value(credential)).pipe(
            // A database fault is not the caller's fault: 500, not 401.
            Effect.catchTag("SqlError", Effect.die)
          )
          if (found._tag === "Forbidden") {
            return HttpServerResponse.jsonUnsafe({ error: { code: "forbidden", message: found.message } }, { status: 403 })
          }
          if (found._tag === "Unauthorized") return yield* Effect.fail(Unauthorized.of())
          if (found._tag === "Suspended") return yield* Effect.fail(AccountSuspended.of())
          const principal = found.principal
          const decision = yield* limiter.take(principal.keyId)
          if (!decision.allowed) return rateLimitedResponse(decision.retryAfterSeconds)
          return yield* Effect.provideService(httpEffect, CurrentPrincipal, principal).pipe(
            Effect.provideService(CurrentSession, Option.fromNullishOr(found.session)),
            Effect.annotateLogs({ key_id: principal.keyId, account_id: principal.accountId })
          )
        })
    })
  })
).pipe(Layer.provideMerge(RequestAuthentication.layer))
