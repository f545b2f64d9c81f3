/**
 * Refunds (D43) end to end over a real socket, on embedded anvil, the guardian and either
 * database: the recipient of a confirmed confidential transfer sends up to its amount back, in
 * the plain form and sealed by the SDK (the whole amount by default, opened from the caller's own
 * copy); the refunds are linked both ways; their sum never exceeds the original, also when ten
 * race (the guardian decides it); a retry with the same Idempotency-Key refunds once; the refusals
 * D43's record names (404, 403, 422, 409, 400); an agent refunds under its policy (held above its
 * threshold, its approval re-checked against what is left); and no refund's amount or memo is in
 * any request the client sends, any row, event or log line.
 */
import { assert, describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { AgentRecord, AgentTransactionRecord } from "@pps/api/Agents"
import { TransferRecord } from "@pps/api/Transfers"
import { Errors, Pps } from "@pps/sdk"
import type { EncryptionKey } from "@pps/crypto"
import type { AppConfigShape } from "../../src/config/AppConfig.ts"
import { ulid } from "../../src/platform/Ids.ts"
import { Settlement } from "../../src/settlement/Settlement.ts"
import { balanceProof, decryptTransfer, fundedPair, registerKey } from "../support/confidentialClient.ts"
import { dumpDatabase } from "../support/dumpDatabase.ts"
import { bearer, createAccount, decodeAnswer, expectEnvelope, postJson, send, type TestResponse } from "../support/http.ts"
import { canaryForms, recordingProxy } from "../support/recordingProxy.ts"
import { type DatabaseTarget, makeTestServer, TestServer, type TestServerShape } from "../support/TestServer.ts"

const refundUrl = (server: TestServerShape, transferId: string) => `${server.baseUrl}/v1/transfers/${transferId}/refund`

/** A plain-form refund (the server sees the amount for the request), with an Idempotency-Key of its own unless given. */
const refundPlain = (server: TestServerShape, apiKey: string, transferId: string, body: unknown, key: string = `refund-${ulid()}`) =>
  send(refundUrl(server, transferId), postJson({ ...bearer(apiKey), "idempotency-key": key }, body))

/** A plain-form transfer, asserted created (201). */
const transfer = (server: TestServerShape, apiKey: string, body: unknown) =>
  send(`${server.baseUrl}/v1/transfers`, postJson({ ...bearer(apiKey), "idempotency-key": `t-${ulid()}` }, body)).pipe(
    Effect.map((response) => decodeAnswer(TransferRecord, response, 201))
  )

const getTransfer = (server: TestServerShape, apiKey: string, transferId: string) =>
  send(`${server.baseUrl}/v1/transfers/${transferId}`, { headers: bearer(apiKey) }).pipe(
    Effect.map((response) => decodeAnswer(TransferRecord, response, 200))
  )

/** The proven USDG balance of an account (decimal string), decrypted with its own key. */
const usdgOf = (server: TestServerShape, apiKey: string, keyPair: EncryptionKey.KeyPair) =>
  Effect.gen(function*() {
    const proof = yield* balanceProof(server.baseUrl, apiKey, keyPair)
    const proven = yield* send(`${server.baseUrl}/v1/accounts/me/balances`, { headers: { ...bearer(apiKey), "x-decryption-proof": proof } })
    const body = Schema.decodeUnknownSync(Schema.Struct({ balances: Schema.Array(Schema.Struct({ asset: Schema.String, amount: Schema.String })) }))(proven.json)
    return body.balances.find((entry) => entry.asset === "USDG")?.amount
  })

/** The facade a holder runs, with its key pair: refunds sealed here. */
const ppsOf = (server: TestServerShape, apiKey: string, keyPair?: EncryptionKey.KeyPair) =>
  new Pps({ apiKey, baseUrl: server.baseUrl, ...(keyPair === undefined ? {} : { keyPair }) })

/** The error a rejected SDK call rejected with, as its API code. */
const codeOf = (promise: Promise<unknown>) =>
  Effect.promise(() =>
    promise.then(
      () => "resolved",
      (error: unknown) =>
        error instanceof Errors.ApiError
          ? error.error?.code ?? `http_${error.status}`
          : error instanceof Errors.ReasonedError
          ? String(error.reason)
          : String(error)
    )
  )

/** Every transfer event's payload recorded for an account (the sender's or recipient's side). */
const transferEventsOf = (server: TestServerShape, accountId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ payload: string }>`
      SELECT payload FROM events WHERE account_id = ${accountId} AND type LIKE 'transfer.%' ORDER BY created_at, event_id`
    return rows.map((row) => JSON.parse(row.payload) as { event: string; transfer_id: string; refund_of?: string; direction: string })
  }).pipe(Effect.provide(server.services), Effect.orDie)

