/**
 * Transfers and balances end to end over a real socket, on embedded anvil, the
 * in-process guardian and either database: keys registered with proofs of
 * possession, a faucet grant, confidential and standard transfers, the sealed
 * copies each party decrypts, balances by non-zero flag and by decryption proof,
 * idempotent replay, and every error SPEC and DECISIONS name for these endpoints.
 */
import { assert, describe, expect, layer } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { TransferRecord } from "../../src/transfers/domain.ts"
import { balanceProof, decryptTransfer, registerKey } from "../support/confidentialClient.ts"
import { bearer, createAccount, expectEnvelope, postJson, send } from "../support/http.ts"
import { type DatabaseTarget, makeTestServer, TestServer } from "../support/TestServer.ts"

const TransferPage = Schema.Struct({
  data: Schema.Array(TransferRecord),
  limit: Schema.Number,
  offset: Schema.Number,
  has_more: Schema.Boolean
})

export const transfersSuite = (database: DatabaseTarget) =>
  describe("transfers and balances", () => {
    layer(makeTestServer({ database }), { timeout: "120 seconds", excludeTestServices: true })(database.name, (it) => {
      it.effect("confidential transfer end to end: keys, faucet, transfer, sealed copies, balances by proof", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const alice = yield* createAccount(server, "alice")
          const bob = yield* createAccount(server, "bob")
          const aliceKey = yield* registerKey(server.baseUrl, alice.api_key)
          const bobKey = yield* registerKey(server.baseUrl, bob.api_key)
          // Registering the same key again is a no-op; another key is refused.
          yield* registerKey(server.baseUrl, alice.api_key, aliceKey)

          const grant = yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(alice.api_key), { amount: "100" }))
          assert.strictEqual(grant.status, 200, grant.text)

          const flags = yield* send(`${server.baseUrl}/v1/accounts/me/balances`, { headers: bearer(alice.api_key) })
          expect(flags.json).toEqual({ balances: [{ asset: "USDG", non_zero: true }, { asset: "ETH", non_zero: false }] })

          const created = yield* send(
            `${server.baseUrl}/v1/transfers`,
            postJson(bearer(alice.api_key), { to: "@bob", amount: "12.5", memo: "lunch money" })
          )
          assert.strictEqual(created.status, 201, created.text)
          const transfer = Schema.decodeUnknownSync(TransferRecord)(created.json)
          assert.strictEqual(transfer.status, "confirmed")
          assert.strictEqual(transfer.from, "@alice")
          assert.strictEqual(transfer.to, "@bob")
          assert.strictEqual(transfer.direction, "sent")
          assert.strictEqual(transfer.asset, "USDG")
          assert.isTrue(transfer.confidential)
          assert.match(transfer.tx_hash ?? "", /^0x[0-9a-f]{64}$/)
          assert.isTrue(transfer.confirmed_at !== null && transfer.confirmed_at >= transfer.created_at, "confirmed after created")
          assert.notInclude(created.text, "12.5")
          assert.notInclude(created.text, "lunch")

          const asBob = yield* send(`${server.baseUrl}/v1/transfers/${transfer.transfer_id}`, { headers: bearer(bob.api_key) })
          expect(asBob.json).toMatchObject({ transfer_id: transfer.transfer_id, direction: "received", status: "confirmed" })
          const bobCopy = yield* decryptTransfer(server.baseUrl, bob.api_key, bobKey, transfer.transfer_id)
          expect(bobCopy).toEqual({
            transferId: transfer.transfer_id,
            role: "recipient",
            asset: "USDG",
            amount: 12_500_000n,
            memo: "lunch money"
          })
          const aliceCopy = yield* decryptTransfer(server.baseUrl, alice.api_key, aliceKey, transfer.transfer_id)
          expect(aliceCopy).toEqual({ ...bobCopy, role: "sender" })

          const aliceProof = yield* balanceProof(server.baseUrl, alice.api_key, aliceKey)
          const proven = yield* send(`${server.baseUrl}/v1/accounts/me/balances`, {
            headers: { ...bearer(alice.api_key), "x-decryption-proof": aliceProof }
          })
          expect(proven.json).toEqual({ balances: [{ asset: "USDG", amount: "87.5" }, { asset: "ETH", amount: "0" }] })
          // The same proof in the query parameter, and in a GET body (D20).
          const viaQuery = yield* send(
            `${server.baseUrl}/v1/accounts/me/balances?decryption_proof=${encodeURIComponent(aliceProof)}`,
            { headers: bearer(alice.api_key) }
          )
          assert.strictEqual(viaQuery.status, 200, viaQuery.text)
          const bobProof = yield* balanceProof(server.baseUrl, bob.api_key, bobKey)
          const bobBalances = yield* send(`${server.baseUrl}/v1/accounts/me/balances`, {
            headers: { ...bearer(bob.api_key), "x-decryption-proof": bobProof }
          })
          expect(bobBalances.json).toEqual({ balances: [{ asset: "USDG", amount: "12.5" }, { asset: "ETH", amount: "0" }] })
          // Alice's proof is not Bob's.
          const stolen = yield* send(`${server.baseUrl}/v1/accounts/me/balances`, {
            headers: { ...bearer(bob.api_key), "x-decryption-proof": aliceProof }
          })
          expectEnvelope(stolen, 422, "decryption_proof_invalid")
          expectEnvelope(
            yield* send(`${server.baseUrl}/v1/accounts/me/balances`, { headers: { ...bearer(bob.api_key), "x-decryption-proof": "bm9wZQ" } }),
            422,
            "decryption_proof_invalid"
          )

          const list = Schema.decodeUnknownSync(TransferPage)(
            (yield* send(`${server.baseUrl}/v1/transfers?limit=10`, { headers: bearer(bob.api_key) })).json
          )
          assert.strictEqual(list.data.length, 1)
          assert.strictEqual(list.data[0]?.direction, "received")
          assert.isFalse(list.has_more)
        }))

      it.effect("SPEC's errors for transfers and balances, and D16's list rules", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const dave = yield* createAccount(server, "dave")
          const erin = yield* createAccount(server, "erin")
          const frank = yield* createAccount(server, "frank.unverified", "pending")
          const grace = yield* createAccount(server, "grace.nokey")
          yield* registerKey(server.baseUrl, dave.api_key)
          yield* registerKey(server.baseUrl, erin.api_key)
          yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(dave.api_key), { amount: "10" }))
          const post = (key: string, body: unknown, headers: Record<string, string> = {}) =>
            send(`${server.baseUrl}/v1/transfers`, postJson({ ...bearer(key), ...headers }, body))

          expectEnvelope(yield* post(dave.api_key, { to: "@erin", amount: "1000" }), 402, "insufficient_balance")
          expectEnvelope(yield* post(dave.api_key, { to: "@nobody-here", amount: "1" }), 404, "recipient_not_found")
          const notReady = expectEnvelope(yield* post(dave.api_key, { to: "@grace.nokey", amount: "1" }), 422, "recipient_not_confidential_ready")
          assert.include(notReady.message, "confidential")
          expectEnvelope(yield* post(dave.api_key, { to: "@dave", amount: "1" }), 400, "invalid_request")
          for (const [body, param] of [
            [{ to: "@erin", amount: "1.1234567" }, "amount"],
            [{ to: "@erin", amount: "0" }, "amount"],
            [{ to: "@erin", amount: "-1" }, "amount"],
            [{ to: "@erin", amount: "1e3" }, "amount"],
            [{ to: "@erin", amount: "1000000000001" }, "amount"],
            [{ to: "@erin", amount: "1", asset: "DOGE" }, "asset"],
            // Encrypted amounts are u64 base units: 2^64 wei is refused, not a 500.
            [{ to: "@erin", amount: "18.446744073709551616", asset: "ETH" }, "amount"],
            [{ to: "@erin", amount: "1", memo: "x".repeat(513) }, "memo"],
            [{ to: "not a handle!", amount: "1" }, "to"],
            [{ amount: "1" }, "to"],
            [{ to: "@erin" }, "amount"],
            [{ to: "@erin", amount: 5 }, "amount"]
          ] as const) {
            const error = expectEnvelope(yield* post(dave.api_key, body), 400, "invalid_request")
            assert.strictEqual(error.param, param, JSON.stringify(body))
          }
          expectEnvelope(yield* post(frank.api_key, { to: "@erin", amount: "1" }), 403, "kyc_required")
          expectEnvelope(
            yield* send(`${server.baseUrl}/v1/accounts/me/balances`, { headers: bearer(frank.api_key) }),
            403,
            "kyc_required"
          )
          expectEnvelope(yield* post(grace.api_key, { to: "@erin", amount: "1" }), 422, "encryption_key_required")

          // A live key: no mainnet configured (D9).
          const liveKey = yield* send(`${server.adminUrl}/admin/keys`, postJson(bearer(server.adminToken), {
            account_id: dave.account_id,
            name: "live",
            mode: "live"
          }))
          const live = Schema.decodeUnknownSync(Schema.Struct({ api_key: Schema.String }))(liveKey.json).api_key
          expectEnvelope(yield* post(live, { to: "@erin", amount: "1" }), 403, "livemode_unavailable")
          expectEnvelope(
            yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(live), { amount: "1" })),
            403,
            "test_mode_only"
          )

          expectEnvelope(yield* send(`${server.baseUrl}/v1/transfers/tr_unknown`, { headers: bearer(dave.api_key) }), 404, "transfer_not_found")
          for (const [query, param] of [["limit=0", "limit"], ["limit=101", "limit"], ["offset=-1", "offset"], ["status=lost", "status"], ["from=yesterday", "from"], ["to=2026-13-99", "to"]] as const) {
            const error = expectEnvelope(yield* send(`${server.baseUrl}/v1/transfers?${query}`, { headers: bearer(dave.api_key) }), 400, "invalid_request")
            assert.strictEqual(error.param, param, query)
          }

          // Idempotent create (D6): one transfer, one chain transaction, the same answer.
          const first = yield* post(dave.api_key, { to: "@erin", amount: "2" }, { "idempotency-key": "pay-erin-1" })
          const again = yield* post(dave.api_key, { to: "@erin", amount: "2" }, { "idempotency-key": "pay-erin-1" })
          assert.strictEqual(first.status, 201, first.text)
          assert.strictEqual(again.status, 201)
          assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
          assert.strictEqual(again.text, first.text)
          const daveList = Schema.decodeUnknownSync(TransferPage)(
            (yield* send(`${server.baseUrl}/v1/transfers?status=confirmed`, { headers: bearer(dave.api_key) })).json
          )
          assert.strictEqual(daveList.data.length, 1)
          // A standard (non-confidential) transfer to a recipient without a key works.
          const standard = yield* post(dave.api_key, { to: "@grace.nokey", amount: "1", confidential: false })
          assert.strictEqual(standard.status, 201, standard.text)
          expect(standard.json).toMatchObject({ confidential: false, status: "confirmed", to: "@grace.nokey" })
          // Newest first.
          const ordered = Schema.decodeUnknownSync(TransferPage)(
            (yield* send(`${server.baseUrl}/v1/transfers?limit=1`, { headers: bearer(dave.api_key) })).json
          )
          assert.strictEqual(ordered.data[0]?.transfer_id, Schema.decodeUnknownSync(TransferRecord)(standard.json).transfer_id)
          assert.isTrue(ordered.has_more)
        }))
    })
  })
