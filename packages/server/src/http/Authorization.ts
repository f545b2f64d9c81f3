/**
 * The Authorization middleware: verifies the bearer API key (D8), applies the
 * per-key rate limit (D7) and provides the caller as `CurrentPrincipal`.
 *
 * Every refusal is the same 401 `unauthorized`: the response never tells a
 * malformed key from an unknown or revoked one; the log line does, by reason.
 *
 * @since 0.1.0
 */
import { Effect, Layer, Redacted } from "effect"
import { HttpServerResponse } from "effect/http"
import { ApiKeys } from "../apikeys/ApiKeys.ts"
import { Authorization, CurrentPrincipal } from "@pps/api/Api"
import { RateLimited, Unauthorized } from "@pps/api/Errors"
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
    return Authorization.of({
      bearer: (httpEffect, { credential }) =>
        Effect.gen(function*() {
          const principal = yield* apiKeys.verify(Redacted.value(credential)).pipe(
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
