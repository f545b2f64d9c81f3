/**
 * Agents, spend policies and human approval end to end over a real socket, on
 * embedded anvil, the in-process guardian and either database: agent creation
 * and its errors, policy reads and partial updates (owner only), every D25
 * refusal in order, a PATCH applying to the very next request, held
 * transactions (202, the owner decrypting what it is asked to approve,
 * approve, reject, approve twice, expiry with its sweep and 409), agent keys
 * refused everywhere only an owner may act, the daily cap under 100 concurrent
 * transfers racing an approval (overshoot exactly 0), and a canary amount that
 * never appears in clear in the database, the logs or the event payloads.
 */
import { ElGamal, EncryptionKey, Note } from "@pps/crypto"
import { Client, Confidential, SealedTransfers } from "@pps/sdk/internal"
import { assert, describe, expect, layer } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { getAddress } from "viem"
import { AgentRecord, AgentTransactionRecord, SpendPolicyRecord } from "@pps/api/Agents"
import { policyFieldOfRule } from "@pps/api/Errors"
import { makeId } from "../../src/platform/Ids.ts"
import { TransferRecord } from "@pps/api/Transfers"
import { decryptTransfer, registerKey } from "../support/confidentialClient.ts"
import { dumpDatabase } from "../support/dumpDatabase.ts"
import { ownerWithAgent } from "../support/agents.ts"
import { bearer, createAccount, decodeAnswer as decode, expectEnvelope, patchJson, postJson, send, type TestResponse } from "../support/http.ts"
import { type DatabaseTarget, makeTestServer, TestServer, type TestServerShape } from "../support/TestServer.ts"

const bytes = (hex: string) => new Uint8Array(Buffer.from(hex.replace(/^0x/, ""), "hex"))


const eventsOf = (server: TestServerShape, accountId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ type: string; payload: string }>`
      SELECT type, payload FROM events WHERE account_id = ${accountId} ORDER BY created_at, event_id`
  }).pipe(Effect.provide(server.services), Effect.orDie)

