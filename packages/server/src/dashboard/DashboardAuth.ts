/**
 * Sign-in to the dashboard (D41) without an API key: one-time enrollment
 * invites, passkeys (WebAuthn, verified with `@simplewebauthn/server`) and
 * server-side sessions.
 *
 * - An invite is 32 random bytes, shown once to the operator as a link; only its
 *   SHA-256 is stored. It expires after `inviteLifetimeMs` and is spent by the
 *   first enrollment that completes with it.
 * - A WebAuthn challenge is stored with its purpose and taken (deleted) by the
 *   one ceremony that answers it, so a signed answer cannot be replayed.
 * - A session is 32 random bytes in an HttpOnly cookie; the row keeps only its
 *   SHA-256, the CSRF token the page sends back in `X-CSRF-Token`, and its
 *   expiries: idle (`sessionIdleMs` since last use) and absolute
 *   (`sessionAbsoluteMs` since sign-in). Sign-out revokes one row, sign-out
 *   everywhere every row of the account.
 * - A session records when a user-verified passkey assertion last proved the
 *   holder present (`verified_at`: sign-in, enrollment, or a "step_up"
 *   ceremony). Adding or removing a passkey and creating an API key need that
 *   to be at most `stepUpMaxAgeMs` old, so a cookie alone (a stolen one, an
 *   unattended laptop) cannot plant a passkey or a key that outlives the session.
 *
 * Everything is in SQL, so any api node answers any step of a ceremony and any
 * request of a session (distributed mode).
 *
 * @since 0.4.0
 */
import { AuditLog } from "../audit/AuditLog.ts"
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import type {
  AuthenticationResponseJSON,
  AuthenticatorTransport,
  PublicKeyCredentialCreationOptionsJSON,
  PublicKeyCredentialRequestOptionsJSON,
  RegistrationResponseJSON
} from "@simplewebauthn/server"
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import type { Mode, Principal } from "@pps/api/ApiKeys"
import { AccountType } from "@pps/api/Accounts"
import { ReauthenticationRequired } from "@pps/api/Errors"
import { ulid } from "../platform/Ids.ts"
import * as Invariant from "../platform/Invariant.ts"
import { DashboardConfig } from "./DashboardConfig.ts"

/** An invite link is for the person it was given to, today: SPEC's "one-time link (24 h)". */
export const inviteLifetimeMs = 24 * 60 * 60 * 1000
/** A ceremony is a person touching a key: five minutes is generous, and bounds the table. */
const challengeLifetimeMs = 5 * 60 * 1000
/** A session unused this long is over (a laptop left open). */
export const sessionIdleMs = 30 * 60 * 1000
/** However active, a session ends this long after sign-in. */
export const sessionAbsoluteMs = 12 * 60 * 60 * 1000
/** `last_seen_at` is written at most this often, not on every request. */
const touchEveryMs = 60 * 1000
/**
 * How recent the last user-verified passkey assertion of a session must be for
 * the actions that give lasting access (add or remove a passkey, create an API
 * key): long enough that sign-in followed by creating a key needs no second
 * touch, short enough that a laptop left signed in does not serve a passer-by.
 */
export const stepUpMaxAgeMs = 5 * 60 * 1000
/** Random bytes of invite and session tokens (as API keys, D8). */
const tokenBytes = 32
/** A passkey's name, as the holder types it. */
const passkeyNameMax = 64

/**
 * Why a sign-in step was refused. The page shows the message; none of them
 * says whether an account or a passkey exists.
 *
 * @since 0.4.0
 * @category errors
 */
export class DashboardAuthError extends Schema.TaggedError<DashboardAuthError>()("DashboardAuthError", {
  reason: Schema.Literals(["invite_invalid", "ceremony_invalid", "passkey_unknown", "session_invalid", "last_passkey", "passkey_not_found"]),
  message: Schema.String
}) {}

/**
 * A session as the request that presented its cookie sees it.
 *
 * @since 0.4.0
 * @category models
 */
export interface DashboardSession {
  readonly sessionId: string
  readonly accountId: string
  readonly handle: string
  readonly csrfToken: string
  /** When a user-verified passkey assertion last proved the holder present; null for sessions older than step-up. */
  readonly verifiedAtMs: number | null
  readonly principal: Principal
}

