/**
 * Goal: the dashboard's sign-in and session rules hold on the server, without a
 * browser (a software authenticator answers the WebAuthn ceremonies): invites
 * are one-time and never for agents; a ceremony's answer counts once; the
 * cookie is HttpOnly, SameSite=Strict and Secure under https; every state
 * change needs the dashboard's Origin and the session's CSRF token, on
 * `/dashboard/api` and on `/v1` alike; idle and absolute expiry, sign-out
 * everywhere and revocation take effect at once; sign-in is rate-limited; the
 * last passkey cannot be removed; answers carry the security headers.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect } from "effect"
import { SqlClient } from "effect/sql"
import { ApiKeys } from "../../src/apikeys/ApiKeys.ts"
import { bearer, createAccount, expectEnvelope, postJson, send } from "../support/http.ts"
import { makeSoftAuthenticator } from "../support/softAuthenticator.ts"
import { type DatabaseTarget, makeTestServer, TestServer } from "../support/TestServer.ts"

// An https origin, so the cookie is Secure, and named with the __Host- prefix.
const origin = "https://dash.example"
const cookieName = "__Host-pps_session"

interface Options {
  readonly challenge: string
  readonly rp: { readonly id?: string }
  readonly rpId?: string
}

const sessionCookieOf = (setCookie: string | null): string => {
  const match = new RegExp(`^${cookieName}=([^;]*)`).exec(setCookie ?? "")
  if (match === null) throw new Error(`no session cookie in ${setCookie}`)
  return match[1]!
}

/**
 * The dashboard's sign-in suite, run against one database target.
 */
