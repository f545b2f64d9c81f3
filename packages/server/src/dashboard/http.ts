/**
 * The dashboard on the public listener (D41): the page itself at `/dashboard`
 * (the files `packages/dashboard` builds, read once at start) and its
 * session-only endpoints under `/dashboard/api` (ext): passkey ceremonies,
 * sessions, passkeys, and API keys created and revoked by the holder.
 *
 * Every answer carries the page's security headers: a Content-Security-Policy
 * without inline script (`script-src 'self'`), no framing, no referrer, no
 * sniffing; `Cache-Control: no-store` on the endpoints. Every state-changing
 * request must come from the dashboard's own origin (`Origin` header); with a
 * session it must also carry the session's CSRF token in `X-CSRF-Token`. Sign-in
 * steps are rate-limited per client address (behind `TRUSTED_PROXIES`, the
 * address `X-Forwarded-For` names; IPv6 by /64). Adding or removing a passkey and
 * creating an API key need a recent passkey assertion (step-up, 403
 * `reauthentication_required` otherwise). API keys never go to the page
 * except the one just created, once.
 *
 * The same session cookie authenticates the page's `/v1` calls (see
 * `http/Authorization.ts`, `sessionPrincipal`).
 *
 * @since 0.4.0
 */
import { Accounts } from "../accounts/Accounts.ts"
import { AuditLog } from "../audit/AuditLog.ts"
import { Clock, Effect, Layer, Option, Redacted, Schema } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { SqlError } from "effect/sql"
import type { AuthenticationResponseJSON, RegistrationResponseJSON } from "@simplewebauthn/server"
import { ApiKeys } from "../apikeys/ApiKeys.ts"
import { csrfTokenMatches, DashboardAuth, type DashboardAuthError, type DashboardSession, isSteppedUp, sessionAbsoluteMs } from "./DashboardAuth.ts"
import { AccountSuspended, ReauthenticationRequired } from "@pps/api/Errors"
import { CreateApiKeyRequest } from "@pps/api/ApiKeys"
import { DashboardConfig } from "./DashboardConfig.ts"
import { fileResponse, readBuiltPage } from "./BuiltPage.ts"
import { addressBucket, clientAddress } from "../http/ClientAddress.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import { answerServiceUnavailable } from "../platform/Unavailable.ts"

/**
 * The cookie that carries a session: `__Host-pps_session` when it is `Secure`
 * (an https origin), so the browser takes it only with `Secure`, `Path=/` and no
 * `Domain` (a sibling subdomain cannot plant or shadow it); `pps_session` on
 * http://localhost, where a `__Host-` cookie could not be set.
 *
 * @since 0.4.0
 * @category constructors
 */
export const sessionCookieName = (secure: boolean) => secure ? "__Host-pps_session" : "pps_session"

/**
 * The header that carries a session's CSRF token.
 *
 * @since 0.4.0
 * @category constants
 */
export const csrfHeaderName = "x-csrf-token"

/** Sign-in attempts (options and verify, enrollment included) per client address and window. */
const signInAttemptsMax = 30
const signInWindowMs = 5 * 60 * 1000
/**
 * Client addresses the sign-in limiter tracks at once. Beyond it, new addresses
 * share one overflow bucket until the next sweep: a flood of source addresses
 * (cheap with IPv6, even bucketed by /64) cannot grow the map without bound, at
 * the price that during such a flood newcomers are limited together.
 */
const signInTrackedAddressesMax = 10_000
const overflowBucket = "overflow"

const contentSecurityPolicy = [
  "default-src 'self'",
  // 'wasm-unsafe-eval' lets the page compile the crypto backend's WebAssembly; it does not allow eval of script.
  "script-src 'self' 'wasm-unsafe-eval'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'"
].join("; ")

/**
 * The headers every dashboard answer carries.
 *
 * @since 0.4.0
 * @category constants
 */
export const securityHeaders: Readonly<Record<string, string>> = {
  "content-security-policy": contentSecurityPolicy,
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
  "permissions-policy": "camera=(), microphone=(), geolocation=(), payment=()"
}

const withHeaders = (response: HttpServerResponse.HttpServerResponse, secure: boolean) =>
  HttpServerResponse.setHeaders(response, secure ? { ...securityHeaders, "strict-transport-security": "max-age=31536000" } : securityHeaders)