/**
 * The dashboard session behind the current `/v1` request, when a session cookie (not an API
 * key) authenticated it: the Authorization middleware provides it, so a step that gives lasting
 * access can ask for a recent passkey confirmation (`requireStepUp`).
 *
 * @since 0.9.0
 * @category references
 */
export const CurrentSession = Context.Reference<Option.Option<DashboardSession>>("server/dashboard/CurrentSession", {
  defaultValue: () => Option.none()
})

/**
 * Whether the session's last user-verified passkey assertion is recent enough for a step that
 * gives lasting access (a passkey, an API key).
 *
 * @since 0.9.0
 * @category predicates
 */
export const isSteppedUp = (session: DashboardSession, nowMs: number): boolean =>
  session.verifiedAtMs !== null && nowMs - session.verifiedAtMs <= stepUpMaxAgeMs

/**
 * D44: a `/v1` step that creates lasting access asks a dashboard session for a recent passkey
 * confirmation, as the dashboard's own key creation does; an API key is not asked (it is the
 * holder's already).
 *
 * @since 0.9.0
 * @category combinators
 */
export const requireStepUp: Effect.Effect<void, ReauthenticationRequired> = Effect.gen(function*() {
  const session = yield* CurrentSession
  if (Option.isNone(session)) return
  if (!isSteppedUp(session.value, yield* Clock.currentTimeMillis)) return yield* Effect.fail(ReauthenticationRequired.of())
})

/**
 * A session just opened: the cookie value goes to the browser once.
 *
 * @since 0.4.0
 * @category models
 */
export interface OpenedSession {
  readonly sessionId: string
  readonly token: string
  readonly csrfToken: string
  readonly expiresAtMs: number
}

/**
 * @since 0.4.0
 * @category models
 */
export interface PasskeyView {
  readonly credential_id: string
  readonly name: string
  readonly created_at: string
  readonly last_used_at: string | null
}

/**
 * @since 0.4.0
 * @category models
 */
export interface SessionView {
  readonly session_id: string
  readonly user_agent: string
  readonly created_at: string
  readonly last_seen_at: string
  readonly expires_at: string
  readonly current: boolean
}

const sha256 = (value: string): Uint8Array => createHash("sha256").update(value, "utf8").digest()
const newToken = (): string => randomBytes(tokenBytes).toString("base64url")
const isoOf = (ms: number) => new Date(ms).toISOString()

/**
 * The WebAuthn verifier, loaded by the first passkey ceremony rather than at start (D93): with its
 * ASN.1 and X.509 parsers it adds ~26 MB resident to a bare Node process, and a server that only
 * moves money never runs one. The module loader keeps it once loaded.
 */
const webAuthn = Effect.promise(() => import("@simplewebauthn/server"))

// Resolved, not loaded, at start: a missing package still stops the server there, as the static
// import did, instead of failing the first ceremony.
import.meta.resolve("@simplewebauthn/server")

/** The challenge a browser signed, read from its clientDataJSON (it is checked again by the verifier). */
const ClientData = Schema.fromJsonString(Schema.Struct({ challenge: Schema.String }))
const challengeOf = (clientDataJSON: string): Option.Option<string> =>
  Option.map(
    Schema.decodeUnknownOption(ClientData)(Buffer.from(clientDataJSON, "base64url").toString("utf8")),
    (data) => data.challenge
  )

const SessionRow = Schema.Struct({
  session_id: Schema.String,
  account_id: Schema.String,
  handle: Schema.String,
  csrf_token: Schema.String,
  account_type: AccountType,
  owner_account_id: Schema.NullOr(Schema.String),
  last_seen_ms: Schema.NumberFromString,
  expires_ms: Schema.NumberFromString,
  verified_ms: Schema.NullOr(Schema.NumberFromString),
  revoked: Schema.Boolean
})

const PasskeyRow = Schema.Struct({
  credential_id: Schema.String,
  account_id: Schema.String,
  public_key: Schema.Uint8Array,
  sign_count: Schema.NumberFromString,
  transports: Schema.String
})

type Purpose = "enroll" | "add_passkey" | "sign_in" | "step_up"

const ceremonyInvalid = new DashboardAuthError({
  reason: "ceremony_invalid",
  message: "The passkey answer could not be verified; start again."
})

