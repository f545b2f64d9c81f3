/**
 * The admin listener and what account and key management leaves behind: the
 * admin token check, account creation and KYC, key issue/list/revoke with usage
 * counts, D9 mode scoping of keys, and that no API key value, pepper, admin
 * token or wallet private key is ever stored or logged in clear.
 */
import { assert, describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { privateKeyToAddress } from "viem/accounts"
import { walletKeyBinding } from "../../src/accounts/Accounts.ts"
import { Secrets } from "../../src/platform/Secrets.ts"
import { SecretBox } from "../../src/platform/SecretBox.ts"
import { runAdmin } from "../support/adminCli.ts"
import { dumpDatabase } from "../support/dumpDatabase.ts"
import { bearer, createAccount, expectEnvelope, postJson, send } from "../support/http.ts"
import { type DatabaseTarget, makeTestServer, TestServer } from "../support/TestServer.ts"

const KeyList = Schema.Struct({
  data: Schema.Array(Schema.Struct({
    key_id: Schema.String,
    name: Schema.String,
    mode: Schema.String,
    last_used_at: Schema.NullOr(Schema.String),
    request_count: Schema.Number,
    revoked_at: Schema.NullOr(Schema.String)
  }))
})


export const adminSuite = (database: DatabaseTarget) =>
  describe("admin API and secrets at rest", () => {
    layer(makeTestServer({ database }), { timeout: "60 seconds", excludeTestServices: true })(database.name, (it) => {
      it.effect("the admin listener refuses a missing or wrong token with 401 unauthorized", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          expectEnvelope(yield* send(`${server.adminUrl}/admin/accounts/acct_x`), 401, "unauthorized")
          expectEnvelope(
            yield* send(`${server.adminUrl}/admin/accounts`, postJson(bearer("adm_wrong"), { handle: "mallory" })),
            401,
            "unauthorized"
          )
        }))

      it.effect("accounts: create (handle rules, unique case-insensitively), get, set KYC", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const admin = bearer(server.adminToken)
          const created = yield* createAccount(server, "Olivia", "unverified")
          assert.strictEqual(created.handle, "@olivia")
          assert.match(created.api_key, /^hc_test_[A-Za-z0-9_-]{43}$/)
          expectEnvelope(yield* send(`${server.adminUrl}/admin/accounts`, postJson(admin, { handle: "@OLIVIA" })), 409, "handle_taken")
          for (const bad of ["ab", "x".repeat(31), "has space", "emoji😀", "UPPER!"]) {
            const refused = expectEnvelope(
              yield* send(`${server.adminUrl}/admin/accounts`, postJson(admin, { handle: bad })),
              400,
              "invalid_request"
            )
            assert.strictEqual(refused.param, "handle")
          }
          const kyc = yield* send(`${server.adminUrl}/admin/accounts/${created.account_id}/kyc`, postJson(admin, { status: "enhanced" }))
          assert.strictEqual(kyc.status, 200)
          expect(kyc.json).toMatchObject({ account_id: created.account_id, kyc_status: "enhanced" })
          const me = yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(created.api_key) })
          expect(me.json).toMatchObject({ kyc_status: "enhanced" })
          expectEnvelope(
            yield* send(`${server.adminUrl}/admin/accounts/acct_missing/kyc`, postJson(admin, { status: "verified" })),
            404,
            "account_not_found"
          )
          const badStatus = expectEnvelope(
            yield* send(`${server.adminUrl}/admin/accounts/${created.account_id}/kyc`, postJson(admin, { status: "approved" })),
            400,
            "invalid_request"
          )
          assert.strictEqual(badStatus.param, "status")
        }))

      it.effect("keys: issue test and live keys, list with usage, revoke once (D8, D9)", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const admin = bearer(server.adminToken)
          const account = yield* createAccount(server, "peggy")
          const live = yield* send(`${server.adminUrl}/admin/keys`, postJson(admin, { account_id: account.account_id, name: "prod", mode: "live" }))
          assert.strictEqual(live.status, 200)
          const liveKey = Schema.decodeUnknownSync(Schema.Struct({ key_id: Schema.String, api_key: Schema.String, mode: Schema.String }))(live.json)
          assert.match(liveKey.api_key, /^hc_live_[A-Za-z0-9_-]{43}$/)
          assert.strictEqual(liveKey.mode, "live")
          // The account record is the one resource both modes share (D9).
          const viaLive = yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(liveKey.api_key) })
          assert.strictEqual(viaLive.status, 200)
          for (let i = 0; i < 3; i++) {
            assert.strictEqual((yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(account.api_key) })).status, 200)
          }
          const listed = Schema.decodeUnknownSync(KeyList)(
            (yield* send(`${server.adminUrl}/admin/accounts/${account.account_id}/keys`, { headers: admin })).json
          )
          const byName = new Map(listed.data.map((k) => [k.name, k]))
          assert.strictEqual(byName.get("default")?.request_count, 3)
          assert.strictEqual(byName.get("prod")?.request_count, 1)
          assert.isNotNull(byName.get("default")?.last_used_at)
          assert.notInclude(JSON.stringify(listed), account.api_key)
          const revoked = yield* send(`${server.adminUrl}/admin/keys/${liveKey.key_id}/revoke`, { method: "POST", headers: admin })
          expect(revoked.json).toEqual({ key_id: liveKey.key_id, revoked: true })
          expectEnvelope(yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(liveKey.api_key) }), 401, "unauthorized")
          expectEnvelope(
            yield* send(`${server.adminUrl}/admin/keys/${liveKey.key_id}/revoke`, { method: "POST", headers: admin }),
            404,
            "key_not_found"
          )
          expectEnvelope(
            yield* send(`${server.adminUrl}/admin/keys`, postJson(admin, { account_id: "acct_missing", name: "x" })),
            404,
            "account_not_found"
          )
        }))

      it.effect("the admin command: its JSON output, and an API refusal shown with code, message and the flag", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const env = { ADMIN_URL: server.adminUrl, ADMIN_TOKEN: server.adminToken }
          const admin = (...args: ReadonlyArray<string>) => Effect.promise(() => runAdmin(args, env))
          const created = yield* admin("accounts", "create", "--handle", "cliff", "--kyc", "pending")
          expect(created, created.stderr).toMatchObject({ exitCode: 0, stderr: "" })
          expect(Object.keys(JSON.parse(created.stdout) as object)).toEqual(["account_id", "handle", "api_key", "key_id"])
          // The API's `param` is mapped back to the flag; its D1 body stays the last line, unchanged, for scripts.
          const refused = yield* admin("accounts", "create", "--handle", "ab")
          expect(refused).toMatchObject({ exitCode: 1, stdout: "" })
          const [reason, body, ...rest] = refused.stderr.trimEnd().split("\n")
          expect(rest).toEqual([])
          expect(reason).toMatch(/^--handle: .+ \(invalid_request, HTTP 400\)$/)
          expect(JSON.parse(body ?? "")).toMatchObject({ error: { code: "invalid_request", param: "handle", request_id: expect.stringMatching(/^req_/) } })
          const missing = yield* admin("keys", "create", "--account", "acct_missing", "--name", "x")
          expect(missing).toMatchObject({ exitCode: 1, stdout: "" })
          expect(missing.stderr).toMatch(/^.+ \(account_not_found, HTTP 404\)\n\{"error":/)
        }))

      it.effect("no API key, pepper, admin token or wallet private key in clear in the database or the logs", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const account = yield* createAccount(server, "trent")
          assert.strictEqual((yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(account.api_key) })).status, 200)
          // A failed attempt logs too: the presented key must not appear either.
          const wrongKey = account.api_key.slice(0, -1) + (account.api_key.endsWith("x") ? "y" : "x")
          assert.strictEqual((yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(wrongKey) })).status, 401)
          const services = server.services
          const secrets = Context.get(services, Secrets)
          const [row] = yield* Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            return yield* sql<{ wallet_key_sealed: Uint8Array }>`
              SELECT wallet_key_sealed FROM accounts WHERE account_id = ${account.account_id}`
          }).pipe(Effect.provide(services))
          const sealed = new Uint8Array(row!.wallet_key_sealed)
          const privateKey = yield* Context.get(services, SecretBox).open(sealed, walletKeyBinding(account.account_id))
          const privateKeyHex = Buffer.from(privateKey).toString("hex")
          // The sealed key opens to the key of the account's address, and only with its own binding.
          const me = yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(account.api_key) })
          expect(me.json).toMatchObject({ public_key: privateKeyToAddress(`0x${privateKeyHex}`) })
          const wrongBinding = yield* Effect.flip(
            Context.get(services, SecretBox).open(sealed, walletKeyBinding("acct_other"))
          )
          assert.strictEqual(wrongBinding.name, "SecretBoxOpenError")

          const dump = yield* dumpDatabase.pipe(Effect.provide(services))
          const logs = server.logs.join("\n")
          const pepper = Buffer.from(Redacted.value(secrets.apiKeyPepper))
          const forbidden: Record<string, string> = {
            "api key": account.api_key,
            "api key random part": account.api_key.slice("hc_test_".length),
            "pepper (text)": pepper.toString("utf8"),
            "pepper (hex)": pepper.toString("hex"),
            "admin token": Redacted.value(secrets.adminToken),
            "wallet private key (hex)": privateKeyHex,
            "wallet KEK (base64)": Buffer.from(Redacted.value(secrets.walletKek)).toString("base64"),
            "wallet KEK (hex)": Buffer.from(Redacted.value(secrets.walletKek)).toString("hex")
          }
          assert.isAbove(dump.length, 100, "the dump should contain the rows")
          assert.isAbove(logs.length, 100, "the logs should contain the requests")
          for (const [what, value] of Object.entries(forbidden)) {
            assert.notInclude(dump.toLowerCase(), value.toLowerCase(), `${what} found in the database dump`)
            assert.notInclude(logs.toLowerCase(), value.toLowerCase(), `${what} found in the logs`)
          }
        }))
    })
  })