const json = (body: unknown, status = 200) =>
  HttpServerResponse.jsonUnsafe(body, { status, headers: { "cache-control": "no-store" } })

const failure = (status: number, code: string, message: string) => json({ error: { code, message } }, status)

const authFailure = (error: DashboardAuthError) => {
  switch (error.reason) {
    case "invite_invalid":
      return failure(404, "invite_invalid", error.message)
    case "passkey_not_found":
      return failure(404, "passkey_not_found", error.message)
    case "last_passkey":
      return failure(409, "last_passkey", error.message)
    default:
      return failure(401, "unauthorized", error.message)
  }
}

const notSignedIn = () => failure(401, "unauthorized", "Sign in to the dashboard first.")

const isStateChanging = (method: string) => method !== "GET" && method !== "HEAD"

/** A WebAuthn answer as the browser half sends it; the verifier checks every byte. */
const CredentialBase = {
  id: Schema.String,
  rawId: Schema.String,
  type: Schema.Literal("public-key"),
  clientExtensionResults: Schema.Struct({}),
  authenticatorAttachment: Schema.optionalKey(Schema.Literals(["platform", "cross-platform"]))
}
const Transport = Schema.Literals(["ble", "hybrid", "internal", "nfc", "usb"])
const RegistrationResponse = Schema.Struct({
  ...CredentialBase,
  response: Schema.Struct({
    clientDataJSON: Schema.String,
    attestationObject: Schema.String,
    authenticatorData: Schema.optionalKey(Schema.String),
    transports: Schema.optionalKey(Schema.Array(Transport)),
    publicKeyAlgorithm: Schema.optionalKey(Schema.Number),
    publicKey: Schema.optionalKey(Schema.String)
  })
})
const AuthenticationResponse = Schema.Struct({
  ...CredentialBase,
  response: Schema.Struct({
    clientDataJSON: Schema.String,
    authenticatorData: Schema.String,
    signature: Schema.String,
    userHandle: Schema.optionalKey(Schema.String)
  })
})
const PasskeyName = Schema.String.check(Schema.isMaxLength(64))
const EnrollOptionsRequest = Schema.Struct({ invite: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(128)) })
const EnrollVerifyRequest = Schema.Struct({ response: RegistrationResponse, name: Schema.optionalKey(PasskeyName) })
const SignInVerifyRequest = Schema.Struct({ response: AuthenticationResponse })
const StepUpVerifyRequest = SignInVerifyRequest

const invalidBody = (message: string) => failure(400, "invalid_request", message)

/** Decodes the JSON body, or answers 400 `invalid_request`. */
const body = <A, I, R>(schema: Schema.Codec<A, I>, onValid: (value: A) => Effect.Effect<HttpServerResponse.HttpServerResponse, never, R>) =>
  HttpServerRequest.schemaBodyJson(schema).pipe(
    Effect.matchEffect({
      onFailure: () => Effect.succeed(invalidBody("The request body is not what this endpoint takes.")),
      onSuccess: onValid
    })
  )

/**
 * Per-node fixed-window counter of sign-in attempts by client address bucket
 * (`addressBucket`). Expired windows are swept at most once per window length,
 * not on every attempt (a walk of the whole map per attempt is quadratic under
 * many addresses); an expired window met before the sweep starts afresh.
 *
 * @since 0.4.0
 * @category constructors
 */
export const makeSignInLimiter = () => {
  const windows = new Map<string, { startedMs: number; count: number }>()
  let sweptMs = 0
  return (address: string) =>
    Effect.map(Clock.currentTimeMillis, (nowMs) => {
      if (nowMs - sweptMs >= signInWindowMs) {
        for (const [key, window] of windows) if (nowMs - window.startedMs >= signInWindowMs) windows.delete(key)
        sweptMs = nowMs
      }
      const bucket = addressBucket(address)
      const key = windows.has(bucket) || windows.size < signInTrackedAddressesMax ? bucket : overflowBucket
      const known = windows.get(key)
      const window = known === undefined || nowMs - known.startedMs >= signInWindowMs ? { startedMs: nowMs, count: 0 } : known
      window.count += 1
      windows.set(key, window)
      return window.count <= signInAttemptsMax
        ? Option.none<number>()
        : Option.some(Math.max(1, Math.ceil((window.startedMs + signInWindowMs - nowMs) / 1000)))
    })
}