/**
 * @since 0.4.0
 * @category services
 */
export class DashboardAuth extends Context.Service<DashboardAuth, {
  /** A new one-time enrollment invite for a (non-agent) account: the token, shown once. */
  readonly invite: (accountId: string) => Effect.Effect<Option.Option<{ readonly token: string; readonly expiresAtMs: number }>, SqlError.SqlError>
  readonly enrollOptions: (inviteToken: string) => Effect.Effect<PublicKeyCredentialCreationOptionsJSON, DashboardAuthError | SqlError.SqlError>
  readonly enrollVerify: (response: RegistrationResponseJSON, name: string, userAgent: string) => Effect.Effect<OpenedSession, DashboardAuthError | SqlError.SqlError>
  readonly signInOptions: Effect.Effect<PublicKeyCredentialRequestOptionsJSON, SqlError.SqlError>
  readonly signInVerify: (response: AuthenticationResponseJSON, userAgent: string) => Effect.Effect<OpenedSession, DashboardAuthError | SqlError.SqlError>
  readonly addPasskeyOptions: (session: DashboardSession) => Effect.Effect<PublicKeyCredentialCreationOptionsJSON, SqlError.SqlError>
  readonly addPasskeyVerify: (session: DashboardSession, response: RegistrationResponseJSON, name: string) => Effect.Effect<PasskeyView, DashboardAuthError | SqlError.SqlError>
  /** Options of a step-up: an assertion by one of the session's account's passkeys, user verification required. */
  readonly stepUpOptions: (session: DashboardSession) => Effect.Effect<PublicKeyCredentialRequestOptionsJSON, SqlError.SqlError>
  /** Verifies a step-up answer and marks the session verified now. */
  readonly stepUpVerify: (session: DashboardSession, response: AuthenticationResponseJSON) => Effect.Effect<void, DashboardAuthError | SqlError.SqlError>
  readonly passkeys: (accountId: string) => Effect.Effect<ReadonlyArray<PasskeyView>, SqlError.SqlError>
  /** Removes a passkey and ends the sessions it opened; whether the calling session was one of them. */
  readonly removePasskey: (session: DashboardSession, credentialId: string) => Effect.Effect<{ readonly endedCurrent: boolean }, DashboardAuthError | SqlError.SqlError>
  /**
   * The session a cookie stands for, if it is live; touches its idle clock unless
   * `touch: false` (a re-check of an open stream, which is no use by the holder).
   */
  readonly authenticate: (token: string, options?: { readonly touch?: boolean }) => Effect.Effect<Option.Option<DashboardSession>, SqlError.SqlError>
  readonly sessions: (session: DashboardSession) => Effect.Effect<ReadonlyArray<SessionView>, SqlError.SqlError>
  readonly signOut: (sessionId: string) => Effect.Effect<void, SqlError.SqlError>
  readonly signOutEverywhere: (accountId: string) => Effect.Effect<void, SqlError.SqlError>
}>()("server/dashboard/DashboardAuth") {
  static readonly layer = Layer.effect(
    DashboardAuth,
    Effect.gen(function*() {
      const { origin, rpId, mode } = yield* DashboardConfig
      const context: DashboardAuthContext = { sql: yield* SqlClient.SqlClient, origin, rpId, mode, auditLog: yield* AuditLog }
      return DashboardAuth.of({
        invite: (accountId) => invite(context, accountId),
        enrollOptions: (inviteToken) => enrollOptions(context, inviteToken),
        enrollVerify: (response, name, userAgent) => enrollVerify(context, response, name, userAgent),
        signInOptions: signInOptions(context),
        signInVerify: (response, userAgent) => signInVerify(context, response, userAgent),
        addPasskeyOptions: (session) => addPasskeyOptions(context, session),
        addPasskeyVerify: (session, response, name) => addPasskeyVerify(context, session, response, name),
        stepUpOptions: (session) => stepUpOptions(context, session),
        stepUpVerify: (session, response) => stepUpVerify(context, session, response),
        passkeys: (accountId) => passkeys(context, accountId),
        removePasskey: (session, credentialId) => removePasskey(context, session, credentialId),
        authenticate: (token, options) => authenticate(context, token, options),
        sessions: (session) => sessions(context, session),
        signOut: (sessionId) => signOut(context, sessionId),
        signOutEverywhere: (accountId) => signOutEverywhere(context, accountId)
      })
    })
  )
}

