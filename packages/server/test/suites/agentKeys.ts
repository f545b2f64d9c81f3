/**
 * Goal: an owner runs its agents without the operator (D44), and an agent learns what concerns
 * itself without being able to change it (D42), over a real socket on embedded anvil, the
 * guardian and either database.
 *
 * - The owner creates an agent's key (its value once, the owner's wallet address beside it), lists
 *   and revokes it; a revoked key is 401 on its very next request; the key is of the agent's mode;
 *   an agent key manages no key, a stranger's or another mode's key does not reach the agent, and
 *   a retry with the creation's Idempotency-Key makes no second key and never shows the value
 *   again (nothing stores it: the database dump does not hold it).
 * - The agent reads its own policy, not another agent's, and changes none; it reads the state of
 *   its own held transactions (pending, approved with its transfer, rejected), as its owner does,
 *   while other keys are told they do not exist; no answer carries the canary amount.
 */
import { assert, describe, expect, layer } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { AgentRecord, AgentTransactionRecord, SpendPolicyRecord } from "@pps/api/Agents"
import { ApiKeyList, CreatedAgentApiKey, RotatedAgentApiKey } from "@pps/api/ApiKeys"
import { TransferRecord } from "@pps/api/Transfers"
import { makeId } from "../../src/platform/Ids.ts"
import { registerKey } from "../support/confidentialClient.ts"
import { dumpDatabase } from "../support/dumpDatabase.ts"
import { bearer, createAccount, decodeAnswer as decode, expectEnvelope, patchJson, postJson, send, type TestResponse } from "../support/http.ts"
import { type DatabaseTarget, makeTestServer, TestServer, type TestServerShape } from "../support/TestServer.ts"

const createAgent = (server: TestServerShape, ownerKey: string, name: string, policy: Record<string, unknown>) =>
  send(`${server.baseUrl}/v1/accounts/me/agents`, postJson(bearer(ownerKey), { name, spend_policy: policy })).pipe(
    Effect.map((response) => decode(AgentRecord, response, 201))
  )

const keysUrl = (server: TestServerShape, agentId: string) => `${server.baseUrl}/v1/agents/${agentId}/keys`

const createKey = (server: TestServerShape, ownerKey: string, agentId: string, name: string, idempotencyKey?: string) =>
  send(keysUrl(server, agentId), postJson({ ...bearer(ownerKey), ...(idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey }) }, { name }))