/**
 * Resolves the session a request's cookie stands for and, on a state-changing
 * request, checks its origin and CSRF token. `None` when the request carries no
 * live session; `Some(Left)` with the refusal when the checks fail. `touch: false`
 * leaves the session's idle clock alone (a re-check, not a use).
 *
 * @since 0.4.0
 * @category constructors
 */
export const sessionOfRequest = (request: HttpServerRequest.HttpServerRequest, options?: { readonly touch?: boolean }) =>
  Effect.gen(function*() {
    const { origin, secureCookie } = yield* DashboardConfig
    const token = request.cookies[sessionCookieName(secureCookie)]
    if (token === undefined || token === "") return Option.none<{ readonly session: DashboardSession } | { readonly refusal: string }>()
    const auth = yield* DashboardAuth
    const session = yield* auth.authenticate(token, options)
    if (Option.isNone(session)) return Option.none()
    if (isStateChanging(request.method)) {
      if (request.headers["origin"] !== origin) return Option.some({ refusal: "The request did not come from the dashboard's origin." })
      if (!csrfTokenMatches(session.value, request.headers[csrfHeaderName])) {
        return Option.some({ refusal: "The request's CSRF token is missing or wrong; reload the page." })
      }
    }
    return Option.some({ session: session.value })
  })

/**
 * The (method, path) pairs of the dashboard, for the route table.
 *
 * @since 0.4.0
 * @category constants
 */
export const dashboardRoutePaths = [
  ["GET", "/dashboard/*"],
  ["POST", "/dashboard/api/enroll/options"],
  ["POST", "/dashboard/api/enroll/verify"],
  ["POST", "/dashboard/api/sign-in/options"],
  ["POST", "/dashboard/api/sign-in/verify"],
  ["GET", "/dashboard/api/session"],
  ["GET", "/dashboard/api/session-state"],
  ["POST", "/dashboard/api/sign-out"],
  ["POST", "/dashboard/api/sign-out-everywhere"],
  ["GET", "/dashboard/api/sessions"],
  ["GET", "/dashboard/api/passkeys"],
  ["POST", "/dashboard/api/step-up/options"],
  ["POST", "/dashboard/api/step-up/verify"],
  ["POST", "/dashboard/api/passkeys/options"],
  ["POST", "/dashboard/api/passkeys/verify"],
  ["DELETE", "/dashboard/api/passkeys/:credential_id"],
  ["POST", "/dashboard/api/api-keys"],
  ["POST", "/dashboard/api/api-keys/:key_id/revoke"]
] as const

/** What the routes share, built once by the layer. */
interface RoutesContext {
  readonly auth: DashboardAuth["Service"]
  readonly config: DashboardConfig["Service"]
  readonly apiKeys: ApiKeys["Service"]
  readonly auditLog: AuditLog["Service"]
  readonly accounts: Accounts["Service"]
  readonly page: ReturnType<typeof readBuiltPage>
  readonly limitSignIn: ReturnType<typeof makeSignInLimiter>
}