/** What the steps share: the database and the relying party this node answers as. */
interface DashboardAuthContext {
  readonly sql: SqlClient.SqlClient
  readonly origin: string
  readonly rpId: string
  readonly mode: Mode
  readonly auditLog: AuditLog["Service"]
}

const decodeSessions = Schema.decodeUnknownEffect(Schema.Array(SessionRow))
const decodePasskeys = Schema.decodeUnknownEffect(Schema.Array(PasskeyRow))

const inviteInvalid = () =>
  new DashboardAuthError({ reason: "invite_invalid", message: "This invite link is unknown, used or expired; ask the operator for a new one." })

const storeChallenge = (
  { sql }: DashboardAuthContext,
  challenge: string,
  purpose: Purpose,
  accountId: string | null,
  inviteHash: Uint8Array | null
) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    // Expired challenges nobody answered go with the next one stored.
    yield* sql`DELETE FROM dashboard_challenges WHERE expires_at < ${isoOf(now)}::timestamptz`
    yield* sql`
      INSERT INTO dashboard_challenges (challenge, purpose, account_id, invite_hash, expires_at)
      VALUES (${challenge}, ${purpose}, ${accountId}, ${inviteHash}, ${isoOf(now + challengeLifetimeMs)}::timestamptz)`
  })

/** Takes the challenge a response answers, if it is live and of this purpose. */
const takeChallenge = ({ sql }: DashboardAuthContext, clientDataJSON: string, purpose: Purpose) =>
  Effect.gen(function*() {
    const challenge = challengeOf(clientDataJSON)
    if (Option.isNone(challenge)) return yield* ceremonyInvalid
    const now = yield* Clock.currentTimeMillis
    const rows = yield* sql<{ account_id: string | null; invite_hash: Uint8Array | null }>`
      DELETE FROM dashboard_challenges
      WHERE challenge = ${challenge.value} AND purpose = ${purpose} AND expires_at > ${isoOf(now)}::timestamptz
      RETURNING account_id, invite_hash`
    const row = rows[0]
    if (row === undefined) return yield* ceremonyInvalid
    return { challenge: challenge.value, accountId: row.account_id, inviteHash: row.invite_hash }
  })

/** A session opened by a user-verified ceremony of `credentialId`: verified now. */
const openSession = ({ sql }: DashboardAuthContext, accountId: string, userAgent: string, credentialId: string) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const sessionId = `ses_${ulid(now)}`
    const token = newToken()
    const csrfToken = newToken()
    const expiresAtMs = now + sessionAbsoluteMs
    yield* sql`
      INSERT INTO dashboard_sessions (session_id, token_hash, account_id, csrf_token, user_agent, created_at, last_seen_at, expires_at,
                                      verified_at, credential_id)
      VALUES (${sessionId}, ${sha256(token)}, ${accountId}, ${csrfToken}, ${userAgent.slice(0, 256)},
              ${isoOf(now)}::timestamptz, ${isoOf(now)}::timestamptz, ${isoOf(expiresAtMs)}::timestamptz,
              ${isoOf(now)}::timestamptz, ${credentialId})`
    yield* Effect.logInfo("dashboard session opened").pipe(Effect.annotateLogs({ session_id: sessionId, account_id: accountId }))
    return { sessionId, token, csrfToken, expiresAtMs } satisfies OpenedSession
  })

const registrationOptions = ({ sql, rpId }: DashboardAuthContext, accountId: string, handle: string) =>
  Effect.gen(function*() {
    const existing = yield* sql<{ credential_id: string; transports: string }>`
      SELECT credential_id, transports FROM dashboard_passkeys WHERE account_id = ${accountId}`
    const library = yield* webAuthn
    return yield* Effect.promise(() =>
      library.generateRegistrationOptions({
        rpName: "Private Payments",
        rpID: rpId,
        userName: `@${handle}`,
        userID: new TextEncoder().encode(accountId),
        attestationType: "none",
        excludeCredentials: existing.map((row) => ({ id: row.credential_id, transports: transportsOf(row.transports) })),
        // Discoverable, so sign-in needs no user name: the passkey names the account.
        authenticatorSelection: { residentKey: "required", userVerification: "preferred" },
        // Asks for the PRF extension where the authenticator has it, so the page can
        // protect the holder's decryption key with the passkey (it is evaluated in the
        // browser only; the server never sees its output).
        extensions: { prf: {} }
      })
    )
  })

