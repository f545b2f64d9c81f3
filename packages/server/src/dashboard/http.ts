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
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Clock, Effect, Layer, Option, Redacted, Schema } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import type { AuthenticationResponseJSON, RegistrationResponseJSON } from "@simplewebauthn/server"
import { ApiKeys } from "../apikeys/ApiKeys.ts"
import { csrfTokenMatches, DashboardAuth, type DashboardAuthError, type DashboardSession, sessionAbsoluteMs, stepUpMaxAgeMs } from "./DashboardAuth.ts"
import { DashboardConfig } from "./DashboardConfig.ts"
import { addressBucket, clientAddress } from "../http/ClientAddress.ts"

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
const CreateKeyRequest = Schema.Struct({ name: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(100)) })

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

/** The built page: every file of `packages/dashboard/dist`, read once. */
const readBuiltPage = (): ReadonlyMap<string, { readonly bytes: Uint8Array; readonly type: string }> => {
  const root = fileURLToPath(new URL("../../../dashboard/dist/", import.meta.url))
  const files = new Map<string, { readonly bytes: Uint8Array; readonly type: string }>()
  if (!fs.existsSync(root)) return files
  const types: Record<string, string> = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json",
    ".wasm": "application/wasm"
  }
  for (const entry of fs.readdirSync(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue
    const full = path.join(entry.parentPath, entry.name)
    const relative = path.relative(root, full).split(path.sep).join("/")
    files.set(relative, { bytes: fs.readFileSync(full), type: types[path.extname(entry.name)] ?? "application/octet-stream" })
  }
  return files
}

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

/**
 * @since 0.4.0
 * @category layers
 */