type Handler<E, R> = (session: DashboardSession, request: HttpServerRequest.HttpServerRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>

/**
 * A store the step needed is down: the dashboard's 503 `service_unavailable` (the envelope adds
 * `Retry-After`), with the failed dependency and step in the log; the page retries.
 */
const orUnavailable = (operation: string) =>
<E, R>(
  self: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, Exclude<E, SqlError.SqlError>, R> =>
  Effect.catchIf(
    self,
    (error): error is Extract<E, SqlError.SqlError> => SqlError.isSqlError(error),
    (error) =>
      answerServiceUnavailable(Effect.fail(Unavailable.fromSqlError(operation)(error))).pipe(
        Effect.catch((answer) => Effect.succeed(failure(503, "service_unavailable", answer.message)))
      ),
    (error) => Effect.fail(error as Exclude<E, SqlError.SqlError>)
  )

const cookie = ({ config }: RoutesContext, value: string, maxAgeMs: number) =>
  HttpServerResponse.setCookieUnsafe(sessionCookieName(config.secureCookie), value, {
    httpOnly: true,
    sameSite: "strict",
    secure: config.secureCookie,
    path: "/",
    maxAge: `${Math.max(0, Math.floor(maxAgeMs / 1000))} seconds`
  })

const headers = ({ config }: RoutesContext) => (response: HttpServerResponse.HttpServerResponse) => withHeaders(response, config.secureCookie)

/** A sign-in step: same-origin only, rate-limited by client address. */
const signInStep = <R>(
  context: RoutesContext,
  handler: (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse, never, R>
) =>
(request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    const { config } = context
    if (request.headers["origin"] !== config.origin) return failure(403, "forbidden", "The request did not come from the dashboard's origin.")
    const address = clientAddress(Option.getOrUndefined(request.remoteAddress ?? Option.none()), request.headers["x-forwarded-for"], config.trustedProxies)
    const retryAfter = yield* context.limitSignIn(address)
    if (Option.isSome(retryAfter)) {
      return HttpServerResponse.setHeader(failure(429, "rate_limited", "Too many sign-in attempts; wait a few minutes."), "retry-after", String(retryAfter.value))
    }
    return yield* handler(request)
  }).pipe(Effect.map(headers(context)))

/** A step of a signed-in holder. */
const signedIn = <E, R>(context: RoutesContext, handler: Handler<E, R>) => (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    const resolved = yield* sessionOfRequest(request).pipe(
      Effect.provideService(DashboardAuth, context.auth),
      Effect.provideService(DashboardConfig, context.config)
    )
    if (Option.isNone(resolved)) return notSignedIn()
    if ("refusal" in resolved.value) return failure(403, "forbidden", resolved.value.refusal)
    // D60: a suspended account's session is refused like its keys.
    if (yield* context.accounts.isSuspended(resolved.value.session.accountId)) return json({ error: AccountSuspended.of().error }, 403)
    return yield* handler(resolved.value.session, request)
  }).pipe(orUnavailable("DashboardAuth.authenticate"), Effect.map(headers(context)))

/**
 * A step that gives lasting access (a passkey, an API key): the session must
 * have been verified by a passkey assertion within `stepUpMaxAgeMs`, else 403
 * `reauthentication_required`, on which the page runs the step-up ceremony.
 */
const steppedUp = <E, R>(context: RoutesContext, handler: Handler<E, R>) =>
  signedIn(context, (session, request) =>
    Effect.flatMap(Clock.currentTimeMillis, (nowMs) =>
      isSteppedUp(session, nowMs)
        ? handler(session, request)
        : Effect.succeed(json({ error: ReauthenticationRequired.of().error }, 403))))

const opened = (context: RoutesContext) => (session: { readonly token: string; readonly csrfToken: string; readonly expiresAtMs: number }) =>
  cookie(context, session.token, sessionAbsoluteMs)(json({ csrf_token: session.csrfToken, expires_at: new Date(session.expiresAtMs).toISOString() }))

const signedOut = (context: RoutesContext) => cookie(context, "", 0)(json({ signed_out: true }))

const userAgentOf = (request: HttpServerRequest.HttpServerRequest) => request.headers["user-agent"] ?? "unknown"

const pageFile = ({ page }: RoutesContext, request: HttpServerRequest.HttpServerRequest) => {
  const relative = (request.url.split("?")[0] ?? "").replace(/^\/dashboard\/?/, "")
  // Any other path is a route of the page itself: it gets the page, which routes it.
  const file = page.get(relative) ?? page.get("index.html")
  if (file === undefined) {
    return failure(503, "service_unavailable", "The dashboard has not been built on this node (pnpm --filter @pps/dashboard build).")
  }
  const immutable = relative.startsWith("assets/") && page.has(relative)
  return fileResponse(file, request.headers["accept-encoding"], immutable ? "public, max-age=31536000, immutable" : "no-cache")
}

/** Enrollment with an invite and sign-in with a passkey. */
const signInRoutes = (context: RoutesContext) => {
  const { auth } = context
  return Layer.mergeAll(
    HttpRouter.add("POST", "/dashboard/api/enroll/options", signInStep(context, () =>
      body(EnrollOptionsRequest, ({ invite }) =>
        auth.enrollOptions(invite).pipe(Effect.map((options) => json(options)), Effect.catchTag("DashboardAuthError", (error) => Effect.succeed(authFailure(error))), orUnavailable("DashboardAuth.enrollOptions"))))),
    HttpRouter.add("POST", "/dashboard/api/enroll/verify", signInStep(context, (request) =>
      body(EnrollVerifyRequest, ({ response, name }) =>
        auth.enrollVerify(response as RegistrationResponseJSON, name ?? "Passkey", userAgentOf(request)).pipe(
          Effect.map(opened(context)),
          Effect.catchTag("DashboardAuthError", (error) => Effect.succeed(authFailure(error))),
          orUnavailable("DashboardAuth.enrollVerify")
        )))),
    HttpRouter.add("POST", "/dashboard/api/sign-in/options", signInStep(context, () =>
      auth.signInOptions.pipe(Effect.map((options) => json(options)), orUnavailable("DashboardAuth.signInOptions")))),
    HttpRouter.add("POST", "/dashboard/api/sign-in/verify", signInStep(context, (request) =>
      body(SignInVerifyRequest, ({ response }) =>
        auth.signInVerify(response as AuthenticationResponseJSON, userAgentOf(request)).pipe(
          Effect.map(opened(context)),
          Effect.catchTag("DashboardAuthError", (error) => Effect.succeed(authFailure(error))),
          orUnavailable("DashboardAuth.signInVerify")
        ))))
  )
}

/** What `GET /dashboard/api/session` answers about a session, and where the page links a transaction hash. */
const sessionBody = (session: DashboardSession, config: DashboardConfig["Service"]) => ({
  session_id: session.sessionId,
  account_id: session.accountId,
  handle: `@${session.handle}`,
  mode: session.principal.mode,
  csrf_token: session.csrfToken,
  explorer_tx_url: config.explorerTxUrl ?? null
})

/**
 * Whether the request carries a live session, always 200: what the page asks when it opens,
 * where "not signed in" is an expected answer, not a failure (a 401 would be logged by the
 * browser as an error on every visit of the sign-in page).
 */
const sessionState = (context: RoutesContext) => (request: HttpServerRequest.HttpServerRequest) =>
  sessionOfRequest(request).pipe(
    Effect.provideService(DashboardAuth, context.auth),
    Effect.provideService(DashboardConfig, context.config),
    Effect.map((resolved) =>
      Option.isSome(resolved) && "session" in resolved.value
        ? json({ signed_in: true, ...sessionBody(resolved.value.session, context.config) })
        : json({ signed_in: false })
    ),
    orUnavailable("DashboardAuth.authenticate"),
    Effect.map(headers(context))
  )

/** The signed-in holder's session, sessions and sign-out. */
const sessionRoutes = (context: RoutesContext) => {
  const { auth } = context
  return Layer.mergeAll(
    HttpRouter.add("GET", "/dashboard/api/session", signedIn(context, (session) => Effect.succeed(json(sessionBody(session, context.config))))),
    HttpRouter.add("GET", "/dashboard/api/session-state", sessionState(context)),
    HttpRouter.add("POST", "/dashboard/api/sign-out", signedIn(context, (session) =>
      Effect.map(auth.signOut(session.sessionId), () => signedOut(context)))),
    HttpRouter.add("POST", "/dashboard/api/sign-out-everywhere", signedIn(context, (session) =>
      Effect.map(auth.signOutEverywhere(session.accountId), () => signedOut(context)))),
    HttpRouter.add("GET", "/dashboard/api/sessions", signedIn(context, (session) =>
      Effect.map(auth.sessions(session), (data) => json({ data })))),
    HttpRouter.add("POST", "/dashboard/api/step-up/options", signedIn(context, (session) =>
      Effect.map(auth.stepUpOptions(session), (options) => json(options)))),
    HttpRouter.add("POST", "/dashboard/api/step-up/verify", signedIn(context, (session) =>
      body(StepUpVerifyRequest, ({ response }) =>
        auth.stepUpVerify(session, response as AuthenticationResponseJSON).pipe(
          Effect.map(() => json({ verified: true })),
          // 403, not 401: the session itself is still good, only this confirmation failed.
          Effect.catchTag("DashboardAuthError", (error) => Effect.succeed(failure(403, "reauthentication_failed", error.message))),
          orUnavailable("DashboardAuth.stepUpVerify")
        ))))
  )
}

/** The holder's passkeys: listed, added and removed (the last two after a step-up). */
const passkeyRoutes = (context: RoutesContext) => {
  const { auth } = context
  return Layer.mergeAll(
    HttpRouter.add("GET", "/dashboard/api/passkeys", signedIn(context, (session) =>
      Effect.map(auth.passkeys(session.accountId), (data) => json({ data })))),
    HttpRouter.add("POST", "/dashboard/api/passkeys/options", steppedUp(context, (session) =>
      Effect.map(auth.addPasskeyOptions(session), (options) => json(options)))),
    HttpRouter.add("POST", "/dashboard/api/passkeys/verify", steppedUp(context, (session) =>
      body(EnrollVerifyRequest, ({ response, name }) =>
        auth.addPasskeyVerify(session, response as RegistrationResponseJSON, name ?? "Passkey").pipe(
          Effect.map((passkey) => json(passkey, 201)),
          Effect.catchTag("DashboardAuthError", (error) => Effect.succeed(authFailure(error))),
          orUnavailable("DashboardAuth.addPasskeyVerify")
        )))),
    HttpRouter.add("DELETE", "/dashboard/api/passkeys/:credential_id", steppedUp(context, (session) =>
      Effect.gen(function*() {
        const params = yield* HttpRouter.params
        const { endedCurrent } = yield* auth.removePasskey(session, params["credential_id"] ?? "")
        // The passkey that opened this very session: it ended too, so its cookie goes.
        return endedCurrent ? cookie(context, "", 0)(HttpServerResponse.empty({ status: 204 })) : HttpServerResponse.empty({ status: 204 })
      }).pipe(Effect.catchTag("DashboardAuthError", (error) => Effect.succeed(authFailure(error))))))
  )
}

/** SPEC Authentication 2: the holder creates a key, names it, sees its value once. */
const createApiKey = (context: RoutesContext) =>
  steppedUp(context, (session) =>
    body(CreateApiKeyRequest, ({ name }) =>
      context.apiKeys.issue(session.accountId, name, session.principal.mode).pipe(
        Effect.tap((issued) =>
          context.auditLog.record({
            action: "api_key.created",
            accountId: session.accountId,
            actor: `dashboard:${session.accountId}`,
            targetId: issued.keyId
          })),
        Effect.tap((issued) => Effect.logInfo("api key created in the dashboard").pipe(Effect.annotateLogs({ key_id: issued.keyId, session_id: session.sessionId }))),
        Effect.map((issued) =>
          json({ key_id: issued.keyId, name: issued.name, mode: issued.mode, api_key: Redacted.value(issued.apiKey) }, 201)
        ),
        orUnavailable("ApiKeys.issue")
      )))

/** SPEC Authentication 5: revoke, effective at once. */
const revokeApiKey = (context: RoutesContext) =>
  signedIn(context, (session) =>
    Effect.gen(function*() {
      const params = yield* HttpRouter.params
      const keyId = params["key_id"] ?? ""
      // A session acts in one mode (D9): a test-mode session does not touch live keys.
      const revoked = yield* context.apiKeys.revoke(keyId, { accountId: session.accountId, mode: session.principal.mode })
      if (Option.isNone(revoked)) return failure(404, "api_key_not_found", "No active API key with this id on this account in this session's mode.")
      yield* context.auditLog.record({ action: "api_key.revoked", accountId: session.accountId, actor: `dashboard:${session.accountId}`, targetId: keyId })
      yield* Effect.logInfo("api key revoked in the dashboard").pipe(Effect.annotateLogs({ key_id: keyId, session_id: session.sessionId }))
      return json({ key_id: keyId, revoked: true })
    }))

/**
 * @since 0.4.0
 * @category layers
 */
export const DashboardRoutes = Layer.unwrap(Effect.gen(function*() {
  const context: RoutesContext = {
    auth: yield* DashboardAuth,
    config: yield* DashboardConfig,
    apiKeys: yield* ApiKeys,
    auditLog: yield* AuditLog,
    accounts: yield* Accounts,
    page: readBuiltPage(),
    limitSignIn: makeSignInLimiter()
  }
  return Layer.mergeAll(
    // "/dashboard/*" also routes "/dashboard" itself.
    HttpRouter.add("GET", "/dashboard/*", (request) => Effect.succeed(headers(context)(pageFile(context, request)))),
    signInRoutes(context),
    sessionRoutes(context),
    passkeyRoutes(context),
    HttpRouter.add("POST", "/dashboard/api/api-keys", createApiKey(context)),
    HttpRouter.add("POST", "/dashboard/api/api-keys/:key_id/revoke", revokeApiKey(context))
  )
}))