const verifyRegistration = ({ origin, rpId }: DashboardAuthContext, response: RegistrationResponseJSON, challenge: string) =>
  webAuthn.pipe(
    Effect.flatMap((library) =>
      Effect.tryPromise({
        try: () => library.verifyRegistrationResponse({ response, expectedChallenge: challenge, expectedOrigin: origin, expectedRPID: rpId }),
        catch: () => ceremonyInvalid
      })
    ),
    Effect.flatMap((result) => result.verified ? Effect.succeed(result.registrationInfo.credential) : Effect.fail(ceremonyInvalid))
  )

interface RegisteredCredential {
  readonly id: string
  readonly publicKey: Uint8Array
  readonly counter: number
  readonly transports?: ReadonlyArray<string> | undefined
}

const storePasskey = ({ sql }: DashboardAuthContext, accountId: string, credential: RegisteredCredential, name: string) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const cleanName = name.trim().slice(0, passkeyNameMax) || "Passkey"
    yield* sql`
      INSERT INTO dashboard_passkeys (credential_id, account_id, public_key, sign_count, transports, name, created_at)
      VALUES (${credential.id}, ${accountId}, ${credential.publicKey}, ${credential.counter}, ${(credential.transports ?? []).join(",")},
              ${cleanName}, ${isoOf(now)}::timestamptz)`
    return { credential_id: credential.id, name: cleanName, created_at: isoOf(now), last_used_at: null } satisfies PasskeyView
  })

/**
 * Verifies an assertion (user verification required: the library's default)
 * against the stored passkey it names, and advances its counter.
 */
const verifyAssertion = ({ sql, origin, rpId }: DashboardAuthContext, response: AuthenticationResponseJSON, challenge: string) =>
  Effect.gen(function*() {
    const rows = yield* sql`
      SELECT credential_id, account_id, public_key, sign_count::text AS sign_count, transports
      FROM dashboard_passkeys WHERE credential_id = ${response.id}`.pipe(
      Effect.flatMap((found) => decodePasskeys(found).pipe(Invariant.orDie("a dashboard_passkeys row decodes as the passkey it stores")))
    )
    const passkey = rows[0]
    if (passkey === undefined) {
      return yield* new DashboardAuthError({ reason: "passkey_unknown", message: "This passkey is not registered here." })
    }
    const library = yield* webAuthn
    const verified = yield* Effect.tryPromise({
      try: () =>
        library.verifyAuthenticationResponse({
          response,
          expectedChallenge: challenge,
          expectedOrigin: origin,
          expectedRPID: rpId,
          requireUserVerification: true,
          credential: { id: passkey.credential_id, publicKey: new Uint8Array(passkey.public_key), counter: passkey.sign_count, transports: transportsOf(passkey.transports) }
        }),
      catch: () => ceremonyInvalid
    })
    if (!verified.verified) return yield* ceremonyInvalid
    const now = yield* Clock.currentTimeMillis
    yield* sql`
      UPDATE dashboard_passkeys SET sign_count = ${verified.authenticationInfo.newCounter}, last_used_at = ${isoOf(now)}::timestamptz
      WHERE credential_id = ${passkey.credential_id}`
    return passkey
  })

const handleOf = ({ sql }: DashboardAuthContext, accountId: string) =>
  sql<{ handle: string; type: string }>`SELECT handle, type FROM accounts WHERE account_id = ${accountId}`.pipe(
    Effect.map((rows) => Option.fromNullishOr(rows[0]))
  )