const expectRefused = (response: TestResponse, status: number, code: string) => expectEnvelope(response, status, code)

export const refundsSuite = (database: DatabaseTarget, config: Partial<AppConfigShape> = {}) =>
  describe("refunds (D43)", () => {
    // One test holds blocks back itself (`evm_setIntervalMining`), so the node mines on its interval.
    layer(makeTestServer({ database, config: { embeddedChainMining: "interval", ...config } }), { timeout: "180 seconds", excludeTestServices: true })(database.name, (it) => {
      it.effect("partial refunds in both forms, then what is left; links both ways, events, balances; a retry refunds once", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const pair = yield* fundedPair(server, "100")
          const { recipient: bob, recipientKey: bobKey, sender: alice, senderKey: aliceKey } = pair
          const original = yield* transfer(server, alice.api_key, { to: `@${pair.recipientHandle}`, amount: "30", memo: "order 7" })
          assert.strictEqual(original.status, "confirmed")
          const bobPps = ppsOf(server, bob.api_key, bobKey)

          // Sealed by the SDK, with an idempotency key: a retry answers the same refund.
          const first = yield* Effect.promise(() => bobPps.transfers.refund(original.transfer_id, { amount: "10", memo: "part" }, { idempotencyKey: "refund-once" }))
          assert.strictEqual(first.kind, "transfer")
          const refund1 = first.kind === "transfer" ? first.transfer : assert.fail("held")
          expect(refund1).toMatchObject({ status: "confirmed", from: `@${pair.recipientHandle}`, to: `@alice-${pair.recipientHandle.slice(4)}`, direction: "sent", refund_of: original.transfer_id, refunds: [], confidential: true })
          const again = yield* Effect.promise(() => bobPps.transfers.refund(original.transfer_id, { amount: "10", memo: "part" }, { idempotencyKey: "refund-once" }))
          assert.deepStrictEqual(again.kind === "transfer" ? again.transfer.transfer_id : "held", refund1.transfer_id)
          // Alice, the original's sender, opens what came back.
          expect(yield* decryptTransfer(server.baseUrl, alice.api_key, aliceKey, refund1.transfer_id)).toMatchObject({ role: "recipient", amount: 10_000_000n, memo: "part" })

          // The plain form, replayed with its key: one refund, the same answer.
          const plain = yield* refundPlain(server, bob.api_key, original.transfer_id, { amount: "5" }, "plain-once")
          const refund2 = decodeAnswer(TransferRecord, plain, 201)
          const replayed = yield* refundPlain(server, bob.api_key, original.transfer_id, { amount: "5" }, "plain-once")
          assert.strictEqual(replayed.headers.get("idempotent-replayed"), "true")
          assert.strictEqual(decodeAnswer(TransferRecord, replayed, 201).transfer_id, refund2.transfer_id)

          // 15 of 30 are back: the whole amount (the SDK's default) is more than is left.
          assert.strictEqual(yield* codeOf(bobPps.transfers.refund(original.transfer_id)), "refund_exceeds_original")
          const rest = yield* Effect.promise(() => bobPps.transfers.refund(original.transfer_id, { amount: "15" }))
          const refund3 = rest.kind === "transfer" ? rest.transfer : assert.fail("held")
          expectRefused(yield* refundPlain(server, bob.api_key, original.transfer_id, { amount: "0.000001" }), 422, "refund_exceeds_original")

          // Linked both ways, as both parties see them.
          const asAlice = yield* getTransfer(server, alice.api_key, original.transfer_id)
          assert.deepStrictEqual(asAlice.refunds, [refund1.transfer_id, refund2.transfer_id, refund3.transfer_id])
          assert.isNull(asAlice.refund_of)
          assert.deepStrictEqual((yield* getTransfer(server, bob.api_key, original.transfer_id)).refunds, asAlice.refunds)
          expect(yield* getTransfer(server, alice.api_key, refund3.transfer_id)).toMatchObject({ direction: "received", refund_of: original.transfer_id })
          const listed = (yield* send(`${server.baseUrl}/v1/transfers?limit=10`, { headers: bearer(alice.api_key) })).json as { data: ReadonlyArray<{ transfer_id: string; refund_of: string | null }> }
          assert.deepStrictEqual(listed.data.filter((t) => t.refund_of === original.transfer_id).length, 3)

          // Balances: everything came back to Alice, Bob holds nothing.
          assert.strictEqual(yield* usdgOf(server, alice.api_key, aliceKey), "100")
          assert.strictEqual(yield* usdgOf(server, bob.api_key, bobKey), "0")

          // transfer.* events of each refund carry refund_of, on both sides; the original's do not.
          for (const accountId of [alice.account_id, bob.account_id]) {
            const events = yield* transferEventsOf(server, accountId)
            for (const refund of [refund1, refund2, refund3]) {
              const mine = events.filter((event) => event.transfer_id === refund.transfer_id)
              assert.includeMembers(mine.map((event) => event.event), ["transfer.initiated", "transfer.confirmed"])
              assert.isTrue(mine.every((event) => event.refund_of === original.transfer_id), JSON.stringify(mine))
            }
            assert.isTrue(events.filter((event) => event.transfer_id === original.transfer_id).every((event) => !("refund_of" in event)))
          }
        }))

      it.effect("a full refund by default: the SDK opens the whole amount from the recipient's copy and sends it back", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const pair = yield* fundedPair(server, "20")
          const original = yield* transfer(server, pair.sender.api_key, { to: `@${pair.recipientHandle}`, amount: "7.25" })
          const whole = yield* Effect.promise(() => ppsOf(server, pair.recipient.api_key, pair.recipientKey).transfers.refund(original.transfer_id))
          const refund = whole.kind === "transfer" ? whole.transfer : assert.fail("held")
          assert.strictEqual(refund.refund_of, original.transfer_id)
          expect(yield* decryptTransfer(server.baseUrl, pair.sender.api_key, pair.senderKey, refund.transfer_id)).toMatchObject({ amount: 7_250_000n, memo: "" })
          assert.strictEqual(yield* usdgOf(server, pair.sender.api_key, pair.senderKey), "20")
          // Nothing is left to refund.
          expectRefused(yield* refundPlain(server, pair.recipient.api_key, original.transfer_id, { amount: "0.01" }), 422, "refund_exceeds_original")
          // An SDK without the key pair cannot know the whole amount: refused before any refund is sent.
          assert.strictEqual(yield* codeOf(ppsOf(server, pair.recipient.api_key).transfers.refund(original.transfer_id)), "refund_amount_unknown")
        }))

      it.effect("ten concurrent refunds of 30% each of one transfer: three succeed, seven are refused, the sum stays within it", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const pair = yield* fundedPair(server, "50")
          const original = yield* transfer(server, pair.sender.api_key, { to: `@${pair.recipientHandle}`, amount: "10" })
          // The recipient's balance is not what stops them: only the guardian's refund rule can.
          const grant = yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(pair.recipient.api_key), { amount: "100" }))
          assert.strictEqual(grant.status, 200, grant.text)
          const answers = yield* Effect.forEach(
            Array.from({ length: 10 }, (_, i) => i),
            (i) => refundPlain(server, pair.recipient.api_key, original.transfer_id, { amount: "3" }, `race-${i}-${ulid()}`),
            { concurrency: "unbounded" }
          )
          const created = answers.filter((answer) => answer.status === 201)
          const refused = answers.filter((answer) => answer.status !== 201)
          assert.strictEqual(created.length, 3, answers.map((answer) => `${answer.status} ${answer.text}`).join("\n"))
          for (const answer of refused) expectRefused(answer, 422, "refund_exceeds_original")
          const ids = created.map((answer) => decodeAnswer(TransferRecord, answer, 201).transfer_id)
          const linked = yield* getTransfer(server, pair.sender.api_key, original.transfer_id)
          assert.sameMembers([...linked.refunds], ids)
          // What the original's sender opens: 9 of 10 came back.
          let refunded = 0n
          for (const id of ids) refunded += (yield* decryptTransfer(server.baseUrl, pair.sender.api_key, pair.senderKey, id)).amount
          assert.strictEqual(refunded, 9_000_000n)
          assert.strictEqual(yield* usdgOf(server, pair.sender.api_key, pair.senderKey), "49")
        }))

      it.effect("refused: not party (404), the sender (403), a standard transfer (422), no amount in the plain form (400)", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const pair = yield* fundedPair(server, "20")
          const original = yield* transfer(server, pair.sender.api_key, { to: `@${pair.recipientHandle}`, amount: "4" })
          const stranger = yield* createAccount(server, `carol-${ulid().toLowerCase().slice(-8)}`)
          yield* registerKey(server.baseUrl, stranger.api_key)
          expectRefused(yield* refundPlain(server, stranger.api_key, original.transfer_id, { amount: "1" }), 404, "transfer_not_found")
          expectRefused(yield* refundPlain(server, pair.recipient.api_key, "tr_01JAZ3Y8X6Q4M2N7P5R9S0T1V2", { amount: "1" }), 404, "transfer_not_found")
          const bySender = expectRefused(yield* refundPlain(server, pair.sender.api_key, original.transfer_id, { amount: "1" }), 403, "not_transfer_recipient")
          assert.strictEqual(bySender.param, "transfer_id")
          const standard = yield* transfer(server, pair.sender.api_key, { to: `@${pair.recipientHandle}`, amount: "2", confidential: false })
          expectRefused(yield* refundPlain(server, pair.recipient.api_key, standard.transfer_id, { amount: "1" }), 422, "transfer_not_confidential")
          const noAmount = expectRefused(yield* refundPlain(server, pair.recipient.api_key, original.transfer_id, {}), 400, "invalid_request")
          assert.strictEqual(noAmount.param, "amount")
          const both = { amount: "1", sealed: { transfer_id: "tr_01JAZ3Y8X6Q4M2N7P5R9S0T1V2", token: "t", guardian: "0x00", sender: "0x00", recipient: "0x00" } }
          assert.strictEqual(expectRefused(yield* refundPlain(server, pair.recipient.api_key, original.transfer_id, both), 400, "invalid_request").param, "sealed")
          // Nothing was refunded by any of them.
          assert.deepStrictEqual((yield* getTransfer(server, pair.sender.api_key, original.transfer_id)).refunds, [])
        }))

      it.effect("an agent refunds under its policy: held above its threshold, its approval re-checked against what is left; its allow-list applies", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const suffix = ulid().toLowerCase().slice(-8)
          const owner = yield* createAccount(server, `shop-${suffix}`)
          yield* registerKey(server.baseUrl, owner.api_key)
          const agent = decodeAnswer(AgentRecord, yield* send(`${server.baseUrl}/v1/accounts/me/agents`, postJson(bearer(owner.api_key), {
            name: "till",
            spend_policy: { daily_limit_usdg: 100, per_transaction_limit_usdg: 50, hitl_threshold_usdg: 2 }
          })), 201)
          const issued = yield* send(`${server.adminUrl}/admin/keys`, postJson(bearer(server.adminToken), { account_id: agent.account_id, name: "till" }))
          const agentKey = Schema.decodeUnknownSync(Schema.Struct({ api_key: Schema.String }))(issued.json).api_key
          const buyer = yield* createAccount(server, `buyer-${suffix}`)
          const buyerKey = yield* registerKey(server.baseUrl, buyer.api_key)
          yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(buyer.api_key), { amount: "10" }))
          const paid = yield* transfer(server, buyer.api_key, { to: `@shop-${suffix}/till`, amount: "5" })

          // Above the threshold: held for the owner, as any agent transfer (D26).
          const big = yield* refundPlain(server, agentKey, paid.transfer_id, { amount: "4" })
          const held = decodeAnswer(AgentTransactionRecord, big, 202)
          // Within it: refunded at once.
          const small = decodeAnswer(TransferRecord, yield* refundPlain(server, agentKey, paid.transfer_id, { amount: "2" }), 201)
          assert.strictEqual(small.refund_of, paid.transfer_id)
          // 2 of 5 are back: approving the held 4 would make 6.
          const approveUrl = `${server.baseUrl}/v1/agents/transactions/${held.transaction_id}/approve`
          expectRefused(yield* send(approveUrl, postJson(bearer(owner.api_key), {})), 422, "refund_exceeds_original")
          const rest = decodeAnswer(AgentTransactionRecord, yield* refundPlain(server, agentKey, paid.transfer_id, { amount: "3" }), 202)
          const approved = decodeAnswer(AgentTransactionRecord, yield* send(
            `${server.baseUrl}/v1/agents/transactions/${rest.transaction_id}/approve`,
            postJson(bearer(owner.api_key), {})
          ), 200)
          const restTransfer = yield* getTransfer(server, buyer.api_key, approved.transfer_id ?? "")
          expect(restTransfer).toMatchObject({ refund_of: paid.transfer_id, direction: "received", status: "confirmed" })
          assert.deepStrictEqual((yield* getTransfer(server, buyer.api_key, paid.transfer_id)).refunds, [small.transfer_id, restTransfer.transfer_id])
          assert.strictEqual(yield* usdgOf(server, buyer.api_key, buyerKey), "10")
          // The agent's allow-list applies to a refund as to any transfer (D25, D37).
          const patched = yield* send(`${server.baseUrl}/v1/agents/${agent.account_id}/spend-policy`, {
            method: "PATCH",
            headers: { ...bearer(owner.api_key), "content-type": "application/json" },
            body: JSON.stringify({ allowed_recipients: [] })
          })
          assert.strictEqual(patched.status, 200, patched.text)
          const second = yield* transfer(server, buyer.api_key, { to: `@shop-${suffix}/till`, amount: "1" })
          const blocked = expectRefused(yield* refundPlain(server, agentKey, second.transfer_id, { amount: "1" }), 403, "policy_violation")
          assert.strictEqual(blocked.reason, "recipient_not_allowed")
        }))

      it.effect("canary: a refund sealed by the SDK puts no amount or memo in any request, row, event or log line", () =>
        Effect.scoped(Effect.gen(function*() {
          const server = yield* TestServer
          const pair = yield* fundedPair(server, "100")
          const proxy = yield* recordingProxy(server.baseUrl)
          const viaProxy = (apiKey: string, keyPair: EncryptionKey.KeyPair) => new Pps({ apiKey, baseUrl: proxy.baseUrl, keyPair })
          // The original, sealed too: its whole amount is the default refund's.
          // Eight digits in base units: a shorter canary turned up by chance in the dump's other
          // numbers and hex (a 7-digit one once, in a whole-suite run).
          const whole = { decimal: "49.182736", baseUnits: 49_182_736n }
          const partial = { decimal: "13.075194", baseUnits: 13_075_194n }
          const memo = "canary-refund-memo-9q2x"
          const sent = yield* Effect.promise(() => viaProxy(pair.sender.api_key, pair.senderKey).transfers.create({ to: `@${pair.recipientHandle}`, amount: whole.decimal }))
          const original = sent.kind === "transfer" ? sent.transfer : assert.fail("held")
          const other = yield* Effect.promise(() => viaProxy(pair.sender.api_key, pair.senderKey).transfers.create({ to: `@${pair.recipientHandle}`, amount: "40" }))
          const bob = viaProxy(pair.recipient.api_key, pair.recipientKey)
          const refundWhole = yield* Effect.promise(() => bob.transfers.refund(original.transfer_id, { memo }))
          const refundPart = yield* Effect.promise(() => bob.transfers.refund(other.kind === "transfer" ? other.transfer.transfer_id : "", { amount: partial.decimal, memo }))
          assert.strictEqual(refundWhole.kind, "transfer")
          assert.strictEqual(refundPart.kind, "transfer")
          const refundId = refundWhole.kind === "transfer" ? refundWhole.transfer.transfer_id : ""
          expect(yield* decryptTransfer(server.baseUrl, pair.sender.api_key, pair.senderKey, refundId)).toMatchObject({ amount: whole.baseUnits, memo })

          const wire = proxy.sent().toString("latin1")
          const dump = yield* dumpDatabase.pipe(Effect.provide(server.services), Effect.orDie)
          const events = (yield* transferEventsOf(server, pair.sender.account_id)).concat(yield* transferEventsOf(server, pair.recipient.account_id))
          assert.isTrue(events.some((event) => event.refund_of === original.transfer_id), "the refund's events were recorded")
          const places = { wire, database: dump, events: JSON.stringify(events), logs: server.logs.join("\n") }
          for (const canary of [...canaryForms(whole, memo), ...canaryForms(partial, memo)]) {
            for (const [place, text] of Object.entries(places)) assert.notInclude(text, canary, `${place} holds ${canary}`)
          }
        })))

      it.effect("a pending transfer is refunded only once confirmed (409, reason pending)", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const pair = yield* fundedPair(server, "10")
          const chain = Option.getOrThrow(Context.get(server.services, Settlement).chain("test"))
          const anvil = (method: string, params: ReadonlyArray<unknown>) =>
            Effect.promise(() => chain.client.request({ method: method as never, params: params as never }))
          // No block is mined: the create answers pending after its wait (D14), and stays pending
          // until mining resumes, after the refund was asked.
          const refused = yield* Effect.gen(function*() {
            yield* anvil("evm_setIntervalMining", [0])
            const pending = yield* transfer(server, pair.sender.api_key, { to: `@${pair.recipientHandle}`, amount: "1" })
            assert.strictEqual(pending.status, "pending")
            return yield* refundPlain(server, pair.recipient.api_key, pending.transfer_id, { amount: "1" })
          }).pipe(Effect.ensuring(anvil("evm_setIntervalMining", [1])))
          assert.strictEqual(expectRefused(refused, 409, "transfer_not_confirmed").reason, "pending")
        }))
    })
  })