export const agentKeysSuite = (database: DatabaseTarget) =>
  describe("owner-issued agent keys (D44) and an agent's reads of itself (D42)", () => {
    layer(makeTestServer({ database }), { timeout: "180 seconds", excludeTestServices: true })(database.name, (it) => {
      it.effect("the owner creates, lists and revokes its agent's keys; nobody else manages them; a revoked key is 401 at once", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const owner = yield* createAccount(server, "oscar")
          const stranger = yield* createAccount(server, "stan")
          const agent = yield* createAgent(server, owner.api_key, "runner", { daily_limit_usdg: 10, per_transaction_limit_usdg: 5 })
          const ownerRecord = (yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(owner.api_key) })).json as { public_key: string }

          const created = decode(CreatedAgentApiKey, yield* createKey(server, owner.api_key, agent.account_id, "runner-key", "issue-runner-1"), 201)
          expect(created).toMatchObject({
            name: "runner-key",
            mode: "test",
            account_id: agent.account_id,
            agent: "@oscar/runner",
            owner_address: ownerRecord.public_key
          })
          assert.match(created.key_id, /^key_/)
          assert.match(created.api_key, /^hc_test_[A-Za-z0-9_-]{43}$/)
          // The key acts for the agent.
          const asAgent = yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(created.api_key) })
          expect(asAgent.json).toMatchObject({ account_id: agent.account_id, type: "agent", handle: "@oscar/runner" })

          // A retry with the same Idempotency-Key makes no second key and does not show the value again.
          const retried = yield* createKey(server, owner.api_key, agent.account_id, "runner-key", "issue-runner-1")
          const shownOnce = expectEnvelope(retried, 409, "key_shown_once")
          assert.include(shownOnce.message, created.key_id)
          assert.strictEqual(retried.headers.get("idempotent-replayed"), "true")
          assert.notInclude(retried.text, created.api_key)
          // The same key with another body is the usual reuse.
          expectEnvelope(yield* createKey(server, owner.api_key, agent.account_id, "other-name", "issue-runner-1"), 409, "idempotency_key_reused")
          const second = decode(CreatedAgentApiKey, yield* createKey(server, owner.api_key, agent.account_id, "spare"), 201)

          const listed = yield* send(keysUrl(server, agent.account_id), { headers: bearer(owner.api_key) })
          const keys = decode(ApiKeyList, listed, 200).data
          expect(keys.map((key) => [key.key_id, key.name, key.mode, key.revoked_at])).toEqual([
            [created.key_id, "runner-key", "test", null],
            [second.key_id, "spare", "test", null]
          ])
          // The request made with it is counted; no value is listed.
          assert.strictEqual(keys[0]!.request_count, 1)
          assert.strictEqual(keys[0]!.key_hint, created.api_key.slice(-4))
          assert.notInclude(listed.text, created.api_key)
          assert.notInclude(listed.text, second.api_key)
          // Nothing keeps a value: not the api_keys row, not the idempotency record.
          const dump = yield* dumpDatabase.pipe(Effect.provide(server.services))
          assert.isAbove(dump.length, 1000)
          for (const value of [created.api_key, second.api_key]) assert.notInclude(dump, value.slice("hc_test_".length))

          // Names: 1-100 characters.
          for (const name of ["", "x".repeat(101)]) {
            assert.strictEqual(expectEnvelope(yield* createKey(server, owner.api_key, agent.account_id, name), 400, "invalid_request").param, "name")
          }

          // Nobody but the owner: the agent's own key, another agent's, a stranger (403); an unknown
          // or malformed id is 404 for the owner; a live key of the owner does not see the test agent (D38).
          const revokeUrl = (keyId: string) => `${keysUrl(server, agent.account_id)}/${keyId}/revoke`
          for (const key of [created.api_key, stranger.api_key]) {
            expectEnvelope(yield* createKey(server, key, agent.account_id, "mine"), 403, "not_agent_owner")
            expectEnvelope(yield* send(keysUrl(server, agent.account_id), { headers: bearer(key) }), 403, "not_agent_owner")
            expectEnvelope(yield* send(revokeUrl(second.key_id), postJson(bearer(key), {})), 403, "not_agent_owner")
          }
          // The agent key cannot make keys for itself, whatever id it names.
          expectEnvelope(yield* createKey(server, created.api_key, makeId("acct", Date.now()), "x"), 403, "not_agent_owner")
          const unknownAgent = makeId("acct", Date.now())
          expectEnvelope(yield* createKey(server, owner.api_key, unknownAgent, "x"), 404, "agent_not_found")
          expectEnvelope(yield* send(keysUrl(server, unknownAgent), { headers: bearer(owner.api_key) }), 404, "agent_not_found")
          expectEnvelope(yield* send(`${server.baseUrl}/v1/agents/acct_nope/keys`, { headers: bearer(owner.api_key) }), 404, "agent_not_found")
          const liveOwnerKey = ((yield* send(`${server.adminUrl}/admin/keys`, postJson(bearer(server.adminToken), {
            account_id: owner.account_id,
            name: "live",
            mode: "live"
          }))).json as { api_key: string }).api_key
          expectEnvelope(yield* createKey(server, liveOwnerKey, agent.account_id, "x"), 404, "agent_not_found")
          expectEnvelope(yield* send(revokeUrl(created.key_id), postJson(bearer(liveOwnerKey), {})), 404, "agent_not_found")
          // A live agent's keys are live keys (the key's mode is the agent's, which is its creator's).
          const liveAgent = yield* createAgent(server, liveOwnerKey, "night", { daily_limit_usdg: 1, per_transaction_limit_usdg: 1 })
          const liveAgentKey = decode(CreatedAgentApiKey, yield* createKey(server, liveOwnerKey, liveAgent.account_id, "night-key"), 201)
          assert.strictEqual(liveAgentKey.mode, "live")
          assert.match(liveAgentKey.api_key, /^hc_live_/)
          expectEnvelope(yield* createKey(server, owner.api_key, liveAgent.account_id, "x"), 404, "agent_not_found")

          // Revoke: the next request with the key (used, so cached, a moment ago) is 401.
          assert.strictEqual((yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(created.api_key) })).status, 200)
          const revoked = yield* send(revokeUrl(created.key_id), postJson(bearer(owner.api_key), {}))
          expect(decode(Schema.Struct({ key_id: Schema.String, revoked: Schema.Literal(true) }), revoked, 200)).toEqual({
            key_id: created.key_id,
            revoked: true
          })
          expectEnvelope(yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(created.api_key) }), 401, "unauthorized")
          expectEnvelope(yield* send(`${server.baseUrl}/v1/transfers`, postJson(bearer(created.api_key), { to: "@stan", amount: "1" })), 401, "unauthorized")
          // Revoking again answers the same (a lost answer's retry); the spare key still works.
          assert.strictEqual((yield* send(revokeUrl(created.key_id), postJson(bearer(owner.api_key), {}))).status, 200)
          assert.strictEqual((yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(second.api_key) })).status, 200)
          // Only the agent's keys: an unknown key, the owner's own key, another agent's key are not found here.
          for (const keyId of [makeId("key", Date.now()), owner.key_id, liveAgentKey.key_id]) {
            expectEnvelope(yield* send(revokeUrl(keyId), postJson(bearer(owner.api_key), {})), 404, "key_not_found")
          }
          assert.strictEqual((yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(owner.api_key) })).status, 200)
          const after = decode(ApiKeyList, yield* send(keysUrl(server, agent.account_id), { headers: bearer(owner.api_key) }), 200).data
          assert.isNotNull(after.find((key) => key.key_id === created.key_id)?.revoked_at)
          assert.isNull(after.find((key) => key.key_id === second.key_id)?.revoked_at)
        }))

      it.effect("the owner replaces a leaked agent key in one step (D56): the new key works, the old one is 401 at once", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const owner = yield* createAccount(server, "rhea")
          const stranger = yield* createAccount(server, "rolf")
          const agent = yield* createAgent(server, owner.api_key, "courier", { daily_limit_usdg: 10, per_transaction_limit_usdg: 5 })
          const leaked = decode(CreatedAgentApiKey, yield* createKey(server, owner.api_key, agent.account_id, "courier-key"), 201)
          const spare = decode(CreatedAgentApiKey, yield* createKey(server, owner.api_key, agent.account_id, "spare"), 201)
          const rotateUrl = (keyId: string) => `${keysUrl(server, agent.account_id)}/${keyId}/rotate`
          const rotate = (key: string, keyId: string, body: Record<string, unknown>, idempotencyKey?: string) =>
            send(rotateUrl(keyId), postJson({ ...bearer(key), ...(idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey }) }, body))
          // The leaked key is in use (and cached) a moment before.
          assert.strictEqual((yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(leaked.api_key) })).status, 200)

          // Nobody but the owner: the agent's own key, a stranger.
          for (const key of [leaked.api_key, stranger.api_key]) {
            expectEnvelope(yield* rotate(key, leaked.key_id, {}), 403, "not_agent_owner")
          }
          assert.strictEqual(expectEnvelope(yield* rotate(owner.api_key, leaked.key_id, { name: "" }), 400, "invalid_request").param, "name")
          // Still one key then: nothing was written by the refusals.
          assert.strictEqual((yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(leaked.api_key) })).status, 200)

          const answer = yield* rotate(owner.api_key, leaked.key_id, {}, "rotate-courier-1")
          const rotated = decode(RotatedAgentApiKey, answer, 201)
          expect(rotated).toMatchObject({
            name: "courier-key",
            mode: "test",
            account_id: agent.account_id,
            agent: "@rhea/courier",
            replaced_key_id: leaked.key_id
          })
          assert.notStrictEqual(rotated.key_id, leaked.key_id)
          assert.match(rotated.api_key, /^hc_test_[A-Za-z0-9_-]{43}$/)
          // The old key is refused on its very next request; the new one acts for the agent; the spare is untouched.
          expectEnvelope(yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(leaked.api_key) }), 401, "unauthorized")
          expect((yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(rotated.api_key) })).json).toMatchObject({
            account_id: agent.account_id
          })
          assert.strictEqual((yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(spare.api_key) })).status, 200)

          // A retry of the same call: no third key and no value shown again.
          const retried = yield* rotate(owner.api_key, leaked.key_id, {}, "rotate-courier-1")
          assert.include(expectEnvelope(retried, 409, "key_shown_once").message, rotated.key_id)
          assert.notInclude(retried.text, rotated.api_key)
          // Without the key, a revoked key is not replaced twice.
          expectEnvelope(yield* rotate(owner.api_key, leaked.key_id, {}), 404, "key_not_found")
          // Another name; an unknown key.
          const renamed = decode(RotatedAgentApiKey, yield* rotate(owner.api_key, rotated.key_id, { name: "courier-2" }), 201)
          assert.strictEqual(renamed.name, "courier-2")
          expectEnvelope(yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(rotated.api_key) }), 401, "unauthorized")
          expectEnvelope(yield* rotate(owner.api_key, makeId("key", Date.now()), {}), 404, "key_not_found")
          expectEnvelope(yield* rotate(owner.api_key, owner.key_id, {}), 404, "key_not_found")

          const keys = decode(ApiKeyList, yield* send(keysUrl(server, agent.account_id), { headers: bearer(owner.api_key) }), 200).data
          expect(keys.map((key) => [key.key_id, key.revoked_at === null])).toEqual([
            [leaked.key_id, false],
            [spare.key_id, true],
            [rotated.key_id, false],
            [renamed.key_id, true]
          ])
          const dump = yield* dumpDatabase.pipe(Effect.provide(server.services))
          for (const value of [rotated.api_key, renamed.api_key]) assert.notInclude(dump, value.slice("hc_test_".length))
        }))

      it.effect("an agent reads its own policy and its held transactions' state, as its owner does; nobody else; never an amount", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const bob = yield* createAccount(server, "bea")
          yield* registerKey(server.baseUrl, bob.api_key)
          const owner = yield* createAccount(server, "ona")
          yield* registerKey(server.baseUrl, owner.api_key)
          assert.strictEqual((yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(owner.api_key), { amount: "100" }))).status, 200)
          const agent = yield* createAgent(server, owner.api_key, "buyer", {
            daily_limit_usdg: 100,
            per_transaction_limit_usdg: 50,
            hitl_threshold_usdg: 5
          })
          const sibling = yield* createAgent(server, owner.api_key, "sibling", { daily_limit_usdg: 1, per_transaction_limit_usdg: 1 })
          const agentKey = decode(CreatedAgentApiKey, yield* createKey(server, owner.api_key, agent.account_id, "buyer-key"), 201).api_key
          const siblingKey = decode(CreatedAgentApiKey, yield* createKey(server, owner.api_key, sibling.account_id, "sibling-key"), 201).api_key
          const funding = yield* send(`${server.baseUrl}/v1/transfers`, postJson(bearer(owner.api_key), { to: "@ona/buyer", amount: "60" }))
          assert.strictEqual(decode(TransferRecord, funding, 201).status, "confirmed")

          // Its own policy: read, not changed; another agent's (its sibling's, a stranger's): 403 as D29.
          const policyUrl = (agentId: string) => `${server.baseUrl}/v1/agents/${agentId}/spend-policy`
          const own = decode(SpendPolicyRecord, yield* send(policyUrl(agent.account_id), { headers: bearer(agentKey) }), 200)
          expect(own).toEqual(decode(SpendPolicyRecord, yield* send(policyUrl(agent.account_id), { headers: bearer(owner.api_key) }), 200))
          expect(own).toMatchObject({ policy_id: agent.spend_policy_id, hitl_threshold_usdg: 5, per_transaction_limit_usdg: 50 })
          expectEnvelope(yield* send(policyUrl(agent.account_id), patchJson(bearer(agentKey), { daily_limit_usdg: 1e6 })), 403, "not_agent_owner")
          const strangerAgent = yield* createAgent(server, bob.api_key, "other", { daily_limit_usdg: 1, per_transaction_limit_usdg: 1 })
          for (const agentId of [sibling.account_id, strangerAgent.account_id, makeId("acct", Date.now())]) {
            expectEnvelope(yield* send(policyUrl(agentId), { headers: bearer(agentKey) }), 403, "not_agent_owner")
          }

          // Held above the threshold, with a canary amount and memo.
          const canary = "7.654329"
          const heldResponse = yield* send(`${server.baseUrl}/v1/transfers`, postJson(bearer(agentKey), { to: "@bea", amount: canary, memo: "canary-d42" }))
          const held = decode(AgentTransactionRecord, heldResponse, 202)
          const read = (key: string, id = held.transaction_id) => send(`${server.baseUrl}/v1/agents/transactions/${id}`, { headers: bearer(key) })
          const answers: Array<TestResponse> = []
          const readBy = (key: string, id?: string) =>
            read(key, id).pipe(Effect.tap((response) => Effect.sync(() => answers.push(response))))
          const pendingForAgent = decode(AgentTransactionRecord, yield* readBy(agentKey), 200)
          expect(pendingForAgent).toEqual(held)
          expect(decode(AgentTransactionRecord, yield* readBy(owner.api_key), 200)).toEqual(held)
          // Anyone else: as if it did not exist (the sibling agent, a stranger, another mode's key).
          const liveOwnerKey = ((yield* send(`${server.adminUrl}/admin/keys`, postJson(bearer(server.adminToken), {
            account_id: owner.account_id,
            name: "live",
            mode: "live"
          }))).json as { api_key: string }).api_key
          for (const key of [siblingKey, bob.api_key, liveOwnerKey]) {
            expectEnvelope(yield* readBy(key), 404, "transaction_not_found")
          }
          expectEnvelope(yield* readBy(owner.api_key, makeId("atx", Date.now())), 404, "transaction_not_found")
          expectEnvelope(yield* readBy(owner.api_key, "atx_pending-is-not-an-id"), 404, "transaction_not_found")
          // Still the owner's to decide.
          const approveUrl = `${server.baseUrl}/v1/agents/transactions/${held.transaction_id}/approve`
          expectEnvelope(yield* send(approveUrl, postJson(bearer(agentKey), {})), 403, "not_agent_owner")
          expectEnvelope(yield* send(`${server.baseUrl}/v1/agents/transactions/${held.transaction_id}/sealed`, { headers: bearer(agentKey) }), 403, "not_agent_owner")
          // The static route still answers the pending list beside the id route.
          expect((yield* send(`${server.baseUrl}/v1/agents/transactions/pending`, { headers: bearer(agentKey) })).json).toMatchObject({
            pending: [{ transaction_id: held.transaction_id }]
          })

          const approved = decode(AgentTransactionRecord, yield* send(approveUrl, postJson(bearer(owner.api_key), {})), 200)
          const approvedForAgent = decode(AgentTransactionRecord, yield* readBy(agentKey), 200)
          expect(approvedForAgent).toMatchObject({
            status: "approved",
            transfer_id: approved.transfer_id,
            transfer_status: "confirmed",
            tx_hash: approved.tx_hash,
            decided_at: approved.decided_at
          })
          assert.match(approvedForAgent.transfer_id ?? "", /^tr_/)

          const second = decode(AgentTransactionRecord, yield* send(`${server.baseUrl}/v1/transfers`, postJson(bearer(agentKey), { to: "@bea", amount: "6" })), 202)
          const rejected = decode(
            AgentTransactionRecord,
            yield* send(`${server.baseUrl}/v1/agents/transactions/${second.transaction_id}/reject`, postJson(bearer(owner.api_key), {})),
            200
          )
          expect(decode(AgentTransactionRecord, yield* readBy(agentKey, second.transaction_id), 200)).toEqual(rejected)
          expect(rejected).toMatchObject({ status: "rejected", transfer_id: null })

          // No answer names the amount or the memo, in any form.
          const units = 7_654_329n
          const seen = [heldResponse, ...answers].map((response) => response.text.toLowerCase()).join("\n")
          for (const needle of [canary, units.toString(), units.toString(16), "canary-d42", Buffer.from("canary-d42").toString("base64")]) {
            assert.notInclude(seen, needle.toLowerCase())
          }
        }))
    })
  })