const invite = Effect.fn("DashboardAuth.invite")(function*(context: DashboardAuthContext, accountId: string) {
  const account = yield* handleOf(context, accountId)
  // Agents act through their owner's dashboard (D21), never their own.
  if (Option.isNone(account) || account.value.type === "agent") return Option.none()
  const now = yield* Clock.currentTimeMillis
  const token = newToken()
  const expiresAtMs = now + inviteLifetimeMs
  yield* context.sql`
    INSERT INTO dashboard_invites (token_hash, account_id, created_at, expires_at)
    VALUES (${sha256(token)}, ${accountId}, ${isoOf(now)}::timestamptz, ${isoOf(expiresAtMs)}::timestamptz)`
  return Option.some({ token, expiresAtMs })
})

const enrollOptions = Effect.fn("DashboardAuth.enrollOptions")(function*(context: DashboardAuthContext, inviteToken: string) {
  const now = yield* Clock.currentTimeMillis
  const inviteHash = sha256(inviteToken)
  const rows = yield* context.sql<{ account_id: string; handle: string }>`
    SELECT i.account_id, a.handle FROM dashboard_invites i JOIN accounts a ON a.account_id = i.account_id
    WHERE i.token_hash = ${inviteHash} AND i.used_at IS NULL AND i.expires_at > ${isoOf(now)}::timestamptz`
  const found = rows[0]
  if (found === undefined) return yield* inviteInvalid()
  const options = yield* registrationOptions(context, found.account_id, found.handle)
  yield* storeChallenge(context, options.challenge, "enroll", found.account_id, inviteHash)
  return options
})

const enrollVerify = Effect.fn("DashboardAuth.enrollVerify")(function*(
  context: DashboardAuthContext,
  response: RegistrationResponseJSON,
  name: string,
  userAgent: string
) {
  const { sql } = context
  const taken = yield* takeChallenge(context, response.response.clientDataJSON, "enroll")
  if (taken.accountId === null || taken.inviteHash === null) return yield* ceremonyInvalid
  const credential = yield* verifyRegistration(context, response, taken.challenge)
  const accountId = taken.accountId
  const inviteHash = taken.inviteHash
  return yield* sql.withTransaction(Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    // The invite is spent here, once: a second enrollment with it finds it used.
    const spent = yield* sql`
      UPDATE dashboard_invites SET used_at = ${isoOf(now)}::timestamptz
      WHERE token_hash = ${inviteHash} AND used_at IS NULL AND expires_at > ${isoOf(now)}::timestamptz
      RETURNING account_id`
    if (spent.length === 0) return yield* inviteInvalid()
    yield* storePasskey(context, accountId, credential, name)
    yield* context.auditLog.record({ action: "invite.used", accountId, actor: "invite", targetId: credential.id })
    yield* context.auditLog.record({ action: "passkey.added", accountId, actor: "invite", targetId: credential.id })
    return yield* openSession(context, accountId, userAgent, credential.id)
  }))
})

const signInOptions = (context: DashboardAuthContext) =>
  Effect.gen(function*() {
    const library = yield* webAuthn
    const options = yield* Effect.promise(() => library.generateAuthenticationOptions({ rpID: context.rpId, userVerification: "preferred" }))
    yield* storeChallenge(context, options.challenge, "sign_in", null, null)
    return options
  })

const signInVerify = Effect.fn("DashboardAuth.signInVerify")(function*(
  context: DashboardAuthContext,
  response: AuthenticationResponseJSON,
  userAgent: string
) {
  const taken = yield* takeChallenge(context, response.response.clientDataJSON, "sign_in")
  const passkey = yield* verifyAssertion(context, response, taken.challenge)
  return yield* openSession(context, passkey.account_id, userAgent, passkey.credential_id)
})

const addPasskeyOptions = Effect.fn("DashboardAuth.addPasskeyOptions")(function*(context: DashboardAuthContext, session: DashboardSession) {
  const options = yield* registrationOptions(context, session.accountId, session.handle)
  yield* storeChallenge(context, options.challenge, "add_passkey", session.accountId, null)
  return options
})

const addPasskeyVerify = Effect.fn("DashboardAuth.addPasskeyVerify")(function*(
  context: DashboardAuthContext,
  session: DashboardSession,
  response: RegistrationResponseJSON,
  name: string
) {
  const taken = yield* takeChallenge(context, response.response.clientDataJSON, "add_passkey")
  if (taken.accountId !== session.accountId) return yield* ceremonyInvalid
  const credential = yield* verifyRegistration(context, response, taken.challenge)
  const added = yield* storePasskey(context, session.accountId, credential, name)
  yield* context.auditLog.record({
    action: "passkey.added",
    accountId: session.accountId,
    actor: `dashboard:${session.accountId}`,
    targetId: added.credential_id
  })
  yield* Effect.logInfo("dashboard passkey added").pipe(Effect.annotateLogs({ session_id: session.sessionId, credential_id: added.credential_id }))
  return added
})

