/**
 * The operator's console over real sockets, on either database: the account directory (pages,
 * search by handle, filters by type, KYC and status), suspension and reactivation (D60: a
 * suspended account's keys and its agents' keys answer 403 `account_suspended`, other accounts
 * are untouched, and its webhooks keep being delivered), the audit log (who, when, from where;
 * append-only in SQL), an account's webhooks with their delivery health, and D61's cap on agents
 * per account with `GET /v1/agents` paged.
 */
import { afterAll, assert, describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import type { EventInput } from "@pps/api/Events"
import { Outbox } from "../../src/events/Outbox.ts"
import { runAdmin } from "../support/adminCli.ts"
import { bearer, createAccount, expectEnvelope, patchJson, postJson, send } from "../support/http.ts"
import { type DatabaseTarget, makeTestServer, TestServer, type TestServerShape } from "../support/TestServer.ts"
import { eventually, makeTestCa, removeTestCa, startReceiver } from "../support/webhooks-receiver.ts"

const ca = makeTestCa()
const receiver = await startReceiver(ca, ({ path }) => path.startsWith("/fail") ? { status: 500 } : { status: 200 })
afterAll(async () => {
  await receiver.close()
  removeTestCa(ca)
})

/** A small cap, so the test reaches it with a few agents. */
const agentsPerAccountMax = 3

const AccountPage = Schema.Struct({
  data: Schema.Array(Schema.Struct({
    account_id: Schema.String,
    handle: Schema.String,
    type: Schema.String,
    kyc_status: Schema.String,
    status: Schema.String,
    owner_account_id: Schema.NullOr(Schema.String),
    suspended_at: Schema.NullOr(Schema.String)
  })),
  limit: Schema.Number,
  offset: Schema.Number,
  has_more: Schema.Boolean
})

const AuditPage = Schema.Struct({
  data: Schema.Array(Schema.Struct({
    audit_id: Schema.String,
    occurred_at: Schema.String,
    action: Schema.String,
    account_id: Schema.NullOr(Schema.String),
    actor: Schema.String,
    target_id: Schema.NullOr(Schema.String),
    ip: Schema.NullOr(Schema.String),
    request_id: Schema.NullOr(Schema.String)
  })),
  has_more: Schema.Boolean
})

const AgentPage = Schema.Struct({
  data: Schema.Array(Schema.Struct({ account_id: Schema.String, handle: Schema.String })),
  limit: Schema.Number,
  offset: Schema.Number,
  has_more: Schema.Boolean
})

const policy = { daily_limit_usdg: 10, per_transaction_limit_usdg: 5 }

/** An error's message and those of its causes, for matching the database's own words. */
const causeText = (error: unknown, depth = 0): string =>
  depth > 5 || !(error instanceof Error) ? String(error) : `${error.message} ${causeText(error.cause, depth + 1)}`

const admin = (
  server: TestServerShape,
  path: string,
  init: { readonly method?: string; readonly headers?: Record<string, string>; readonly body?: string } = {}
) => send(`${server.adminUrl}/admin${path}`, { ...init, headers: { ...bearer(server.adminToken), ...init.headers } })

const decoded = <A>(schema: Schema.Decoder<A>, response: { readonly status: number; readonly json: unknown; readonly text: string }) => {
  assert.strictEqual(response.status, 200, response.text)
  return Schema.decodeUnknownSync(schema)(response.json)
}

const auditOf = (server: TestServerShape, accountId: string) =>
  admin(server, `/audit?account_id=${accountId}&limit=100`).pipe(Effect.map((response) => decoded(AuditPage, response).data))

const createAgent = (server: TestServerShape, apiKey: string, name: string) =>
  send(`${server.baseUrl}/v1/accounts/me/agents`, postJson(bearer(apiKey), { name, spend_policy: policy }))

const confirmedEvent = (accountId: string, handle: string): EventInput => ({
  mode: "test",
  recipientAccountId: accountId,
  payload: {
    event: "transfer.confirmed",
    account: handle,
    direction: "received",
    counterparty: "@someone",
    asset: "USDG",
    confidential: true,
    tx_hash: `0x${"ab".repeat(32)}`,
    transfer_id: "tr_01JCONSOLE"
  }
})

export const consoleSuite = (database: DatabaseTarget) =>
  describe("the operator's console", () => {
    layer(makeTestServer({ database, config: { agentsPerAccountMax, webhookCaFile: Option.some(ca.caFile) } }), {
      timeout: "90 seconds",
      excludeTestServices: true
    })(database.name, (it) => {
      it.effect("accounts list: pages oldest first, search by part of a handle, filters by type, KYC and status", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const made = []
          for (const [handle, kyc] of [["dir-ann", "verified"], ["dir-bob", "pending"], ["dir_cy", "verified"], ["dir-cy", "verified"]] as const) {
            made.push(yield* createAccount(server, handle, kyc))
          }
          const all = decoded(AccountPage, yield* admin(server, "/accounts?handle=dir"))
          expect(all.data.map((a) => a.handle)).toEqual(["@dir-ann", "@dir-bob", "@dir_cy", "@dir-cy"])
          expect(all).toMatchObject({ limit: 20, offset: 0, has_more: false })
          expect(all.data[0]).toMatchObject({ type: "personal", status: "active", owner_account_id: null, suspended_at: null })
          const first = decoded(AccountPage, yield* admin(server, "/accounts?handle=@DIR&limit=2"))
          expect(first.data.map((a) => a.handle)).toEqual(["@dir-ann", "@dir-bob"])
          assert.isTrue(first.has_more)
          const second = decoded(AccountPage, yield* admin(server, "/accounts?handle=dir&limit=2&offset=2"))
          expect(second.data.map((a) => a.handle)).toEqual(["@dir_cy", "@dir-cy"])
          assert.isFalse(second.has_more)
          // `%` and `_` in the search match themselves, not any character.
          const literal = decoded(AccountPage, yield* admin(server, `/accounts?handle=${encodeURIComponent("r_c")}`))
          expect(literal.data.map((a) => a.handle)).toEqual(["@dir_cy"])
          const percent = decoded(AccountPage, yield* admin(server, `/accounts?handle=${encodeURIComponent("%")}`))
          expect(percent.data).toEqual([])
          const pending = decoded(AccountPage, yield* admin(server, "/accounts?handle=dir&kyc_status=pending"))
          expect(pending.data.map((a) => a.account_id)).toEqual([made[1]!.account_id])
          yield* createAgent(server, made[0]!.api_key, "helper")
          const agents = decoded(AccountPage, yield* admin(server, "/accounts?handle=dir&type=agent"))
          expect(agents.data).toMatchObject([{ handle: "@dir-ann/helper", type: "agent", owner_account_id: made[0]!.account_id }])
          for (const query of ["limit=0", "limit=101", "offset=-1", "type=robot", "kyc_status=approved", "status=frozen"]) {
            const refused = expectEnvelope(yield* admin(server, `/accounts?${query}`), 400, "invalid_request")
            assert.strictEqual(refused.param, query.split("=")[0])
          }
        }))

      it.effect("suspend: the account's keys and its agents' keys answer 403 account_suspended until reactivated; others are untouched", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const owner = yield* createAccount(server, "susan")
          const other = yield* createAccount(server, "oscar")
          const agent = Schema.decodeUnknownSync(Schema.Struct({ account_id: Schema.String }))(
            (yield* createAgent(server, owner.api_key, "bot")).json
          )
          const issued = yield* admin(server, "/keys", postJson({}, { account_id: agent.account_id, name: "bot" }))
          const agentKey = Schema.decodeUnknownSync(Schema.Struct({ api_key: Schema.String }))(issued.json).api_key
          const me = (key: string) => send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(key) })
          // Verified once each, so the suspension must also reach the verified-key cache.
          for (const key of [owner.api_key, agentKey, other.api_key]) assert.strictEqual((yield* me(key)).status, 200)

          const suspended = yield* admin(server, `/accounts/${owner.account_id}/suspend`, { method: "POST" })
          assert.strictEqual(suspended.status, 200, suspended.text)
          expect(suspended.json).toMatchObject({ account_id: owner.account_id, status: "suspended", suspended_at: expect.stringMatching(/Z$/) })
          expectEnvelope(yield* me(owner.api_key), 403, "account_suspended")
          expectEnvelope(yield* me(agentKey), 403, "account_suspended")
          expectEnvelope(yield* send(`${server.baseUrl}/v1/transfers`, postJson(bearer(owner.api_key), { to: "@oscar", amount: "1" })), 403, "account_suspended")
          // A wrong key is still 401: suspension is said only to a valid key's holder.
          expectEnvelope(yield* me(`${owner.api_key.slice(0, -1)}${owner.api_key.endsWith("A") ? "B" : "A"}`), 401, "unauthorized")
          assert.strictEqual((yield* me(other.api_key)).status, 200)
          // Suspending twice keeps the first time; the directory shows it.
          const again = yield* admin(server, `/accounts/${owner.account_id}/suspend`, { method: "POST" })
          expect(again.json).toMatchObject({ suspended_at: (suspended.json as { suspended_at: string }).suspended_at })
          const listed = decoded(AccountPage, yield* admin(server, "/accounts?handle=susan&status=suspended"))
          expect(listed.data.map((a) => a.account_id)).toEqual([owner.account_id])

          const reactivated = yield* admin(server, `/accounts/${owner.account_id}/reactivate`, { method: "POST" })
          expect(reactivated.json).toMatchObject({ status: "active", suspended_at: null })
          assert.strictEqual((yield* me(owner.api_key)).status, 200)
          assert.strictEqual((yield* me(agentKey)).status, 200)
          expectEnvelope(yield* admin(server, "/accounts/acct_missing/suspend", { method: "POST" }), 404, "account_not_found")
          // An agent can be suspended alone, also while its owner is (each its own entry).
          assert.strictEqual((yield* admin(server, `/accounts/${owner.account_id}/suspend`, { method: "POST" })).status, 200)
          assert.strictEqual((yield* admin(server, `/accounts/${agent.account_id}/suspend`, { method: "POST" })).status, 200)
          assert.strictEqual((yield* admin(server, `/accounts/${owner.account_id}/reactivate`, { method: "POST" })).status, 200)
          expectEnvelope(yield* me(agentKey), 403, "account_suspended")
          assert.strictEqual((yield* me(owner.api_key)).status, 200)
          assert.strictEqual((yield* admin(server, `/accounts/${agent.account_id}/reactivate`, { method: "POST" })).status, 200)
          assert.strictEqual((yield* me(agentKey)).status, 200)
          expect((yield* auditOf(server, agent.account_id)).filter((e) => e.action !== "api_key.created").map((e) => e.action))
            .toEqual(["account.reactivated", "account.suspended"])

          const entries = yield* auditOf(server, owner.account_id)
          // Once each time it changed: the second suspension in a row changed nothing, so it recorded nothing.
          expect(entries.filter((e) => e.action.startsWith("account.s") || e.action === "account.reactivated").map((e) => e.action))
            .toEqual(["account.reactivated", "account.suspended", "account.reactivated", "account.suspended"])
          for (const entry of entries.filter((e) => e.action !== "agent.created")) {
            expect(entry).toMatchObject({ actor: "operator", ip: "127.0.0.1", request_id: expect.stringMatching(/^req_/) })
          }
        }))

      it.effect("a suspended account's webhooks keep being delivered: what was under way finishes", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const account = yield* createAccount(server, "walter")
          const created = yield* send(`${server.baseUrl}/v1/webhooks`, postJson(bearer(account.api_key), {
            url: `${receiver.url}/walter`,
            events: ["transfer.confirmed"]
          }))
          assert.strictEqual(created.status, 201, created.text)
          assert.strictEqual((yield* admin(server, `/accounts/${account.account_id}/suspend`, { method: "POST" })).status, 200)
          yield* Context.get(server.services, Outbox).append([confirmedEvent(account.account_id, "@walter")]).pipe(Effect.orDie)
          yield* eventually(
            Effect.sync(() => receiver.requests.some((request) => request.path === "/walter") ? true : undefined),
            "a delivery to the suspended account's subscription"
          )
        }))

      it.effect("webhooks list: an account's subscriptions with their delivery health, read-only", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const account = yield* createAccount(server, "hilda")
          const subscribe = (path: string) =>
            send(`${server.baseUrl}/v1/webhooks`, postJson(bearer(account.api_key), { url: `${receiver.url}${path}`, events: ["transfer.confirmed"] }))
              .pipe(Effect.map((response) => (response.json as { webhook_id: string }).webhook_id))
          const healthy = yield* subscribe("/hilda-ok")
          const failing = yield* subscribe("/fail-hilda")
          const idle = decoded(Schema.Struct({ data: Schema.Array(Schema.Struct({ health: Schema.String })) }), yield* admin(server, `/accounts/${account.account_id}/webhooks`))
          expect(idle.data.map((w) => w.health)).toEqual(["idle", "idle"])
          yield* Context.get(server.services, Outbox).append([confirmedEvent(account.account_id, "@hilda")]).pipe(Effect.orDie)
          const Health = Schema.Struct({
            data: Schema.Array(Schema.Struct({
              webhook_id: Schema.String,
              mode: Schema.String,
              url: Schema.String,
              events: Schema.Array(Schema.String),
              health: Schema.String,
              deliveries: Schema.Struct({ pending: Schema.Number, retrying: Schema.Number, succeeded: Schema.Number, failed: Schema.Number }),
              last_success_at: Schema.NullOr(Schema.String),
              last_failure_at: Schema.NullOr(Schema.String),
              last_response_status_code: Schema.NullOr(Schema.Number),
              oldest_pending_due_at: Schema.NullOr(Schema.String)
            }))
          })
          const settled = yield* eventually(
            admin(server, `/accounts/${account.account_id}/webhooks`).pipe(Effect.map((response) => {
              const list = decoded(Health, response).data
              return list.every((w) => w.health !== "idle") ? list : undefined
            })),
            "both subscriptions attempted"
          )
          const byId = new Map(settled.map((w) => [w.webhook_id, w]))
          expect(byId.get(healthy)).toMatchObject({
            mode: "test",
            url: `${receiver.url}/hilda-ok`,
            events: ["transfer.confirmed"],
            health: "ok",
            deliveries: { pending: 0, retrying: 0, succeeded: 1, failed: 0 },
            last_failure_at: null,
            last_response_status_code: 200
          })
          expect(byId.get(failing)).toMatchObject({
            health: "failing",
            deliveries: { pending: 1, retrying: 1, succeeded: 0, failed: 0 },
            last_success_at: null,
            last_response_status_code: 500,
            oldest_pending_due_at: expect.stringMatching(/Z$/)
          })
          assert.notInclude(JSON.stringify(settled), "whsec_")
          expectEnvelope(yield* admin(server, "/accounts/acct_missing/webhooks"), 404, "account_not_found")
        }))

      it.effect("audit: keys, agents, policies and invites are recorded with who, when and from where", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const owner = yield* createAccount(server, "audrey")
          const agent = Schema.decodeUnknownSync(Schema.Struct({ account_id: Schema.String }))(
            (yield* createAgent(server, owner.api_key, "clerk")).json
          )
          const patched = yield* send(`${server.baseUrl}/v1/agents/${agent.account_id}/spend-policy`, patchJson(bearer(owner.api_key), { daily_limit_usdg: 8 }))
          assert.strictEqual(patched.status, 200, patched.text)
          const agentKey = yield* send(`${server.baseUrl}/v1/agents/${agent.account_id}/keys`, postJson(bearer(owner.api_key), { name: "k" }))
          assert.strictEqual(agentKey.status, 201, agentKey.text)
          const agentKeyId = (agentKey.json as { key_id: string }).key_id
          const revoked = yield* send(`${server.baseUrl}/v1/agents/${agent.account_id}/keys/${agentKeyId}/revoke`, postJson(bearer(owner.api_key), {}))
          assert.strictEqual(revoked.status, 200, revoked.text)
          const opsKey = yield* admin(server, "/keys", postJson({}, { account_id: owner.account_id, name: "ops" }))
          const opsKeyId = (opsKey.json as { key_id: string }).key_id
          assert.strictEqual((yield* admin(server, `/keys/${opsKeyId}/revoke`, { method: "POST" })).status, 200)
          assert.strictEqual((yield* admin(server, `/accounts/${owner.account_id}/invites`, { method: "POST" })).status, 201)
          assert.strictEqual((yield* admin(server, `/accounts/${owner.account_id}/kyc`, postJson({}, { status: "enhanced" }))).status, 200)

          const mine = yield* auditOf(server, owner.account_id)
          const theAgent = yield* auditOf(server, agent.account_id)
          const summary = (entries: typeof mine) => entries.map((e) => [e.action, e.actor, e.target_id]).reverse()
          expect(summary(mine)).toEqual([
            ["account.created", "operator", null],
            ["api_key.created", "operator", owner.key_id],
            ["agent.created", `key:${owner.key_id}`, agent.account_id],
            ["api_key.created", "operator", opsKeyId],
            ["api_key.revoked", "operator", opsKeyId],
            ["invite.issued", "operator", null],
            ["account.kyc_changed", "operator", "enhanced"]
          ])
          expect(summary(theAgent)).toEqual([
            ["policy.updated", `key:${owner.key_id}`, expect.stringMatching(/^pol_/)],
            ["api_key.created", `key:${owner.key_id}`, agentKeyId],
            ["api_key.revoked", `key:${owner.key_id}`, agentKeyId]
          ])
          for (const entry of [...mine, ...theAgent]) {
            expect(entry).toMatchObject({ ip: "127.0.0.1", request_id: expect.stringMatching(/^req_[0-9A-Z]{26}$/), occurred_at: expect.stringMatching(/Z$/) })
          }
          // Filtered by action across accounts, newest first, paged.
          const revocations = decoded(AuditPage, yield* admin(server, "/audit?action=api_key.revoked&limit=1"))
          expect(revocations.data.map((e) => e.target_id)).toEqual([opsKeyId])
          assert.isTrue(revocations.has_more)
          expectEnvelope(yield* admin(server, "/audit?action=key.created"), 400, "invalid_request")
        }))

      it.effect("the audit table is append-only in SQL: UPDATE, DELETE and TRUNCATE are refused and change nothing", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const account = yield* createAccount(server, "ursula")
          const sql = Context.get(server.services, SqlClient.SqlClient)
          const count = sql<{ n: string }>`SELECT count(*)::text AS n FROM audit_events WHERE account_id = ${account.account_id}`
          const before = (yield* count.pipe(Effect.orDie))[0]?.n
          assert.strictEqual(before, "2")
          for (const statement of [
            sql`UPDATE audit_events SET actor = 'someone-else' WHERE account_id = ${account.account_id}`,
            sql`DELETE FROM audit_events WHERE account_id = ${account.account_id}`,
            sql`TRUNCATE audit_events`
          ]) {
            const refused = yield* Effect.flip(statement)
            assert.match(causeText(refused), /audit_events is append-only/)
          }
          assert.strictEqual((yield* count.pipe(Effect.orDie))[0]?.n, before)
          const actors = yield* sql<{ actor: string }>`SELECT DISTINCT actor FROM audit_events WHERE account_id = ${account.account_id}`.pipe(Effect.orDie)
          expect(actors.map((row) => row.actor)).toEqual(["operator"])
        }))

      it.effect("the admin command: accounts list, suspend, reactivate, audit and webhooks list print the API's JSON", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const env = { ADMIN_URL: server.adminUrl, ADMIN_TOKEN: server.adminToken }
          const run = (...args: ReadonlyArray<string>) =>
            Effect.promise(() => runAdmin(args, env)).pipe(Effect.map((result) => {
              expect(result, result.stderr).toMatchObject({ exitCode: 0, stderr: "" })
              return JSON.parse(result.stdout) as Record<string, unknown>
            }))
          const account = yield* createAccount(server, "clive")
          const listed = yield* run("accounts", "list", "--handle", "@CLIVE", "--kyc", "verified", "--limit", "5")
          expect(listed).toMatchObject({ data: [{ account_id: account.account_id, handle: "@clive", status: "active" }], limit: 5, offset: 0, has_more: false })
          expect(yield* run("accounts", "suspend", "--account", account.account_id)).toMatchObject({ status: "suspended" })
          expect(yield* run("accounts", "get", "--account", account.account_id)).toMatchObject({
            account_id: account.account_id,
            handle: "@clive",
            kyc_status: "verified",
            status: "suspended",
            suspended_at: expect.stringMatching(/Z$/)
          })
          expectEnvelope(yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(account.api_key) }), 403, "account_suspended")
          expect(yield* run("accounts", "reactivate", "--account", account.account_id)).toMatchObject({ status: "active" })
          const audit = yield* run("audit", "--account", account.account_id, "--action", "account.suspended")
          expect(audit).toMatchObject({ data: [{ action: "account.suspended", actor: "operator", account_id: account.account_id }], has_more: false })
          expect(yield* run("webhooks", "list", "--account", account.account_id)).toEqual({ data: [] })
          const missing = yield* Effect.promise(() => runAdmin(["accounts", "suspend", "--account", "acct_missing"], env))
          expect(missing).toMatchObject({ exitCode: 1, stdout: "" })
          expect(missing.stderr).toMatch(/^--account: .+ \(account_not_found, HTTP 404\)\n\{"error":/)
        }))

      it.effect(`agents: at most ${agentsPerAccountMax} per account and mode (409 agent_limit_reached); GET /v1/agents pages them`, () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const owner = yield* createAccount(server, "capper")
          // Concurrent creates cannot pass the cap together: the owner's row is locked while counting.
          const answers = yield* Effect.all(
            ["a1", "a2", "a3", "a4", "a5"].map((name) => createAgent(server, owner.api_key, name)),
            { concurrency: "unbounded" }
          )
          expect(answers.map((a) => a.status).sort()).toEqual([201, 201, 201, 409, 409])
          for (const refused of answers.filter((a) => a.status === 409)) {
            const error = expectEnvelope(refused, 409, "agent_limit_reached")
            assert.include(error.message, String(agentsPerAccountMax))
          }
          // The cap is per mode (D38): a live key's agents count apart.
          const live = yield* admin(server, "/keys", postJson({}, { account_id: owner.account_id, name: "live", mode: "live" }))
          const liveKey = (live.json as { api_key: string }).api_key
          assert.strictEqual((yield* createAgent(server, liveKey, "l1")).status, 201)

          const page = (query: string, key = owner.api_key) =>
            send(`${server.baseUrl}/v1/agents${query}`, { headers: bearer(key) }).pipe(Effect.map((response) => decoded(AgentPage, response)))
          const whole = (yield* send(`${server.baseUrl}/v1/accounts/me/agents`, { headers: bearer(owner.api_key) })).json as {
            agents: ReadonlyArray<{ account_id: string }>
          }
          const first = yield* page("?limit=2")
          expect(first).toMatchObject({ limit: 2, offset: 0, has_more: true })
          const rest = yield* page("?limit=2&offset=2")
          expect(rest).toMatchObject({ limit: 2, offset: 2, has_more: false })
          expect([...first.data, ...rest.data].map((a) => a.account_id)).toEqual(whole.agents.map((a) => a.account_id))
          expect((yield* page("")).data).toHaveLength(agentsPerAccountMax)
          expect((yield* page("", liveKey)).data.map((a) => a.handle)).toEqual(["@capper/l1"])
          for (const query of ["?limit=0", "?limit=101", "?offset=-1", "?limit=x"]) {
            const refused = expectEnvelope(yield* send(`${server.baseUrl}/v1/agents${query}`, { headers: bearer(owner.api_key) }), 400, "invalid_request")
            assert.strictEqual(refused.param, query.slice(1).split("=")[0])
          }
          // An agent's own key lists no agents.
          const agentId = first.data[0]!.account_id
          const agentKey = (yield* admin(server, "/keys", postJson({}, { account_id: agentId, name: "self" }))).json as { api_key: string }
          expect(yield* page("", agentKey.api_key)).toMatchObject({ data: [], has_more: false })
        }))
    })
  })