export const dashboardAuthSuite = (database: DatabaseTarget) => {
describe("dashboard sign-in and sessions", () => {
  layer(makeTestServer({ database, config: { dashboardOrigin: origin, chainExplorerTxUrlTestnet: "https://explorer.example/tx/{tx_hash}" } }), { timeout: "60 seconds", excludeTestServices: true })(database.name, (it) => {
    const authenticator = makeSoftAuthenticator("dash.example")
    /** Enrolls an account's first passkey (with `device`) through an invite; the session cookie and CSRF token. */
    const enroll = (handle: string, device = makeSoftAuthenticator("dash.example")) => Effect.gen(function*() {
      const server = yield* TestServer
      const alice = yield* createAccount(server, handle)
      const invite = yield* send(`${server.adminUrl}/admin/accounts/${alice.account_id}/invites`, { method: "POST", headers: bearer(server.adminToken) })
      assert.strictEqual(invite.status, 201)
      const url = (invite.json as { url: string }).url
      assert.match(url, /^https:\/\/dash\.example\/dashboard\/enroll#invite=[A-Za-z0-9_-]{43}$/)
      const token = url.split("#invite=")[1]!
      const options = yield* send(`${server.baseUrl}/dashboard/api/enroll/options`, postJson({ origin }, { invite: token }))
      assert.strictEqual(options.status, 200)
      const answer = device.register(options.json as Options, origin)
      const verified = yield* send(`${server.baseUrl}/dashboard/api/enroll/verify`, postJson({ origin }, { response: answer, name: "laptop" }))
      assert.strictEqual(verified.status, 200, verified.text)
      return { server, alice, token, answer, cookie: sessionCookieOf(verified.headers.get("set-cookie")), setCookie: verified.headers.get("set-cookie") ?? "", csrf: (verified.json as { csrf_token: string }).csrf_token }
    })

    it.effect("enrolls once per invite, sets a strict cookie, and the session reads /v1 and its own endpoints", () =>
      Effect.gen(function*() {
        const { server, alice, token, answer, cookie, setCookie } = yield* enroll("alice", authenticator)
        assert.match(setCookie, /^__Host-pps_session=/)
        assert.match(setCookie, /HttpOnly/)
        assert.match(setCookie, /SameSite=Strict/)
        assert.match(setCookie, /Secure/)
        assert.match(setCookie, /Path=\//)
        // The invite is spent, and the same signed answer does not count twice.
        expectEnvelope(yield* send(`${server.baseUrl}/dashboard/api/enroll/options`, postJson({ origin }, { invite: token })), 404, "invite_invalid")
        expectEnvelope(yield* send(`${server.baseUrl}/dashboard/api/enroll/verify`, postJson({ origin }, { response: answer })), 401, "unauthorized")
        // No Origin, or another one: refused before anything else.
        expectEnvelope(yield* send(`${server.baseUrl}/dashboard/api/sign-in/options`, postJson({}, {})), 403, "forbidden")
        expectEnvelope(yield* send(`${server.baseUrl}/dashboard/api/sign-in/options`, postJson({ origin: "https://evil.example" }, {})), 403, "forbidden")

        const session = yield* send(`${server.baseUrl}/dashboard/api/session`, { headers: { cookie: `${cookieName}=${cookie}` } })
        assert.strictEqual(session.status, 200)
        // The page links transaction hashes to the explorer of the session's chain.
        assert.deepInclude(session.json, { account_id: alice.account_id, handle: "@alice", mode: "test", explorer_tx_url: "https://explorer.example/tx/{tx_hash}" })
        assert.strictEqual(session.headers.get("cache-control"), "no-store")
        assert.match(session.headers.get("content-security-policy") ?? "", /script-src 'self' 'wasm-unsafe-eval';/)
        assert.strictEqual(session.headers.get("x-frame-options"), "DENY")
        assert.strictEqual(session.headers.get("strict-transport-security"), "max-age=31536000")
        const me = yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: { cookie: `${cookieName}=${cookie}` } })
        assert.strictEqual(me.status, 200)
        assert.strictEqual((me.json as { account_id: string }).account_id, alice.account_id)
        // A cookie that is no session is no credential.
        expectEnvelope(yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: { cookie: `${cookieName}=forged` } }), 401, "unauthorized")
        // The page's probe on opening: 200 either way, so a signed-out visit logs no error.
        const state = yield* send(`${server.baseUrl}/dashboard/api/session-state`, { headers: { cookie: `${cookieName}=${cookie}` } })
        assert.strictEqual(state.status, 200)
        assert.deepInclude(state.json, { signed_in: true, account_id: alice.account_id, handle: "@alice", csrf_token: (session.json as { csrf_token: string }).csrf_token })
        assert.strictEqual(state.headers.get("cache-control"), "no-store")
        for (const headers of [{}, { cookie: `${cookieName}=forged` }]) {
          const signedOut = yield* send(`${server.baseUrl}/dashboard/api/session-state`, { headers })
          assert.strictEqual(signedOut.status, 200)
          assert.deepStrictEqual(signedOut.json, { signed_in: false })
        }
        // Agents get no invite.
        expectEnvelope(yield* send(`${server.adminUrl}/admin/accounts/acct_01JZZZZZZZZZZZZZZZZZZZZZZZ/invites`, { method: "POST", headers: bearer(server.adminToken) }), 404, "account_not_found")
      }))

    it.effect("D60: a suspended account's session is refused (403 account_suspended) on /v1 and the dashboard's routes; the enrollment is audited", () =>
      Effect.gen(function*() {
        const { server, alice, cookie } = yield* enroll("suzie")
        const withCookie = { headers: { cookie: `${cookieName}=${cookie}` } }
        const admin = (path: string) => send(`${server.adminUrl}/admin${path}`, { method: "POST", headers: bearer(server.adminToken) })
        assert.strictEqual((yield* admin(`/accounts/${alice.account_id}/suspend`)).status, 200)
        expectEnvelope(yield* send(`${server.baseUrl}/v1/accounts/me`, withCookie), 403, "account_suspended")
        const own = yield* send(`${server.baseUrl}/dashboard/api/session`, withCookie)
        assert.strictEqual(own.status, 403, own.text)
        assert.strictEqual((own.json as { error: { code: string } }).error.code, "account_suspended")
        assert.strictEqual((yield* admin(`/accounts/${alice.account_id}/reactivate`)).status, 200)
        assert.strictEqual((yield* send(`${server.baseUrl}/v1/accounts/me`, withCookie)).status, 200)
        assert.strictEqual((yield* send(`${server.baseUrl}/dashboard/api/session`, withCookie)).status, 200)
        const audit = yield* send(`${server.adminUrl}/admin/audit?account_id=${alice.account_id}`, { headers: bearer(server.adminToken) })
        const entries = (audit.json as { data: ReadonlyArray<{ action: string; actor: string; ip: string | null }> }).data
        assert.deepStrictEqual(entries.map((e) => `${e.action} ${e.actor}`).reverse(), [
          "account.created operator",
          "api_key.created operator",
          "invite.issued operator",
          "invite.used invite",
          "passkey.added invite",
          "account.suspended operator",
          "account.reactivated operator"
        ])
        for (const entry of entries) assert.strictEqual(entry.ip, "127.0.0.1")
      }))

    it.effect("every state change needs the Origin and the CSRF token; keys created here are shown once and revoked at once", () =>
      Effect.gen(function*() {
        const { server, alice: carol, cookie, csrf } = yield* enroll("carol")
        const withCookie = { cookie: `${cookieName}=${cookie}` }
        const agent = { name: "csrf-bot", spend_policy: { daily_limit_usdg: 10, per_transaction_limit_usdg: 5 } }
        // On /v1 and on /dashboard/api alike.
        expectEnvelope(yield* send(`${server.baseUrl}/v1/accounts/me/agents`, postJson({ ...withCookie, origin }, agent)), 403, "forbidden")
        expectEnvelope(yield* send(`${server.baseUrl}/v1/accounts/me/agents`, postJson({ ...withCookie, "x-csrf-token": csrf }, agent)), 403, "forbidden")
        expectEnvelope(yield* send(`${server.baseUrl}/v1/accounts/me/agents`, postJson({ ...withCookie, origin, "x-csrf-token": `${csrf}x` }, agent)), 403, "forbidden")
        assert.strictEqual((yield* send(`${server.baseUrl}/v1/accounts/me/agents`, postJson({ ...withCookie, origin, "x-csrf-token": csrf }, agent))).status, 201)
        expectEnvelope(yield* send(`${server.baseUrl}/dashboard/api/api-keys`, postJson({ ...withCookie, origin }, { name: "ci" })), 403, "forbidden")

        const created = yield* send(`${server.baseUrl}/dashboard/api/api-keys`, postJson({ ...withCookie, origin, "x-csrf-token": csrf }, { name: "ci" }))
        assert.strictEqual(created.status, 201)
        const key = created.json as { key_id: string; api_key: string; mode: string }
        assert.match(key.api_key, /^hc_test_[A-Za-z0-9_-]{43}$/)
        assert.strictEqual((yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(key.api_key) })).status, 200)
        // The holder's list shows the key without its value.
        const listed = yield* send(`${server.baseUrl}/v1/accounts/me/api-keys`, { headers: withCookie })
        assert.strictEqual(listed.status, 200)
        assert.isFalse(listed.text.includes(key.api_key))
        assert.isTrue(listed.text.includes(key.key_id))

        const revoked = yield* send(`${server.baseUrl}/dashboard/api/api-keys/${key.key_id}/revoke`, postJson({ ...withCookie, origin, "x-csrf-token": csrf }, {}))
        assert.strictEqual(revoked.status, 200)
        expectEnvelope(yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(key.api_key) }), 401, "unauthorized")
        expectEnvelope(yield* send(`${server.baseUrl}/dashboard/api/api-keys/${key.key_id}/revoke`, postJson({ ...withCookie, origin, "x-csrf-token": csrf }, {})), 404, "api_key_not_found")
        // A key of the other mode (D9) is not this test-mode session's to revoke.
        const alive = yield* Context.get(server.services, ApiKeys).issue(carol.account_id, "live-key", "live")
        expectEnvelope(yield* send(`${server.baseUrl}/dashboard/api/api-keys/${alive.keyId}/revoke`, postJson({ ...withCookie, origin, "x-csrf-token": csrf }, {})), 404, "api_key_not_found")
        const carolKeys = yield* Context.get(server.services, ApiKeys).list(carol.account_id)
        assert.isNull(carolKeys.find((k) => k.key_id === alive.keyId)?.revoked_at)
        // Another account's key is not this session's to revoke.
        const bob = yield* createAccount(server, "bob")
        expectEnvelope(yield* send(`${server.baseUrl}/dashboard/api/api-keys/${bob.key_id}/revoke`, postJson({ ...withCookie, origin, "x-csrf-token": csrf }, {})), 404, "api_key_not_found")
        assert.strictEqual((yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(bob.api_key) })).status, 200)
      }))

    it.effect("signs in with the passkey; idle, absolute expiry and sign-out everywhere end sessions; the last passkey stays", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const signIn = Effect.gen(function*() {
          const options = yield* send(`${server.baseUrl}/dashboard/api/sign-in/options`, postJson({ origin }, {}))
          assert.strictEqual(options.status, 200)
          const verified = yield* send(`${server.baseUrl}/dashboard/api/sign-in/verify`, postJson({ origin }, { response: authenticator.authenticate(options.json as Options, origin) }))
          assert.strictEqual(verified.status, 200, verified.text)
          return { cookie: sessionCookieOf(verified.headers.get("set-cookie")), csrf: (verified.json as { csrf_token: string }).csrf_token }
        })
        const first = yield* signIn
        const second = yield* signIn
        const third = yield* signIn
        const live = (cookie: string) => send(`${server.baseUrl}/dashboard/api/session`, { headers: { cookie: `${cookieName}=${cookie}` } }).pipe(Effect.map((r) => r.status))
        assert.strictEqual(yield* live(first.cookie), 200)

        const sql = Context.get(server.services, SqlClient.SqlClient)
        const sessionId = (cookie: string) =>
          send(`${server.baseUrl}/dashboard/api/session`, { headers: { cookie: `${cookieName}=${cookie}` } }).pipe(Effect.map((r) => (r.json as { session_id: string }).session_id))
        // Idle: unused for 31 minutes.
        const idleId = yield* sessionId(second.cookie)
        yield* sql`UPDATE dashboard_sessions SET last_seen_at = now() - interval '31 minutes' WHERE session_id = ${idleId}`
        assert.strictEqual(yield* live(second.cookie), 401)
        // Absolute: past its end however active.
        const oldId = yield* sessionId(third.cookie)
        yield* sql`UPDATE dashboard_sessions SET expires_at = now() - interval '1 second' WHERE session_id = ${oldId}`
        assert.strictEqual(yield* live(third.cookie), 401)

        const passkeys = yield* send(`${server.baseUrl}/dashboard/api/passkeys`, { headers: { cookie: `${cookieName}=${first.cookie}` } })
        const only = (passkeys.json as { data: Array<{ credential_id: string }> }).data
        assert.strictEqual(only.length, 1)
        const removal = yield* send(`${server.baseUrl}/dashboard/api/passkeys/${only[0]!.credential_id}`, {
          method: "DELETE",
          headers: { cookie: `${cookieName}=${first.cookie}`, origin, "x-csrf-token": first.csrf }
        })
        expectEnvelope(removal, 409, "last_passkey")

        const fourth = yield* signIn
        const out = yield* send(`${server.baseUrl}/dashboard/api/sign-out-everywhere`, postJson({ cookie: `${cookieName}=${first.cookie}`, origin, "x-csrf-token": first.csrf }, {}))
        assert.strictEqual(out.status, 200)
        assert.match(out.headers.get("set-cookie") ?? "", /^__Host-pps_session=;/)
        assert.strictEqual(yield* live(first.cookie), 401)
        assert.strictEqual(yield* live(fourth.cookie), 401)
        assert.strictEqual((yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: { cookie: `${cookieName}=${fourth.cookie}` } })).status, 401)
      }))

    it.effect("a passkey or an API key needs a passkey assertion of the last five minutes; the step-up is the account's and counts once", () =>
      Effect.gen(function*() {
        const device = makeSoftAuthenticator("dash.example")
        const { server, cookie, csrf } = yield* enroll("dave", device)
        const signedIn = { cookie: `${cookieName}=${cookie}`, origin, "x-csrf-token": csrf }
        // Just enrolled: verified now, so a key needs no second touch, the holder's or its agent's (D44).
        assert.strictEqual((yield* send(`${server.baseUrl}/dashboard/api/api-keys`, postJson(signedIn, { name: "fresh" }))).status, 201)
        const agentCreated = yield* send(`${server.baseUrl}/v1/accounts/me/agents`, postJson(signedIn, {
          name: "stepper",
          spend_policy: { daily_limit_usdg: 1, per_transaction_limit_usdg: 1 }
        }))
        assert.strictEqual(agentCreated.status, 201, agentCreated.text)
        const agentKeysUrl = `${server.baseUrl}/v1/agents/${(agentCreated.json as { account_id: string }).account_id}/keys`
        assert.strictEqual((yield* send(agentKeysUrl, postJson(signedIn, { name: "fresh" }))).status, 201)

        const sql = Context.get(server.services, SqlClient.SqlClient)
        const sessionId = ((yield* send(`${server.baseUrl}/dashboard/api/session`, { headers: { cookie: `${cookieName}=${cookie}` } })).json as { session_id: string }).session_id
        yield* sql`UPDATE dashboard_sessions SET verified_at = now() - interval '6 minutes' WHERE session_id = ${sessionId}`
        // The cookie alone no longer adds a passkey, removes one, or creates a key.
        expectEnvelope(yield* send(`${server.baseUrl}/dashboard/api/api-keys`, postJson(signedIn, { name: "stale" })), 403, "reauthentication_required")
        expectEnvelope(yield* send(`${server.baseUrl}/dashboard/api/passkeys/options`, postJson(signedIn, {})), 403, "reauthentication_required")
        expectEnvelope(yield* send(`${server.baseUrl}/dashboard/api/passkeys/verify`, postJson(signedIn, { response: device.register({ challenge: "x", rp: { id: "dash.example" } }, origin) })), 403, "reauthentication_required")
        expectEnvelope(yield* send(`${server.baseUrl}/dashboard/api/passkeys/${device.credentialId}`, { method: "DELETE", headers: signedIn }), 403, "reauthentication_required")
        // On /v1 too: a session does not create an agent's key without the passkey (an API key is not asked).
        expectEnvelope(yield* send(agentKeysUrl, postJson(signedIn, { name: "stale" })), 403, "reauthentication_required")
        // Reading is not gated, nor is revoking (it takes access away).
        assert.strictEqual((yield* send(`${server.baseUrl}/dashboard/api/passkeys`, { headers: { cookie: `${cookieName}=${cookie}` } })).status, 200)
        const agentKeys = (yield* send(agentKeysUrl, { headers: { cookie: `${cookieName}=${cookie}` } })).json as { data: Array<{ key_id: string; name: string }> }
        assert.deepStrictEqual(agentKeys.data.map((key) => key.name), ["fresh"])
        assert.strictEqual((yield* send(`${agentKeysUrl}/${agentKeys.data[0]!.key_id}/revoke`, postJson(signedIn, {}))).status, 200)

        // Another account's passkey cannot answer this account's step-up.
        const stranger = makeSoftAuthenticator("dash.example")
        yield* enroll("erin", stranger)
        const foreignOptions = yield* send(`${server.baseUrl}/dashboard/api/step-up/options`, postJson(signedIn, {}))
        assert.strictEqual(foreignOptions.status, 200)
        expectEnvelope(yield* send(`${server.baseUrl}/dashboard/api/step-up/verify`, postJson(signedIn, { response: stranger.authenticate(foreignOptions.json as Options, origin) })), 403, "reauthentication_failed")
        expectEnvelope(yield* send(`${server.baseUrl}/dashboard/api/api-keys`, postJson(signedIn, { name: "stale" })), 403, "reauthentication_required")

        const options = yield* send(`${server.baseUrl}/dashboard/api/step-up/options`, postJson(signedIn, {}))
        assert.strictEqual(options.status, 200)
        assert.strictEqual((options.json as { userVerification?: string }).userVerification, "required")
        const answer = device.authenticate(options.json as Options, origin)
        const stepped = yield* send(`${server.baseUrl}/dashboard/api/step-up/verify`, postJson(signedIn, { response: answer }))
        assert.strictEqual(stepped.status, 200, stepped.text)
        // The same answer does not count twice.
        expectEnvelope(yield* send(`${server.baseUrl}/dashboard/api/step-up/verify`, postJson(signedIn, { response: answer })), 403, "reauthentication_failed")
        assert.strictEqual((yield* send(`${server.baseUrl}/dashboard/api/api-keys`, postJson(signedIn, { name: "stepped-up" }))).status, 201)
        assert.strictEqual((yield* send(agentKeysUrl, postJson(signedIn, { name: "stepped-up" }))).status, 201)
        // Step-up needs the session's CSRF token like every state change.
        expectEnvelope(yield* send(`${server.baseUrl}/dashboard/api/step-up/options`, postJson({ cookie: `${cookieName}=${cookie}`, origin }, {})), 403, "forbidden")
      }))

    it.effect("removing a passkey ends the sessions it opened, and only those", () =>
      Effect.gen(function*() {
        const first = makeSoftAuthenticator("dash.example")
        const { server, cookie: enrolled, csrf } = yield* enroll("gina", first)
        // A second passkey, added from the enrollment's session (verified just now).
        const second = makeSoftAuthenticator("dash.example")
        const addOptions = yield* send(`${server.baseUrl}/dashboard/api/passkeys/options`, postJson({ cookie: `${cookieName}=${enrolled}`, origin, "x-csrf-token": csrf }, {}))
        assert.strictEqual(addOptions.status, 200)
        const added = yield* send(`${server.baseUrl}/dashboard/api/passkeys/verify`, postJson({ cookie: `${cookieName}=${enrolled}`, origin, "x-csrf-token": csrf }, { response: second.register(addOptions.json as Options, origin), name: "phone" }))
        assert.strictEqual(added.status, 201, added.text)
        const signInWith = (device: typeof first) => Effect.gen(function*() {
          const options = yield* send(`${server.baseUrl}/dashboard/api/sign-in/options`, postJson({ origin }, {}))
          const verified = yield* send(`${server.baseUrl}/dashboard/api/sign-in/verify`, postJson({ origin }, { response: device.authenticate(options.json as Options, origin) }))
          assert.strictEqual(verified.status, 200, verified.text)
          return { cookie: sessionCookieOf(verified.headers.get("set-cookie")), csrf: (verified.json as { csrf_token: string }).csrf_token }
        })
        const byFirst = yield* signInWith(first)
        const bySecond = yield* signInWith(second)
        const live = (cookie: string) => send(`${server.baseUrl}/dashboard/api/session`, { headers: { cookie: `${cookieName}=${cookie}` } }).pipe(Effect.map((r) => r.status))

        const removal = yield* send(`${server.baseUrl}/dashboard/api/passkeys/${first.credentialId}`, {
          method: "DELETE",
          headers: { cookie: `${cookieName}=${bySecond.cookie}`, origin, "x-csrf-token": bySecond.csrf }
        })
        assert.strictEqual(removal.status, 204, removal.text)
        // Both sessions the removed passkey opened (enrollment and sign-in) are over; the other passkey's is not.
        assert.strictEqual(yield* live(enrolled), 401)
        assert.strictEqual(yield* live(byFirst.cookie), 401)
        assert.strictEqual(yield* live(bySecond.cookie), 200)

        // Removing the passkey of the calling session ends it and clears its cookie.
        const third = makeSoftAuthenticator("dash.example")
        const moreOptions = yield* send(`${server.baseUrl}/dashboard/api/passkeys/options`, postJson({ cookie: `${cookieName}=${bySecond.cookie}`, origin, "x-csrf-token": bySecond.csrf }, {}))
        assert.strictEqual((yield* send(`${server.baseUrl}/dashboard/api/passkeys/verify`, postJson({ cookie: `${cookieName}=${bySecond.cookie}`, origin, "x-csrf-token": bySecond.csrf }, { response: third.register(moreOptions.json as Options, origin) }))).status, 201)
        const own = yield* send(`${server.baseUrl}/dashboard/api/passkeys/${second.credentialId}`, {
          method: "DELETE",
          headers: { cookie: `${cookieName}=${bySecond.cookie}`, origin, "x-csrf-token": bySecond.csrf }
        })
        assert.strictEqual(own.status, 204)
        assert.match(own.headers.get("set-cookie") ?? "", /^__Host-pps_session=;/)
        assert.strictEqual(yield* live(bySecond.cookie), 401)
      }))

    it.effect("an open event stream's credential re-checks do not keep its session from idling out", () =>
      Effect.gen(function*() {
        const { server, cookie } = yield* enroll("frank")
        const sql = Context.get(server.services, SqlClient.SqlClient)
        const sessionId = ((yield* send(`${server.baseUrl}/dashboard/api/session`, { headers: { cookie: `${cookieName}=${cookie}` } })).json as { session_id: string }).session_id
        const lastSeen = sql<{ idle_s: string }>`
          SELECT floor(extract(epoch FROM now() - last_seen_at))::text AS idle_s FROM dashboard_sessions WHERE session_id = ${sessionId}`.pipe(
          Effect.map((rows) => Number(rows[0]!.idle_s))
        )
        const abort = new AbortController()
        yield* Effect.addFinalizer(() => Effect.sync(() => abort.abort()))
        const stream = yield* Effect.promise(() => fetch(`${server.baseUrl}/v1/events/stream`, { headers: { cookie: `${cookieName}=${cookie}` }, signal: abort.signal }))
        assert.strictEqual(stream.status, 200)
        // Unused for 10 minutes while the stream stays open; the stream re-checks every 2 s.
        yield* sql`UPDATE dashboard_sessions SET last_seen_at = now() - interval '10 minutes' WHERE session_id = ${sessionId}`
        yield* Effect.sleep("5 seconds")
        assert.isAtLeast(yield* lastSeen, 10 * 60)
        abort.abort()
      }).pipe(Effect.scoped), { timeout: 30_000 })

    it.effect("sign-in steps are rate-limited per client address, with Retry-After; X-Forwarded-For counts for nothing without TRUSTED_PROXIES", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        let limited: { status: number; retryAfter: string | null } | undefined
        for (let i = 0; i < 40 && limited === undefined; i++) {
          // Every attempt names another client: without trusted proxies they share the socket's bucket.
          const response = yield* send(`${server.baseUrl}/dashboard/api/sign-in/options`, postJson({ origin, "x-forwarded-for": `203.0.113.${i}` }, {}))
          if (response.status === 429) {
            expectEnvelope(response, 429, "rate_limited")
            limited = { status: response.status, retryAfter: response.headers.get("retry-after") }
          }
        }
        assert.isDefined(limited)
        assert.match(limited?.retryAfter ?? "", /^\d+$/)
      }))
  })

  // The test client reaches the server from loopback: trusted here, as the balancer is in the cluster.
  // And a plain http://localhost origin, as in development.
  const local = "http://localhost"
  layer(makeTestServer({ database, config: { dashboardOrigin: local, trustedProxies: ["127.0.0.1", "::1"] } }), { timeout: "60 seconds", excludeTestServices: true })(`${database.name}, http://localhost behind a trusted proxy`, (it) => {
    it.effect("on http://localhost the session cookie keeps the plain name (a __Host- cookie needs Secure) and is not Secure", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const holder = yield* createAccount(server, "hank")
        const invite = yield* send(`${server.adminUrl}/admin/accounts/${holder.account_id}/invites`, { method: "POST", headers: bearer(server.adminToken) })
        const token = (invite.json as { url: string }).url.split("#invite=")[1]!
        const options = yield* send(`${server.baseUrl}/dashboard/api/enroll/options`, postJson({ origin: local }, { invite: token }))
        const answer = makeSoftAuthenticator("localhost").register(options.json as Options, local)
        const verified = yield* send(`${server.baseUrl}/dashboard/api/enroll/verify`, postJson({ origin: local }, { response: answer }))
        assert.strictEqual(verified.status, 200, verified.text)
        const setCookie = verified.headers.get("set-cookie") ?? ""
        assert.match(setCookie, /^pps_session=[A-Za-z0-9_-]{43};/)
        assert.notMatch(setCookie, /Secure/)
        const cookie = /^pps_session=([^;]*)/.exec(setCookie)![1]!
        assert.strictEqual((yield* send(`${server.baseUrl}/dashboard/api/session`, { headers: { cookie: `pps_session=${cookie}` } })).status, 200)
        // The other name is not read here.
        assert.strictEqual((yield* send(`${server.baseUrl}/dashboard/api/session`, { headers: { cookie: `__Host-pps_session=${cookie}` } })).status, 401)
      }))

    it.effect("with TRUSTED_PROXIES, two clients behind one proxy have separate sign-in buckets, and a client cannot choose its bucket", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const attempt = (forwardedFor: string) =>
          send(`${server.baseUrl}/dashboard/api/sign-in/options`, postJson({ origin: local, "x-forwarded-for": forwardedFor }, {})).pipe(Effect.map((r) => r.status))
        const statuses: Array<number> = []
        for (let i = 0; i < 31; i++) statuses.push(yield* attempt("198.51.100.7"))
        assert.deepStrictEqual(statuses.slice(0, 30).every((status) => status === 200), true)
        assert.strictEqual(statuses[30], 429)
        // Another client behind the same proxy is not locked out.
        assert.strictEqual(yield* attempt("198.51.100.8"), 200)
        // Entries left of the proxy's own are the client's to write: they do not move it to another bucket.
        assert.strictEqual(yield* attempt("192.0.2.99, 198.51.100.7"), 429)
        // IPv6 clients count by /64: another address in the same /64 shares the bucket.
        for (let i = 0; i < 30; i++) assert.strictEqual(yield* attempt(`2001:db8:1:2::${(i + 1).toString(16)}`), 200)
        assert.strictEqual(yield* attempt("2001:db8:1:2:ffff::1"), 429)
        assert.strictEqual(yield* attempt("2001:db8:1:3::1"), 200)
      }))
  })
})
}