const stepUpOptions = Effect.fn("DashboardAuth.stepUpOptions")(function*(context: DashboardAuthContext, session: DashboardSession) {
  const owned = yield* context.sql<{ credential_id: string; transports: string }>`
    SELECT credential_id, transports FROM dashboard_passkeys WHERE account_id = ${session.accountId}`
  const library = yield* webAuthn
  const options = yield* Effect.promise(() =>
    library.generateAuthenticationOptions({
      rpID: context.rpId,
      userVerification: "required",
      allowCredentials: owned.map((row) => ({ id: row.credential_id, transports: transportsOf(row.transports) }))
    })
  )
  // Bound to the account: another account's passkey cannot answer it.
  yield* storeChallenge(context, options.challenge, "step_up", session.accountId, null)
  return options
})

const stepUpVerify = Effect.fn("DashboardAuth.stepUpVerify")(function*(
  context: DashboardAuthContext,
  session: DashboardSession,
  response: AuthenticationResponseJSON
) {
  const taken = yield* takeChallenge(context, response.response.clientDataJSON, "step_up")
  if (taken.accountId !== session.accountId) return yield* ceremonyInvalid
  const passkey = yield* verifyAssertion(context, response, taken.challenge)
  if (passkey.account_id !== session.accountId) return yield* ceremonyInvalid
  const now = yield* Clock.currentTimeMillis
  yield* context.sql`UPDATE dashboard_sessions SET verified_at = ${isoOf(now)}::timestamptz WHERE session_id = ${session.sessionId}`
  yield* Effect.logInfo("dashboard session stepped up").pipe(Effect.annotateLogs({ session_id: session.sessionId, credential_id: passkey.credential_id }))
})

const passkeys = ({ sql }: DashboardAuthContext, accountId: string) =>
  sql<PasskeyView>`
    SELECT credential_id, name, iso_utc(created_at) AS created_at, iso_utc(last_used_at) AS last_used_at
    FROM dashboard_passkeys WHERE account_id = ${accountId} ORDER BY created_at, credential_id`

const removePasskey = Effect.fn("DashboardAuth.removePasskey")(function*(
  { auditLog, sql }: DashboardAuthContext,
  session: DashboardSession,
  credentialId: string
) {
  const accountId = session.accountId
  const ended = yield* sql.withTransaction(Effect.gen(function*() {
    const rows = yield* sql<{ credential_id: string }>`
      SELECT credential_id FROM dashboard_passkeys WHERE account_id = ${accountId} FOR UPDATE`
    if (!rows.some((row) => row.credential_id === credentialId)) {
      return yield* new DashboardAuthError({ reason: "passkey_not_found", message: "No such passkey on this account." })
    }
    // Removing the last one would lock the holder out until the operator sends a new invite.
    if (rows.length === 1) {
      return yield* new DashboardAuthError({ reason: "last_passkey", message: "This is the account's only passkey; add another before removing it." })
    }
    yield* sql`DELETE FROM dashboard_passkeys WHERE credential_id = ${credentialId} AND account_id = ${accountId}`
    yield* auditLog.record({ action: "passkey.removed", accountId, actor: `dashboard:${accountId}`, targetId: credentialId })
    // A passkey removed (lost, or someone else's) must not leave the sessions it opened alive.
    const now = yield* Clock.currentTimeMillis
    return yield* sql<{ session_id: string }>`
      UPDATE dashboard_sessions SET revoked_at = ${isoOf(now)}::timestamptz
      WHERE account_id = ${accountId} AND credential_id = ${credentialId} AND revoked_at IS NULL
      RETURNING session_id`
  }))
  yield* Effect.logInfo("dashboard passkey removed").pipe(
    Effect.annotateLogs({ session_id: session.sessionId, credential_id: credentialId, sessions_ended: ended.length })
  )
  return { endedCurrent: ended.some((row) => row.session_id === session.sessionId) }
})