export const DashboardRoutes = Layer.unwrap(Effect.gen(function*() {
  const auth = yield* DashboardAuth
  const config = yield* DashboardConfig
  const apiKeys = yield* ApiKeys
  const page = readBuiltPage()
  const limitSignIn = makeSignInLimiter()

  const cookie = (value: string, maxAgeMs: number) =>
    HttpServerResponse.setCookieUnsafe(sessionCookieName(config.secureCookie), value, {
      httpOnly: true,
      sameSite: "strict",
      secure: config.secureCookie,
      path: "/",
      maxAge: `${Math.max(0, Math.floor(maxAgeMs / 1000))} seconds`
    })

  const headers = (response: HttpServerResponse.HttpServerResponse) => withHeaders(response, config.secureCookie)

  /** A sign-in step: same-origin only, rate-limited by client address. */
  const signInStep = <R>(handler: (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse, never, R>) =>
    (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function*() {
        if (request.headers["origin"] !== config.origin) return failure(403, "forbidden", "The request did not come from the dashboard's origin.")
        const address = clientAddress(Option.getOrUndefined(request.remoteAddress ?? Option.none()), request.headers["x-forwarded-for"], config.trustedProxies)
        const retryAfter = yield* limitSignIn(address)
        if (Option.isSome(retryAfter)) {
          return HttpServerResponse.setHeader(failure(429, "rate_limited", "Too many sign-in attempts; wait a few minutes."), "retry-after", String(retryAfter.value))
        }
        return yield* handler(request)
      }).pipe(Effect.map(headers))

  /** A step of a signed-in holder. */
  const signedIn = <E, R>(handler: (session: DashboardSession, request: HttpServerRequest.HttpServerRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
    (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function*() {
        const resolved = yield* sessionOfRequest(request).pipe(Effect.provideService(DashboardAuth, auth), Effect.provideService(DashboardConfig, config))
        if (Option.isNone(resolved)) return notSignedIn()
        if ("refusal" in resolved.value) return failure(403, "forbidden", resolved.value.refusal)
        return yield* handler(resolved.value.session, request)
      }).pipe(Effect.map(headers))

  /**
   * A step that gives lasting access (a passkey, an API key): the session must
   * have been verified by a passkey assertion within `stepUpMaxAgeMs`, else 403
   * `reauthentication_required`, on which the page runs the step-up ceremony.
   */
  const steppedUp = <E, R>(handler: (session: DashboardSession, request: HttpServerRequest.HttpServerRequest) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
    signedIn((session, request) =>
      Effect.flatMap(Clock.currentTimeMillis, (nowMs) =>
        session.verifiedAtMs !== null && nowMs - session.verifiedAtMs <= stepUpMaxAgeMs
          ? handler(session, request)
          : Effect.succeed(failure(403, "reauthentication_required", "Confirm with your passkey to continue."))))

  const opened = (session: { readonly token: string; readonly csrfToken: string; readonly expiresAtMs: number }) =>
    cookie(session.token, sessionAbsoluteMs)(json({ csrf_token: session.csrfToken, expires_at: new Date(session.expiresAtMs).toISOString() }))

  const userAgentOf = (request: HttpServerRequest.HttpServerRequest) => request.headers["user-agent"] ?? "unknown"

  const pageFile = (request: HttpServerRequest.HttpServerRequest) => {
    const relative = (request.url.split("?")[0] ?? "").replace(/^\/dashboard\/?/, "")
    // Any other path is a route of the page itself: it gets the page, which routes it.
    const file = page.get(relative) ?? page.get("index.html")
    if (file === undefined) {
      return failure(503, "service_unavailable", "The dashboard has not been built on this node (pnpm --filter @pps/dashboard build).")
    }
    const immutable = relative.startsWith("assets/") && page.has(relative)
    return HttpServerResponse.uint8Array(file.bytes, {
      contentType: file.type,
      headers: { "cache-control": immutable ? "public, max-age=31536000, immutable" : "no-cache" }
    })
  }

  return Layer.mergeAll(
    // "/dashboard/*" also routes "/dashboard" itself.
    HttpRouter.add("GET", "/dashboard/*", (request) => Effect.succeed(headers(pageFile(request)))),

    HttpRouter.add("POST", "/dashboard/api/enroll/options", signInStep(() =>
      body(EnrollOptionsRequest, ({ invite }) =>
        auth.enrollOptions(invite).pipe(
          Effect.map((options) => json(options)),
          Effect.catchTag("DashboardAuthError", (error) => Effect.succeed(authFailure(error))),
          Effect.orDie
        )))),
    HttpRouter.add("POST", "/dashboard/api/enroll/verify", signInStep((request) =>
      body(EnrollVerifyRequest, ({ response, name }) =>
        auth.enrollVerify(response as RegistrationResponseJSON, name ?? "Passkey", userAgentOf(request)).pipe(
          Effect.map(opened),
          Effect.catchTag("DashboardAuthError", (error) => Effect.succeed(authFailure(error))),
          Effect.orDie
        )))),
    HttpRouter.add("POST", "/dashboard/api/sign-in/options", signInStep(() => Effect.map(Effect.orDie(auth.signInOptions), (options) => json(options)))),
    HttpRouter.add("POST", "/dashboard/api/sign-in/verify", signInStep((request) =>
      body(SignInVerifyRequest, ({ response }) =>
        auth.signInVerify(response as AuthenticationResponseJSON, userAgentOf(request)).pipe(
          Effect.map(opened),
          Effect.catchTag("DashboardAuthError", (error) => Effect.succeed(authFailure(error))),
          Effect.orDie
        )))),

    HttpRouter.add("GET", "/dashboard/api/session", signedIn((session) =>
      Effect.succeed(json({
        session_id: session.sessionId,
        account_id: session.accountId,
        handle: `@${session.handle}`,
        mode: session.principal.mode,
        csrf_token: session.csrfToken
      })))),
    HttpRouter.add("POST", "/dashboard/api/sign-out", signedIn((session) =>
      Effect.map(Effect.orDie(auth.signOut(session.sessionId)), () => cookie("", 0)(json({ signed_out: true }))))),
    HttpRouter.add("POST", "/dashboard/api/sign-out-everywhere", signedIn((session) =>
      Effect.map(Effect.orDie(auth.signOutEverywhere(session.accountId)), () => cookie("", 0)(json({ signed_out: true }))))),
    HttpRouter.add("GET", "/dashboard/api/sessions", signedIn((session) =>
      Effect.map(Effect.orDie(auth.sessions(session)), (data) => json({ data })))),

    HttpRouter.add("GET", "/dashboard/api/passkeys", signedIn((session) =>
      Effect.map(Effect.orDie(auth.passkeys(session.accountId)), (data) => json({ data })))),
    HttpRouter.add("POST", "/dashboard/api/step-up/options", signedIn((session) =>
      Effect.map(Effect.orDie(auth.stepUpOptions(session)), (options) => json(options)))),
    HttpRouter.add("POST", "/dashboard/api/step-up/verify", signedIn((session) =>
      body(StepUpVerifyRequest, ({ response }) =>
        auth.stepUpVerify(session, response as AuthenticationResponseJSON).pipe(
          Effect.map(() => json({ verified: true })),
          // 403, not 401: the session itself is still good, only this confirmation failed.
          Effect.catchTag("DashboardAuthError", (error) => Effect.succeed(failure(403, "reauthentication_failed", error.message))),
          Effect.orDie
        )))),

    HttpRouter.add("POST", "/dashboard/api/passkeys/options", steppedUp((session) =>
      Effect.map(Effect.orDie(auth.addPasskeyOptions(session)), (options) => json(options)))),
    HttpRouter.add("POST", "/dashboard/api/passkeys/verify", steppedUp((session) =>
      body(EnrollVerifyRequest, ({ response, name }) =>
        auth.addPasskeyVerify(session, response as RegistrationResponseJSON, name ?? "Passkey").pipe(
          Effect.map((passkey) => json(passkey, 201)),
          Effect.catchTag("DashboardAuthError", (error) => Effect.succeed(authFailure(error))),
          Effect.orDie
        )))),
    HttpRouter.add("DELETE", "/dashboard/api/passkeys/:credential_id", steppedUp((session) =>
      Effect.gen(function*() {
        const params = yield* HttpRouter.params
        return yield* auth.removePasskey(session, params["credential_id"] ?? "").pipe(
          // The passkey that opened this very session: it ended too, so its cookie goes.
          Effect.map(({ endedCurrent }) => endedCurrent ? cookie("", 0)(HttpServerResponse.empty({ status: 204 })) : HttpServerResponse.empty({ status: 204 })),
          Effect.catchTag("DashboardAuthError", (error) => Effect.succeed(authFailure(error))),
          Effect.orDie
        )
      }))),

    // SPEC Authentication 2: the holder creates a key, names it, sees its value once.
    HttpRouter.add("POST", "/dashboard/api/api-keys", steppedUp((session) =>
      body(CreateKeyRequest, ({ name }) =>
        apiKeys.issue(session.accountId, name, session.principal.mode).pipe(
          Effect.orDie,
          Effect.tap((issued) => Effect.logInfo("api key created in the dashboard").pipe(Effect.annotateLogs({ key_id: issued.keyId, session_id: session.sessionId }))),
          Effect.map((issued) =>
            json({ key_id: issued.keyId, name: issued.name, mode: issued.mode, api_key: Redacted.value(issued.apiKey) }, 201)
          )
        )))),
    // SPEC Authentication 5: revoke, effective at once.
    HttpRouter.add("POST", "/dashboard/api/api-keys/:key_id/revoke", signedIn((session) =>
      Effect.gen(function*() {
        const params = yield* HttpRouter.params
        const keyId = params["key_id"] ?? ""
        const owned = yield* Effect.orDie(apiKeys.list(session.accountId))
        // A session acts in one mode (D9): a test-mode session does not touch live keys.
        const key = owned.find((k) => k.key_id === keyId && k.revoked_at === null && k.mode === session.principal.mode)
        if (key === undefined) return failure(404, "api_key_not_found", "No active API key with this id on this account in this session's mode.")
        yield* Effect.orDie(apiKeys.revoke(keyId))
        yield* Effect.logInfo("api key revoked in the dashboard").pipe(Effect.annotateLogs({ key_id: keyId, session_id: session.sessionId }))
        return json({ key_id: keyId, revoked: true })
      })))
  )
}))