export const agentsSuite = (database: DatabaseTarget) =>
  describe("agents, spend policies and approvals", () => {
    layer(makeTestServer({ database }), { timeout: "180 seconds", excludeTestServices: true })(database.name, (it) => {
      it.effect("agent accounts and spend policies: create, list, read, PATCH, and who may", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const owner = yield* createAccount(server, "olivia")
          const stranger = yield* createAccount(server, "sam")
          const url = `${server.baseUrl}/v1/accounts/me/agents`
          const created = decode(AgentRecord, yield* send(url, postJson(bearer(owner.api_key), {
            name: "Shopper",
            spend_policy: { daily_limit_usdg: 50, per_transaction_limit_usdg: 20, allowed_recipients: ["@bob", "*.shop"] }
          })), 201)
          assert.strictEqual(created.handle, "@olivia/shopper")
          assert.strictEqual(created.status, "active")
          assert.match(created.account_id, /^acct_/)
          assert.match(created.spend_policy_id, /^pol_/)
          assert.match(created.public_key, /^0x[0-9a-fA-F]{40}$/)
          const me = yield* send(`${server.adminUrl}/admin/accounts/${created.account_id}`, { headers: bearer(server.adminToken) })
          expect(me.json).toMatchObject({ type: "agent", handle: "@olivia/shopper", kyc_status: "verified" })

          expectEnvelope(yield* send(url, postJson(bearer(owner.api_key), {
            name: "shopper",
            spend_policy: { daily_limit_usdg: 1, per_transaction_limit_usdg: 1 }
          })), 409, "agent_name_taken")
          for (const name of ["", "has space", "x".repeat(33), "dot.name"]) {
            const error = expectEnvelope(yield* send(url, postJson(bearer(owner.api_key), {
              name,
              spend_policy: { daily_limit_usdg: 1, per_transaction_limit_usdg: 1 }
            })), 400, "invalid_request")
            assert.strictEqual(error.param, "name")
          }
          for (const [spend_policy, param] of [
            [{ daily_limit_usdg: -1, per_transaction_limit_usdg: 0 }, "spend_policy.daily_limit_usdg"],
            [{ daily_limit_usdg: 5, per_transaction_limit_usdg: 6 }, "spend_policy.per_transaction_limit_usdg"],
            [{ per_transaction_limit_usdg: 1 }, "spend_policy.daily_limit_usdg"],
            [{ daily_limit_usdg: 5, per_transaction_limit_usdg: 1, active_hours: "10:00-10:00" }, "spend_policy.active_hours"],
            [{ daily_limit_usdg: 5, per_transaction_limit_usdg: 1, unknown: true }, "spend_policy.unknown"],
            [undefined, "spend_policy"]
          ] as const) {
            const error = expectEnvelope(
              yield* send(url, postJson(bearer(owner.api_key), { name: "other", spend_policy })),
              400,
              "invalid_policy"
            )
            assert.strictEqual(error.param, param)
          }

          const list = yield* send(url, { headers: bearer(owner.api_key) })
          expect(list.json).toEqual({ agents: [created] })
          expect((yield* send(url, { headers: bearer(stranger.api_key) })).json).toEqual({ agents: [] })

          const agentKey = Schema.decodeUnknownSync(Schema.Struct({ api_key: Schema.String }))(
            (yield* send(`${server.adminUrl}/admin/keys`, postJson(bearer(server.adminToken), {
              account_id: created.account_id,
              name: "shopper-key"
            }))).json
          ).api_key
          const policyUrl = `${server.baseUrl}/v1/agents/${created.account_id}/spend-policy`
          const policy = decode(SpendPolicyRecord, yield* send(policyUrl, { headers: bearer(owner.api_key) }), 200)
          expect(policy).toMatchObject({
            policy_id: created.spend_policy_id,
            daily_limit_usdg: 50,
            per_transaction_limit_usdg: 20,
            hitl_threshold_usdg: null,
            allowed_recipients: ["@bob", "*.shop"],
            assets: ["USDG"],
            active_hours: "00:00-24:00",
            time_zone: "UTC"
          })

          // Only the owner changes it: not the agent's own key (which may read it, D42), not a
          // stranger (who may not read it either); an unknown id is 404.
          expect(decode(SpendPolicyRecord, yield* send(policyUrl, { headers: bearer(agentKey) }), 200)).toEqual(policy)
          expectEnvelope(yield* send(policyUrl, { headers: bearer(stranger.api_key) }), 403, "not_agent_owner")
          for (const key of [agentKey, stranger.api_key]) {
            expectEnvelope(yield* send(policyUrl, patchJson(bearer(key), { daily_limit_usdg: 1e6 })), 403, "not_agent_owner")
          }
          expectEnvelope(
            yield* send(`${server.baseUrl}/v1/agents/acct_01JUNKJUNKJUNKJUNKJUNKJUNK/spend-policy`, { headers: bearer(owner.api_key) }),
            404,
            "agent_not_found"
          )
          // An agent key cannot create agents either.
          expectEnvelope(yield* send(url, postJson(bearer(agentKey), {
            name: "child",
            spend_policy: { daily_limit_usdg: 1, per_transaction_limit_usdg: 1 }
          })), 403, "not_agent_owner")

          // D24: only the fields present change; null clears; the result is validated whole.
          yield* Effect.sleep("5 millis")
          const patched = decode(SpendPolicyRecord, yield* send(policyUrl, patchJson(bearer(owner.api_key), {
            per_transaction_limit_usdg: 10.5,
            hitl_threshold_usdg: 2,
            allowed_recipients: null,
            time_zone: "Asia/Tokyo",
            active_hours: "22:00-06:00"
          })), 200)
          expect(patched).toMatchObject({
            daily_limit_usdg: 50,
            per_transaction_limit_usdg: 10.5,
            hitl_threshold_usdg: 2,
            allowed_recipients: null,
            time_zone: "Asia/Tokyo",
            active_hours: "22:00-06:00"
          })
          assert.isTrue(patched.updated_at > policy.updated_at, "updated_at is bumped")
          expect((yield* send(policyUrl, { headers: bearer(owner.api_key) })).json).toEqual(patched)
          const tooHigh = expectEnvelope(
            yield* send(policyUrl, patchJson(bearer(owner.api_key), { per_transaction_limit_usdg: 51 })),
            400,
            "invalid_policy"
          )
          assert.strictEqual(tooHigh.param, "per_transaction_limit_usdg")
          expectEnvelope(yield* send(policyUrl, patchJson(bearer(owner.api_key), { assets: ["DOGE"] })), 400, "invalid_policy")
          const events = yield* eventsOf(server, owner.account_id)
          const updated = events.filter((event) => event.type === "agent.policy.updated")
          assert.strictEqual(updated.length, 1, "one event per successful PATCH")
          expect(JSON.parse(updated[0]!.payload)).toMatchObject({
            event: "agent.policy.updated",
            account: "@olivia/shopper",
            agent: "@olivia/shopper",
            policy_id: created.spend_policy_id
          })
        }))

      it.effect("D38: agents, spend policies and held transactions are mode-scoped; an agent's keys are of its mode", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const admin = bearer(server.adminToken)
          const issueKey = (accountId: string, mode?: string) =>
            send(`${server.adminUrl}/admin/keys`, postJson(admin, { account_id: accountId, name: "k", ...(mode === undefined ? {} : { mode }) }))
          const keyOf = (response: TestResponse) => {
            assert.strictEqual(response.status, 200, response.text)
            return Schema.decodeUnknownSync(Schema.Struct({ api_key: Schema.String, mode: Schema.String }))(response.json)
          }
          const owner = yield* createAccount(server, "mona")
          const other = yield* createAccount(server, "nina")
          const testKey = owner.api_key
          const liveKey = keyOf(yield* issueKey(owner.account_id, "live")).api_key
          assert.match(liveKey, /^hc_live_/)
          const agentsUrl = `${server.baseUrl}/v1/accounts/me/agents`
          const testAgent = decode(AgentRecord, yield* send(agentsUrl, postJson(bearer(testKey), {
            name: "testbot",
            spend_policy: { daily_limit_usdg: 100, per_transaction_limit_usdg: 100 }
          })), 201)
          const testAgentKey = keyOf(yield* issueKey(testAgent.account_id)).api_key
          assert.match(testAgentKey, /^hc_test_/)
          const liveAgent = decode(AgentRecord, yield* send(agentsUrl, postJson(bearer(liveKey), {
            name: "livebot",
            spend_policy: { daily_limit_usdg: 7, per_transaction_limit_usdg: 7 }
          })), 201)

          // An agent's keys are of its mode: by default, and the other mode is refused.
          expect(keyOf(yield* issueKey(liveAgent.account_id))).toMatchObject({ mode: "live" })
          assert.match(keyOf(yield* issueKey(liveAgent.account_id)).api_key, /^hc_live_/)
          assert.strictEqual(expectEnvelope(yield* issueKey(liveAgent.account_id, "test"), 400, "invalid_request").param, "mode")
          assert.strictEqual(expectEnvelope(yield* issueKey(testAgent.account_id, "live"), 400, "invalid_request").param, "mode")
          expect(keyOf(yield* issueKey(testAgent.account_id, "test"))).toMatchObject({ mode: "test" })
          // Other accounts keep the operator's choice.
          expect(keyOf(yield* issueKey(other.account_id, "live"))).toMatchObject({ mode: "live" })

          // Each mode lists its own agents only.
          expect((yield* send(agentsUrl, { headers: bearer(testKey) })).json).toEqual({ agents: [testAgent] })
          expect((yield* send(agentsUrl, { headers: bearer(liveKey) })).json).toEqual({ agents: [liveAgent] })

          // The other mode's agent is unknown (404, D29), for reads and for PATCH, both ways round.
          const policyUrl = (agentId: string) => `${server.baseUrl}/v1/agents/${agentId}/spend-policy`
          for (const [key, agentId] of [[liveKey, testAgent.account_id], [testKey, liveAgent.account_id]] as const) {
            expectEnvelope(yield* send(policyUrl(agentId), { headers: bearer(key) }), 404, "agent_not_found")
            expectEnvelope(yield* send(policyUrl(agentId), patchJson(bearer(key), { daily_limit_usdg: 1e6 })), 404, "agent_not_found")
          }
          // Nothing changed, and each mode's own key still reads and changes its agent.
          expect(decode(SpendPolicyRecord, yield* send(policyUrl(testAgent.account_id), { headers: bearer(testKey) }), 200))
            .toMatchObject({ daily_limit_usdg: 100 })
          expect(decode(SpendPolicyRecord, yield* send(policyUrl(liveAgent.account_id), { headers: bearer(liveKey) }), 200))
            .toMatchObject({ daily_limit_usdg: 7 })
          expect(decode(
            SpendPolicyRecord,
            yield* send(policyUrl(liveAgent.account_id), patchJson(bearer(liveKey), { daily_limit_usdg: 8 })),
            200
          )).toMatchObject({ daily_limit_usdg: 8, policy_id: liveAgent.spend_policy_id })
          // The live PATCH's event is a live event: a test subscription never sees it.
          const policyEvents = yield* Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            return yield* sql<{ mode: string }>`
              SELECT mode FROM events WHERE account_id = ${owner.account_id} AND type = 'agent.policy.updated'`
          }).pipe(Effect.provide(server.services), Effect.orDie)
          expect(policyEvents).toEqual([{ mode: "live" }])

          // One held transaction per mode, each as the agent's transfer leaves it (held rows are
          // written here: the live one would need a mainnet chain, and what is tested is who
          // finds them, not how they are held; the other tests hold them through the API).
          const holdFor = (agentAccountId: string, mode: "test" | "live") =>
            Effect.gen(function*() {
              const sql = yield* SqlClient.SqlClient
              const nowMs = Date.now()
              const transactionId = makeId("atx", nowMs)
              const filler = new Uint8Array([1, 2, 3])
              yield* sql`
                INSERT INTO agent_transactions (transaction_id, mode, agent_account_id, owner_account_id, transfer_id,
                  recipient_address, recipient_display, asset, confidential, api_key_id, replay_nonce, from_key,
                  sender_box, recipient_box, guardian_note, sealed_digest, status, requested_at, expires_at)
                VALUES (${transactionId}, ${mode}, ${agentAccountId}, ${owner.account_id}, ${makeId("tr", nowMs)},
                  ${"0x" + "11".repeat(20)}, '@nina', 'USDG', true, 'key_x', '1', ${filler}, ${filler}, ${filler},
                  ${filler}, 'digest', 'pending_approval', ${new Date(nowMs).toISOString()}::timestamptz,
                  ${new Date(nowMs + 3_600_000).toISOString()}::timestamptz)`
              return transactionId
            }).pipe(Effect.provide(server.services), Effect.orDie)
          const testHeld = { transaction_id: yield* holdFor(testAgent.account_id, "test") }
          const liveHeldId = yield* holdFor(liveAgent.account_id, "live")

          const pendingUrl = `${server.baseUrl}/v1/agents/transactions/pending`
          const pendingIds = (key: string) =>
            send(pendingUrl, { headers: bearer(key) }).pipe(
              Effect.map((response) =>
                Schema.decodeUnknownSync(Schema.Struct({ pending: Schema.Array(Schema.Struct({ transaction_id: Schema.String })) }))(
                  response.json
                ).pending.map((entry) => entry.transaction_id)
              )
            )
          expect(yield* pendingIds(testKey)).toEqual([testHeld.transaction_id])
          expect(yield* pendingIds(testAgentKey)).toEqual([testHeld.transaction_id])
          expect(yield* pendingIds(liveKey)).toEqual([liveHeldId])
          const decideUrl = (id: string, action: string) => `${server.baseUrl}/v1/agents/transactions/${id}/${action}`
          for (const [key, id] of [[liveKey, testHeld.transaction_id], [testKey, liveHeldId]] as const) {
            for (const action of ["approve", "reject"]) {
              expectEnvelope(yield* send(decideUrl(id, action), postJson(bearer(key), {})), 404, "transaction_not_found")
            }
            expectEnvelope(yield* send(decideUrl(id, "sealed"), { headers: bearer(key) }), 404, "transaction_not_found")
          }
          // Still pending in its own mode, where its owner decides it.
          expect(yield* pendingIds(testKey)).toEqual([testHeld.transaction_id])
          expect(decode(AgentTransactionRecord, yield* send(decideUrl(liveHeldId, "reject"), postJson(bearer(liveKey), {})), 200))
            .toMatchObject({ transaction_id: liveHeldId, status: "rejected" })
          expect(decode(
            AgentTransactionRecord,
            yield* send(decideUrl(testHeld.transaction_id, "reject"), postJson(bearer(testKey), {})),
            200
          )).toMatchObject({ status: "rejected" })
        }))

      it.effect("agent keys manage no webhook subscriptions: the agent's events go to its owner's (D30)", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const owner = yield* createAccount(server, "walt")
          const agent = decode(AgentRecord, yield* send(`${server.baseUrl}/v1/accounts/me/agents`, postJson(bearer(owner.api_key), {
            name: "hooky",
            spend_policy: { daily_limit_usdg: 1, per_transaction_limit_usdg: 1 }
          })), 201)
          const agentKey = Schema.decodeUnknownSync(Schema.Struct({ api_key: Schema.String }))(
            (yield* send(`${server.adminUrl}/admin/keys`, postJson(bearer(server.adminToken), { account_id: agent.account_id, name: "a" })))
              .json
          ).api_key
          const hooks = `${server.baseUrl}/v1/webhooks`
          const body = { url: "http://127.0.0.1:9/hook", events: ["transfer.confirmed", "agent.transaction.pending_approval"] }
          // The owner subscribes; the agent key may neither subscribe nor see or touch the owner's.
          const created = yield* send(hooks, postJson(bearer(owner.api_key), body))
          assert.strictEqual(created.status, 201, created.text)
          const webhookId = Schema.decodeUnknownSync(Schema.Struct({ webhook_id: Schema.String }))(created.json).webhook_id
          const eventId = makeId("evt", Date.now())
          const asAgent = bearer(agentKey)
          const refused = [
            send(hooks, postJson(asAgent, body)),
            send(hooks, { headers: asAgent }),
            send(`${hooks}/${webhookId}`, { method: "DELETE", headers: asAgent }),
            send(`${hooks}/${webhookId}/rotate-secret`, { method: "POST", headers: asAgent }),
            send(`${hooks}/${webhookId}/deliveries`, { headers: asAgent }),
            send(`${hooks}/${webhookId}/replay/${eventId}`, { method: "POST", headers: asAgent })
          ]
          for (const request of refused) {
            assert.include(expectEnvelope(yield* request, 403, "not_agent_owner").message, "owner's subscriptions")
          }
          // No subscription was made for the agent, and the owner's is intact.
          const subscriptions = yield* Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            return yield* sql<{ account_id: string }>`SELECT account_id FROM webhooks`
          }).pipe(Effect.provide(server.services), Effect.orDie)
          assert.notInclude(subscriptions.map((row) => row.account_id), agent.account_id)
          expect((yield* send(hooks, { headers: bearer(owner.api_key) })).json).toMatchObject({
            data: [{ webhook_id: webhookId }]
          })
        }))

      it.effect("an agent's transfers: D25's refusals in order, PATCH on the next request, hold, approve, reject, canary", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const bob = yield* createAccount(server, "bob")
          const bobKey = yield* registerKey(server.baseUrl, bob.api_key)
          const shop = yield* createAccount(server, "tea.shop")
          yield* registerKey(server.baseUrl, shop.api_key)
          const carol = yield* createAccount(server, "carol")
          yield* registerKey(server.baseUrl, carol.api_key)
          const { agent, agentKey, owner, ownerKey } = yield* ownerWithAgent(server, "alice", {
            daily_limit_usdg: 6000,
            per_transaction_limit_usdg: 5000,
            hitl_threshold_usdg: 1000,
            allowed_recipients: ["@bob", "*.shop"]
          }, { faucetUsdg: "9000", fundAgentUsdg: "8000" })
          const pay = (body: Record<string, unknown>) => send(`${server.baseUrl}/v1/transfers`, postJson(bearer(agentKey), body))
          // The rule, and the policy field it reads (`param`), so a client can say which setting refused it.
          const violation = (response: TestResponse, reason: keyof typeof policyFieldOfRule) => {
            const refusal = expectEnvelope(response, 403, "policy_violation")
            assert.deepStrictEqual({ reason: refusal.reason, param: refusal.param }, { reason, param: policyFieldOfRule[reason] })
          }
          const policyUrl = `${server.baseUrl}/v1/agents/${agent.account_id}/spend-policy`

          // D25's order: asset before recipient before hours before the limits.
          violation(yield* pay({ to: "@carol", amount: "1", asset: "ETH" }), "asset_not_allowed")
          violation(yield* pay({ to: "@carol", amount: "6000" }), "recipient_not_allowed")
          violation(yield* pay({ to: "@bob", amount: "5000.000001" }), "per_transaction_limit_exceeded")
          // D37: the allow-list speaks before anything is said about the recipient: unknown, or
          // not confidential-ready, outside the list is 403; inside it, the recipient's own answer.
          violation(yield* pay({ to: "@nobody-at-all", amount: "1" }), "recipient_not_allowed")
          yield* createAccount(server, "no.key")
          violation(yield* pay({ to: "@no.key", amount: "1" }), "recipient_not_allowed")
          expectEnvelope(yield* pay({ to: "@ghost.shop", amount: "1" }), 404, "recipient_not_found")
          // Validation comes before policy.
          expectEnvelope(yield* pay({ to: "@bob", amount: "-1" }), 400, "invalid_request")

          // A PATCH applies to the very next request: close the window, then open it again.
          const hour = new Date().getUTCHours()
          const closed = `${String((hour + 2) % 24).padStart(2, "0")}:00-${String((hour + 3) % 24).padStart(2, "0")}:00`
          assert.strictEqual((yield* send(policyUrl, patchJson(bearer(owner.api_key), { active_hours: closed }))).status, 200)
          violation(yield* pay({ to: "@bob", amount: "1" }), "outside_active_hours")
          assert.strictEqual((yield* send(policyUrl, patchJson(bearer(owner.api_key), { active_hours: null }))).status, 200)

          const paid = decode(TransferRecord, yield* pay({ to: "@bob", amount: "3", memo: "for the tea" }), 201)
          expect(paid).toMatchObject({ status: "confirmed", from: "@alice/bot", to: "@bob", direction: "sent" })
          expect(yield* decryptTransfer(server.baseUrl, bob.api_key, bobKey, paid.transfer_id)).toMatchObject({
            amount: 3_000_000n,
            memo: "for the tea"
          })
          // The agent's own copy is sealed to its owner's key: the owner sees what its agent spends.
          expect(yield* decryptTransfer(server.baseUrl, agentKey, ownerKey, paid.transfer_id)).toMatchObject({
            amount: 3_000_000n,
            role: "sender"
          })
          expect(decode(TransferRecord, yield* pay({ to: "@tea.shop", amount: "2" }), 201)).toMatchObject({ status: "confirmed" })

          // Above the threshold: held (202), nothing signed. The canary amount is checked everywhere below.
          const canary = "4321.987654"
          const heldResponse = yield* pay({ to: "@bob", amount: canary, memo: "canary memo 8f3a" })
          const held = decode(AgentTransactionRecord, heldResponse, 202)
          expect(held).toMatchObject({
            status: "pending_approval",
            agent: "@alice/bot",
            to: "@bob",
            asset: "USDG",
            confidential: true,
            decided_at: null,
            transfer_id: null
          })
          assert.match(held.transaction_id, /^atx_/)
          assert.strictEqual(Date.parse(held.expires_at) - Date.parse(held.requested_at), 24 * 60 * 60 * 1000)
          assert.notInclude(heldResponse.text, "4321")

          const pendingUrl = `${server.baseUrl}/v1/agents/transactions/pending`
          const ownerPending = yield* send(pendingUrl, { headers: bearer(owner.api_key) })
          expect(ownerPending.json).toEqual({
            pending: [{
              transaction_id: held.transaction_id,
              agent: "@alice/bot",
              to: "@bob",
              asset: "USDG",
              confidential: true,
              requested_at: held.requested_at,
              expires_at: held.expires_at
            }]
          })
          expect((yield* send(pendingUrl, { headers: bearer(agentKey) })).json).toEqual(ownerPending.json)
          expect((yield* send(pendingUrl, { headers: bearer(bob.api_key) })).json).toEqual({ pending: [] })

          // The owner's client opens the held amount and memo with the owner's key.
          const sealed = yield* send(`${server.baseUrl}/v1/agents/transactions/${held.transaction_id}/sealed`, {
            headers: bearer(owner.api_key)
          })
          assert.strictEqual(sealed.status, 200, sealed.text)
          const sealedBody = Schema.decodeUnknownSync(Schema.Struct({
            chain_id: Schema.Number,
            contract: Schema.String,
            binding_id: Schema.String,
            sealed_note: Schema.String
          }))(sealed.json)
          const opened = Note.openTransferNote(ownerKey, bytes(sealedBody.sealed_note), {
            chainId: BigInt(sealedBody.chain_id),
            contract: getAddress(sealedBody.contract),
            transferId: bytes(sealedBody.binding_id)
          }, "sender")
          assert.isTrue(opened.ok)
          if (opened.ok) expect(opened.value).toEqual({ amount: 4_321_987_654n, memo: "canary memo 8f3a" })
          // Nobody else's key opens it.
          const wrong = Note.openTransferNote(EncryptionKey.generate(), bytes(sealedBody.sealed_note), {
            chainId: BigInt(sealedBody.chain_id),
            contract: getAddress(sealedBody.contract),
            transferId: bytes(sealedBody.binding_id)
          }, "sender")
          assert.isFalse(wrong.ok)

          // Only the owner decides: not the agent itself, not a stranger.
          const approveUrl = (id: string) => `${server.baseUrl}/v1/agents/transactions/${id}/approve`
          const rejectUrl = (id: string) => `${server.baseUrl}/v1/agents/transactions/${id}/reject`
          for (const key of [agentKey, bob.api_key]) {
            expectEnvelope(yield* send(approveUrl(held.transaction_id), postJson(bearer(key), {})), 403, "not_agent_owner")
            expectEnvelope(yield* send(rejectUrl(held.transaction_id), postJson(bearer(key), {})), 403, "not_agent_owner")
          }
          expectEnvelope(yield* send(approveUrl("atx_01JUNKJUNKJUNKJUNKJUNKJUNK"), postJson(bearer(owner.api_key), {})), 404, "transaction_not_found")

          // Approve re-checks with the policy in force now: lower the daily limit, and it is refused and stays pending.
          // 5 spent today + 4321.987654 > 4326, while the transaction itself is within a 4326 per-transaction limit.
          const lowered = yield* send(policyUrl, patchJson(bearer(owner.api_key), { daily_limit_usdg: 4326, per_transaction_limit_usdg: 4326 }))
          assert.strictEqual(lowered.status, 200, lowered.text)
          violation(yield* send(approveUrl(held.transaction_id), postJson(bearer(owner.api_key), {})), "daily_limit_exceeded")
          assert.strictEqual(((yield* send(pendingUrl, { headers: bearer(owner.api_key) })).json as { pending: Array<unknown> }).pending.length, 1)
          const restored = yield* send(policyUrl, patchJson(bearer(owner.api_key), { daily_limit_usdg: 8000, per_transaction_limit_usdg: 5000 }))
          assert.strictEqual(restored.status, 200, restored.text)

          const approved = decode(
            AgentTransactionRecord,
            yield* send(approveUrl(held.transaction_id), postJson(bearer(owner.api_key), {})),
            200
          )
          expect(approved).toMatchObject({
            transaction_id: held.transaction_id,
            status: "approved",
            agent: "@alice/bot",
            to: "@bob",
            requested_at: held.requested_at,
            expires_at: held.expires_at,
            transfer_status: "confirmed"
          })
          assert.match(approved.transfer_id ?? "", /^tr_/)
          assert.match(approved.tx_hash ?? "", /^0x[0-9a-f]{64}$/)
          assert.isNotNull(approved.decided_at)
          expect(yield* decryptTransfer(server.baseUrl, bob.api_key, bobKey, approved.transfer_id!)).toMatchObject({
            amount: 4_321_987_654n,
            memo: "canary memo 8f3a"
          })
          // Approve twice: the second finds no pending transaction.
          expectEnvelope(yield* send(approveUrl(held.transaction_id), postJson(bearer(owner.api_key), {})), 404, "transaction_not_found")
          expectEnvelope(yield* send(rejectUrl(held.transaction_id), postJson(bearer(owner.api_key), {})), 404, "transaction_not_found")
          expect((yield* send(pendingUrl, { headers: bearer(owner.api_key) })).json).toEqual({ pending: [] })

          // A held standard (public) transfer: its amount waits sealed under the KEK and is erased once decided.
          const standardHeld = decode(AgentTransactionRecord, yield* pay({ to: "@bob", amount: "1001", confidential: false }), 202)
          assert.isFalse(standardHeld.confidential)
          const standardApproved = decode(
            AgentTransactionRecord,
            yield* send(approveUrl(standardHeld.transaction_id), postJson(bearer(owner.api_key), {})),
            200
          )
          expect(standardApproved).toMatchObject({ status: "approved", transfer_status: "confirmed" })
          const standardTransfer = yield* send(`${server.baseUrl}/v1/transfers/${standardApproved.transfer_id}`, {
            headers: bearer(agentKey)
          })
          expect(standardTransfer.json).toMatchObject({ confidential: false, status: "confirmed", from: "@alice/bot" })
          // Every decided transaction's guardian note is erased too: nothing left to replay to the guardian.
          const erased = yield* Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            return yield* sql<{ sealed: boolean; note_bytes: number }>`
              SELECT public_amount_sealed IS NOT NULL AS sealed, length(guardian_note) AS note_bytes FROM agent_transactions
              WHERE transaction_id IN (${standardHeld.transaction_id}, ${held.transaction_id})`
          }).pipe(Effect.provide(server.services), Effect.orDie)
          expect(erased.map((row) => [row.sealed, Number(row.note_bytes)])).toEqual([[false, 0], [false, 0]])

          // Spent today: 3 + 2 + 4321.987654 + 1001 (approved counts on the day of approval). Held and rejected never count.
          const secondHeld = decode(AgentTransactionRecord, yield* pay({ to: "@bob", amount: "1500" }), 202)
          const rejected = decode(
            AgentTransactionRecord,
            yield* send(rejectUrl(secondHeld.transaction_id), postJson(bearer(owner.api_key), {})),
            200
          )
          expect(rejected).toMatchObject({ status: "rejected", transfer_id: null, tx_hash: null })
          assert.isNotNull(rejected.decided_at)
          expectEnvelope(yield* send(approveUrl(secondHeld.transaction_id), postJson(bearer(owner.api_key), {})), 404, "transaction_not_found")
          // 5327.987654 spent: 2672.012346 more is exactly the cap (and the rest of the balance), 2672.012347 is over.
          violation(yield* pay({ to: "@bob", amount: "2672.012347" }), "daily_limit_exceeded")
          assert.strictEqual((yield* send(policyUrl, patchJson(bearer(owner.api_key), { hitl_threshold_usdg: null }))).status, 200)
          expect(decode(TransferRecord, yield* pay({ to: "@bob", amount: "2672.012346" }), 201)).toMatchObject({ status: "confirmed" })
          violation(yield* pay({ to: "@bob", amount: "0.000001" }), "daily_limit_exceeded")
          // Insufficient balance is 402 (8000 funded, 8000 spent, limits raised out of the way).
          assert.strictEqual(
            (yield* send(policyUrl, patchJson(bearer(owner.api_key), { daily_limit_usdg: 1e6, per_transaction_limit_usdg: 1e5 }))).status,
            200
          )
          expectEnvelope(yield* pay({ to: "@bob", amount: "0.000001" }), 402, "insufficient_balance")

          // Events went to the owner, in order, with the agent's handle and no amount.
          const events = (yield* eventsOf(server, owner.account_id)).filter((event) => event.type.startsWith("agent.transaction."))
          expect(events.map((event) => event.type)).toEqual([
            "agent.transaction.pending_approval",
            "agent.transaction.approved",
            "agent.transaction.pending_approval",
            "agent.transaction.approved",
            "agent.transaction.pending_approval",
            "agent.transaction.rejected"
          ])
          expect(JSON.parse(events[1]!.payload)).toMatchObject({
            account: "@alice/bot",
            agent: "@alice/bot",
            transaction_id: held.transaction_id,
            transfer_id: approved.transfer_id
          })
          const initiated = (yield* eventsOf(server, owner.account_id)).filter((event) =>
            event.type === "transfer.initiated" && event.payload.includes(approved.transfer_id!)
          )
          assert.strictEqual(initiated.length, 1)

          // Canary: the held amount and memo never appear in clear.
          const dump = yield* dumpDatabase.pipe(Effect.provide(server.services))
          const allEvents = (yield* eventsOf(server, owner.account_id)).map((event) => event.payload).join("\n")
          const units = 4_321_987_654n
          const needles = [
            canary,
            units.toString(),
            units.toString(16).padStart(16, "0"),
            units.toString(16).padStart(64, "0"),
            "canary memo",
            Buffer.from("canary memo").toString("hex")
          ]
          for (const needle of needles) {
            assert.notInclude(dump.toLowerCase(), needle, `${needle} in the database dump`)
            assert.notInclude(server.logs.join("\n").toLowerCase(), needle, `${needle} in the logs`)
            assert.notInclude(allEvents.toLowerCase(), needle, `${needle} in an event payload`)
          }
          assert.isAbove(dump.length, 1000)

          // The sealed form (ext): the agent seals to its owner's key; the amount rules are the
          // guardian's, applied to the sealed amount: above the threshold it is held, the owner
          // approves, it is paid; above the per-transaction limit it is refused.
          assert.strictEqual((yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(owner.api_key), { amount: "2000" }))).status, 200)
          const topUp = yield* send(`${server.baseUrl}/v1/transfers`, postJson(bearer(owner.api_key), { to: "@alice/bot", amount: "2000" }))
          assert.strictEqual(topUp.status, 201, topUp.text)
          const policyBack = yield* send(policyUrl, patchJson(bearer(owner.api_key), { hitl_threshold_usdg: 1000, per_transaction_limit_usdg: 5000 }))
          assert.strictEqual(policyBack.status, 200, policyBack.text)
          const agentClient = Client.make({ baseUrl: server.baseUrl, apiKey: agentKey })
          const sealedSend = (amount: string) =>
            Effect.promise(() =>
              SealedTransfers.send(agentClient, { to: "@bob", amount, memo: "sealed hold" }, { senderKey: ownerKey.publicKey })
                .then((answer) => ({ _tag: "Answer", ...answer }) as const, (error: unknown) => ({ _tag: "Refused", error }) as const)
            )
          const sealedHeld = yield* sealedSend("1002.5")
          if (sealedHeld._tag !== "Answer") return assert.fail(String(sealedHeld.error))
          assert.strictEqual(sealedHeld.status, 202)
          const sealedTx = Schema.decodeUnknownSync(AgentTransactionRecord)(sealedHeld.body)
          const ownerClient = Client.make({ baseUrl: server.baseUrl, apiKey: owner.api_key })
          expect(yield* Effect.promise(() => Confidential.openHeld(ownerClient, ownerKey, sealedTx.transaction_id))).toMatchObject({
            amount: 1_002_500_000n,
            memo: "sealed hold",
            noteMatches: true
          })

          // A lying agent seals 1 USDG in the note its owner reads and 1500 in the guardian's box:
          // the owner sees what the guardian would pay, and that the note disagrees.
          const prepared = (yield* send(`${server.baseUrl}/v1/transfers/prepare`, postJson(bearer(agentKey), { to: "@bob" }))).json as Record<string, string>
          const heldContext = { chainId: BigInt(prepared["chain_id"]!), contract: prepared["contract"] as `0x${string}`, transferId: bytes(prepared["binding_id"]!) }
          const keysOf = {
            senderKey: ownerKey.publicKey,
            recipientKey: bytes(prepared["recipient_key"]!) as typeof ownerKey.publicKey,
            guardianKey: bytes(prepared["guardian_key"]!) as typeof ownerKey.publicKey
          }
          const shown = Note.sealTransfer({ context: heldContext, note: { amount: 1_000_000n, memo: "just a coffee" }, opening: ElGamal.newOpening(1_000_000n), ...keysOf })
          const guardianPays = Note.sealTransfer({ context: heldContext, note: { amount: 1_500_000_000n, memo: "" }, opening: ElGamal.newOpening(1_500_000_000n), ...keysOf })
          const hex = (b: Uint8Array) => `0x${Buffer.from(b).toString("hex")}`
          const lying = yield* send(`${server.baseUrl}/v1/transfers`, postJson(bearer(agentKey), {
            to: "@bob",
            sealed: { transfer_id: prepared["transfer_id"], token: prepared["token"], guardian: hex(guardianPays.guardian), sender: hex(shown.sender), recipient: hex(shown.recipient) }
          }))
          const lyingHeld = decode(AgentTransactionRecord, lying, 202)
          expect(yield* Effect.promise(() => Confidential.openHeld(ownerClient, ownerKey, lyingHeld.transaction_id))).toMatchObject({
            amount: 1_500_000_000n,
            memo: "just a coffee",
            noteMatches: false
          })
          assert.strictEqual((yield* send(`${server.baseUrl}/v1/agents/transactions/${lyingHeld.transaction_id}/reject`, postJson(bearer(owner.api_key), {}))).status, 200)
          const sealedApproved = decode(
            AgentTransactionRecord,
            yield* send(approveUrl(sealedTx.transaction_id), postJson(bearer(owner.api_key), {})),
            200
          )
          expect(sealedApproved).toMatchObject({ status: "approved", transfer_status: "confirmed" })
          expect(yield* decryptTransfer(server.baseUrl, bob.api_key, bobKey, sealedApproved.transfer_id!)).toMatchObject({
            amount: 1_002_500_000n,
            memo: "sealed hold"
          })
          const overLimit = yield* sealedSend("5000.000001")
          assert.strictEqual(overLimit._tag, "Refused")
          const refusal = overLimit._tag === "Refused" ? overLimit.error : undefined
          assert.instanceOf(refusal, Client.ApiError)
          expect((refusal as Client.ApiError).error).toMatchObject({ code: "policy_violation", reason: "per_transaction_limit_exceeded" })

          // Owners see their agents (SPEC Events: the account and any agent under it): the owner
          // reads its agent's transfer and opens its copy with its own key; nobody else does.
          const agentTransferId = sealedApproved.transfer_id!
          const ownerView = yield* send(`${server.baseUrl}/v1/transfers/${agentTransferId}`, { headers: bearer(owner.api_key) })
          expect(ownerView.json).toMatchObject({ transfer_id: agentTransferId, from: "@alice/bot", direction: "sent" })
          expect(yield* decryptTransfer(server.baseUrl, owner.api_key, ownerKey, agentTransferId)).toMatchObject({
            role: "sender",
            amount: 1_002_500_000n,
            memo: "sealed hold"
          })
          const listed = (query: string) =>
            send(`${server.baseUrl}/v1/transfers?limit=100${query}`, { headers: bearer(owner.api_key) }).pipe(
              Effect.map((response) => (response.json as { data: Array<{ transfer_id: string }> }).data.map((t) => t.transfer_id))
            )
          assert.notInclude(yield* listed(""), agentTransferId, "D16's default list is the owner's own transfers")
          assert.include(yield* listed("&include_agents=true"), agentTransferId)
          assert.strictEqual(
            expectEnvelope(yield* send(`${server.baseUrl}/v1/transfers?include_agents=yes`, { headers: bearer(owner.api_key) }), 400, "invalid_request").param,
            "include_agents"
          )
          for (const path of [agentTransferId, `${agentTransferId}/sealed`]) {
            expectEnvelope(yield* send(`${server.baseUrl}/v1/transfers/${path}`, { headers: bearer(carol.api_key) }), 404, "transfer_not_found")
          }
          // The agent itself sees none of its owner's own transfers.
          const ownerOwn = Schema.decodeUnknownSync(TransferRecord)(topUp.json).transfer_id
          assert.strictEqual((yield* send(`${server.baseUrl}/v1/transfers/${ownerOwn}`, { headers: bearer(agentKey) })).status, 200, "party to the top-up")
          const ownerFaucetless = yield* send(`${server.baseUrl}/v1/transfers`, postJson(bearer(owner.api_key), { to: "@carol", amount: "1" }))
          const ownerToCarol = Schema.decodeUnknownSync(TransferRecord)(ownerFaucetless.json).transfer_id
          expectEnvelope(yield* send(`${server.baseUrl}/v1/transfers/${ownerToCarol}`, { headers: bearer(agentKey) }), 404, "transfer_not_found")
        }))

      it.effect("the daily cap holds under 100 concurrent transfers racing an approval: overshoot exactly 0", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const dana = yield* createAccount(server, "dana")
          yield* registerKey(server.baseUrl, dana.api_key)
          const { agentKey, owner } = yield* ownerWithAgent(server, "racer", {
            daily_limit_usdg: 10,
            per_transaction_limit_usdg: 10,
            hitl_threshold_usdg: 3
          }, { faucetUsdg: "100", fundAgentUsdg: "50" })
          const pay = (amount: string) => send(`${server.baseUrl}/v1/transfers`, postJson(bearer(agentKey), { to: "@dana", amount }))
          const held = decode(AgentTransactionRecord, yield* pay("4"), 202)
          // 4 held + 100 × 0.25 attempted against a cap of 10: exactly 10 may pass, in any interleaving.
          const [approval, ...responses] = yield* Effect.all([
            send(`${server.baseUrl}/v1/agents/transactions/${held.transaction_id}/approve`, postJson(bearer(owner.api_key), {})),
            ...Array.from({ length: 100 }, () => pay("0.25"))
          ], { concurrency: "unbounded" })
          const created = responses.filter((response) => response.status === 201)
          for (const response of responses.filter((r) => r.status !== 201)) {
            assert.strictEqual(expectEnvelope(response, 403, "policy_violation").reason, "daily_limit_exceeded")
          }
          const approvedUnits = approval!.status === 200 ? 4_000_000 : 0
          if (approval!.status !== 200) {
            assert.strictEqual(expectEnvelope(approval!, 403, "policy_violation").reason, "daily_limit_exceeded")
          }
          const spentUnits = approvedUnits + created.length * 250_000
          assert.strictEqual(spentUnits, 10_000_000, `spent ${spentUnits} against a cap of 10000000`)
          // Every admitted transfer settled (none failed on chain).
          for (const response of created) {
            assert.strictEqual(Schema.decodeUnknownSync(TransferRecord)(response.json).status, "confirmed", response.text)
          }
          const after = yield* pay("0.000001")
          assert.strictEqual(expectEnvelope(after, 403, "policy_violation").reason, "daily_limit_exceeded")
        }))
    })

    layer(
      makeTestServer({ database, config: { approvalWindowMs: 2_000, approvalSweepIntervalMs: 250 } }),
      { timeout: "120 seconds", excludeTestServices: true }
    )(`${database.name}, short approval window`, (it) => {
      it.effect("past its window a held transaction is expired by the sweep: approve and reject answer 409", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const erin = yield* createAccount(server, "erin")
          yield* registerKey(server.baseUrl, erin.api_key)
          const { agentKey, owner } = yield* ownerWithAgent(server, "quinn", {
            daily_limit_usdg: 100,
            per_transaction_limit_usdg: 100,
            hitl_threshold_usdg: 1
          }, { faucetUsdg: "20", fundAgentUsdg: "10" })
          const held = decode(
            AgentTransactionRecord,
            yield* send(`${server.baseUrl}/v1/transfers`, postJson(bearer(agentKey), { to: "@erin", amount: "2" })),
            202
          )
          assert.strictEqual(Date.parse(held.expires_at) - Date.parse(held.requested_at), 2_000)
          // The sweep runs every 250 ms here: well inside 60 s of expires_at.
          yield* Effect.sleep("3 seconds")
          const events = yield* eventsOf(server, owner.account_id)
          const expired = events.filter((event) => event.type === "agent.transaction.expired")
          assert.strictEqual(expired.length, 1)
          expect(JSON.parse(expired[0]!.payload)).toMatchObject({ transaction_id: held.transaction_id, agent: "@quinn/bot" })
          for (const action of ["approve", "reject"]) {
            expectEnvelope(
              yield* send(`${server.baseUrl}/v1/agents/transactions/${held.transaction_id}/${action}`, postJson(bearer(owner.api_key), {})),
              409,
              "transaction_expired"
            )
          }
          // D42: the agent and its owner read that it expired.
          for (const key of [agentKey, owner.api_key]) {
            const state = decode(AgentTransactionRecord, yield* send(`${server.baseUrl}/v1/agents/transactions/${held.transaction_id}`, { headers: bearer(key) }), 200)
            expect(state).toMatchObject({ transaction_id: held.transaction_id, status: "expired", transfer_id: null })
            assert.isNotNull(state.decided_at)
          }
          expect((yield* send(`${server.baseUrl}/v1/agents/transactions/pending`, { headers: bearer(owner.api_key) })).json)
            .toEqual({ pending: [] })
        }))
    })
  })