const authenticate = Effect.fn("DashboardAuth.authenticate")(function*(
  { sql, mode }: DashboardAuthContext,
  token: string,
  options?: { readonly touch?: boolean }
) {
  const rows = yield* sql`
    SELECT s.session_id, s.account_id, a.handle, s.csrf_token, a.type AS account_type, a.owner_account_id,
           (extract(epoch FROM s.last_seen_at) * 1000)::bigint::text AS last_seen_ms,
           (extract(epoch FROM s.expires_at) * 1000)::bigint::text AS expires_ms,
           (extract(epoch FROM s.verified_at) * 1000)::bigint::text AS verified_ms,
           (s.revoked_at IS NOT NULL) AS revoked
    FROM dashboard_sessions s JOIN accounts a ON a.account_id = s.account_id
    WHERE s.token_hash = ${sha256(token)}`.pipe(
    Effect.flatMap((found) => decodeSessions(found).pipe(Invariant.orDie("a dashboard_sessions row decodes as the session it stores")))
  )
  const row = rows[0]
  const now = yield* Clock.currentTimeMillis
  if (row === undefined || row.revoked || now >= row.expires_ms || now - row.last_seen_ms >= sessionIdleMs) return Option.none()
  if (options?.touch !== false && now - row.last_seen_ms >= touchEveryMs) {
    yield* sql`UPDATE dashboard_sessions SET last_seen_at = ${isoOf(now)}::timestamptz WHERE session_id = ${row.session_id}`
  }
  return Option.some({
    sessionId: row.session_id,
    accountId: row.account_id,
    handle: row.handle,
    csrfToken: row.csrf_token,
    verifiedAtMs: row.verified_ms,
    // The session stands in for a key (D41): its id is the "key" its requests are
    // counted, rate-limited and idempotency-scoped under.
    principal: { keyId: row.session_id, accountId: row.account_id, accountType: row.account_type, ownerAccountId: row.owner_account_id, mode }
  } satisfies DashboardSession)
})

const sessions = Effect.fn("DashboardAuth.sessions")(function*({ sql }: DashboardAuthContext, session: DashboardSession) {
  const now = yield* Clock.currentTimeMillis
  const rows = yield* sql<{ session_id: string; user_agent: string; created_at: string; last_seen_at: string; expires_at: string }>`
    SELECT session_id, user_agent, iso_utc(created_at) AS created_at, iso_utc(last_seen_at) AS last_seen_at, iso_utc(expires_at) AS expires_at
    FROM dashboard_sessions
    WHERE account_id = ${session.accountId} AND revoked_at IS NULL AND expires_at > ${isoOf(now)}::timestamptz
      AND last_seen_at > ${isoOf(now - sessionIdleMs)}::timestamptz
    ORDER BY created_at DESC`
  return rows.map((row) => ({ ...row, current: row.session_id === session.sessionId }))
})

const signOut = ({ sql }: DashboardAuthContext, sessionId: string) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    sql`UPDATE dashboard_sessions SET revoked_at = ${isoOf(now)}::timestamptz WHERE session_id = ${sessionId} AND revoked_at IS NULL`
  ).pipe(Effect.asVoid)

const signOutEverywhere = ({ sql }: DashboardAuthContext, accountId: string) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    sql`UPDATE dashboard_sessions SET revoked_at = ${isoOf(now)}::timestamptz WHERE account_id = ${accountId} AND revoked_at IS NULL`
  ).pipe(Effect.asVoid)

const knownTransports: ReadonlyArray<AuthenticatorTransport> = ["ble", "hybrid", "internal", "nfc", "usb"]
const transportsOf = (stored: string): Array<AuthenticatorTransport> =>
  knownTransports.filter((transport) => stored.split(",").includes(transport))

/**
 * Compares the CSRF token a request carries with its session's, in constant time.
 *
 * @since 0.4.0
 * @category predicates
 */
export const csrfTokenMatches = (session: DashboardSession, presented: string | undefined): boolean => {
  if (presented === undefined) return false
  const a = Buffer.from(presented, "utf8")
  const b = Buffer.from(session.csrfToken, "utf8")
  return a.length === b.length && timingSafeEqual(a, b)
}
