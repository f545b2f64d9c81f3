/**
 * Transfers and balances end to end over a real socket, on embedded anvil, the
 * in-process guardian and either database: keys registered with proofs of
 * possession, a faucet grant, confidential and standard transfers, the sealed
 * copies each party decrypts, balances by non-zero flag and by decryption proof,
 * idempotent replay, and every error SPEC and docs/decisions name for these endpoints.
 */
import { assert, describe, expect, layer } from "@effect/vitest"
import { Context, Data, Effect, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import type { Account } from "@pps/api/Accounts"
import { TransferRecord } from "@pps/api/Transfers"
import { ApiKeys, Client, SealedTransfers } from "@pps/sdk/internal"
import { ElGamal, Note } from "@pps/crypto"
import { hexToBytes, type Hex } from "viem"
import { Accounts } from "../../src/accounts/Accounts.ts"
import type { AppConfigShape } from "../../src/config/AppConfig.ts"
import { Settlement } from "../../src/settlement/Settlement.ts"
import { balanceProof, decryptTransfer, fundedPair, registerKey } from "../support/confidentialClient.ts"
import { bearer, createAccount, expectEnvelope, postJson, send } from "../support/http.ts"
import { canaryForms, recordingProxy } from "../support/recordingProxy.ts"
import { type DatabaseTarget, makeTestServer, TestServer } from "../support/TestServer.ts"

/** D63: the block a proven amount is as of (balances-recent.pglite.test.ts pins which one). */
const block = expect.any(Number)

/** Ends a test's transaction with a rollback, carrying out what it read inside. */
class RolledBack extends Data.TaggedError("RolledBack")<{ readonly read: Option.Option<Account> }> {}

const TransferPage = Schema.Struct({
  data: Schema.Array(TransferRecord),
  limit: Schema.Number,
  offset: Schema.Number,
  has_more: Schema.Boolean
})

export const transfersSuite = (database: DatabaseTarget, config: Partial<AppConfigShape> = {}) =>
  describe("transfers and balances", () => {
    layer(makeTestServer({ database, config }), { timeout: "120 seconds", excludeTestServices: true })(database.name, (it) => {
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
          // The grant is listed, the caller's own only (D50); its amount is public, as on chain.
          const grants = yield* send(`${server.baseUrl}/v1/test/faucet/grants`, { headers: bearer(alice.api_key) })
          assert.strictEqual(grants.status, 200, grants.text)
          expect(grants.json).toMatchObject({
            data: [{ asset: "USDG", amount: "100", tx_hash: (grant.json as { tx_hash: string }).tx_hash }],
            limit: 20,
            offset: 0,
            has_more: false
          })
          expect((grants.json as { data: Array<{ grant_id: string; created_at: string }> }).data[0]).toMatchObject({
            grant_id: expect.stringMatching(/^grant_[0-9A-HJKMNP-TV-Z]{26}$/),
            created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
          })
          expect((yield* send(`${server.baseUrl}/v1/test/faucet/grants`, { headers: bearer(bob.api_key) })).json).toMatchObject({ data: [] })
          expectEnvelope(yield* send(`${server.baseUrl}/v1/test/faucet/grants?limit=0`, { headers: bearer(alice.api_key) }), 400, "invalid_request")

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
          // The block's time (whole seconds), not a default or another clock: within the create's wait.
          assert.isBelow(Date.parse(transfer.confirmed_at ?? "") - Date.parse(transfer.created_at), 60_000)
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
          expect(proven.json).toEqual({ balances: [{ asset: "USDG", amount: "87.5", as_of_block: block }, { asset: "ETH", amount: "0", as_of_block: block }] })
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
          expect(bobBalances.json).toEqual({ balances: [{ asset: "USDG", amount: "12.5", as_of_block: block }, { asset: "ETH", amount: "0", as_of_block: block }] })
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

      it.effect("client-sealed transfers (ext): prepare, seal in the client, create; no amount or memo on the wire", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const carol = yield* createAccount(server, "carol")
          const dan = yield* createAccount(server, "dan")
          const carolKey = yield* registerKey(server.baseUrl, carol.api_key)
          const danKey = yield* registerKey(server.baseUrl, dan.api_key)
          yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(carol.api_key), { amount: "50" }))
          const chain = Option.getOrThrow(Context.get(server.services, Settlement).chain("test"))
          const rpcUrl = chain.rpcUrl

          // Every byte the SDK sends goes through a recording proxy.
          const proxy = yield* recordingProxy(server.baseUrl)
          const carolClient = Client.make({ baseUrl: proxy.baseUrl, apiKey: carol.api_key })
          const memo = "canary-memo-7f3k"
          const sent = yield* Effect.promise(() =>
            SealedTransfers.send(carolClient, { to: "@dan", amount: "31.415926", memo }, {
              senderKey: carolKey.publicKey,
              rpcUrl,
              // The keys are read from the deployment the client pins, never from the contract the API names.
              deployment: { chainId: chain.chainId, contracts: { USDG: chain.contracts.confidentialUsdg, ETH: chain.contracts.confidentialEth } },
              trust: "chain",
              idempotencyKey: "sealed-1"
            })
          )
          assert.strictEqual(sent.status, 201)
          const transfer = Schema.decodeUnknownSync(TransferRecord)(sent.body)
          assert.strictEqual(transfer.status, "confirmed")
          assert.isTrue(transfer.confidential)
          const wire = proxy.sent().toString("latin1")
          assert.include(wire, "/v1/transfers/prepare", "the proxy saw the requests")
          for (const form of canaryForms({ decimal: "31.415926", baseUnits: 31_415_926n }, memo)) {
            assert.notInclude(wire, form, `the wire carried the amount or memo as ${form}`)
          }

          // Both parties open their copies, each checked against the chain's ciphertext.
          const danCopy = yield* decryptTransfer(server.baseUrl, dan.api_key, danKey, transfer.transfer_id)
          expect(danCopy).toMatchObject({ role: "recipient", amount: 31_415_926n, memo })
          const carolCopy = yield* decryptTransfer(server.baseUrl, carol.api_key, carolKey, transfer.transfer_id)
          expect(carolCopy).toMatchObject({ role: "sender", amount: 31_415_926n, memo })

          // Malformed and mismatched sealed bodies: 400 with `param`, 409 for a reused preparation.
          const prepare = (body: unknown) => send(`${server.baseUrl}/v1/transfers/prepare`, postJson(bearer(carol.api_key), body))
          const create = (body: unknown, headers: Record<string, string> = {}) =>
            send(`${server.baseUrl}/v1/transfers`, postJson({ ...bearer(carol.api_key), ...headers }, body))
          expectEnvelope(yield* prepare({ to: "@nobody-at-all" }), 404, "recipient_not_found")
          const prepared = (yield* prepare({ to: "@dan" })).json as Record<string, string>
          const contextOf = (preparation: Record<string, string>) => ({
            chainId: BigInt(preparation["chain_id"]!),
            contract: preparation["contract"] as Hex,
            transferId: hexToBytes(preparation["binding_id"] as Hex)
          })
          const context = contextOf(prepared)
          const seal = (amount: bigint, ctx = context, preparation = prepared) => {
            const boxes = Note.sealTransfer({
              context: ctx,
              note: { amount, memo: "" },
              opening: ElGamal.newOpening(amount),
              senderKey: carolKey.publicKey,
              recipientKey: danKey.publicKey,
              // A guardian key from the answer, as a client would.
              guardianKey: hexToBytes(preparation["guardian_key"] as Hex) as typeof carolKey.publicKey
            })
            const hex = (bytes: Uint8Array) => `0x${Buffer.from(bytes).toString("hex")}`
            return {
              transfer_id: preparation["transfer_id"]!,
              token: preparation["token"]!,
              guardian: hex(boxes.guardian),
              sender: hex(boxes.sender),
              recipient: hex(boxes.recipient)
            }
          }
          const good = seal(1_000_000n)
          // One character of the token's MAC changed, always to another one (replacing its last two
          // with "AA" left it valid whenever it already ended so: about one run in a thousand).
          const tampered = (token: string) => {
            const at = token.length - 10
            return `${token.slice(0, at)}${token[at] === "A" ? "B" : "A"}${token.slice(at + 1)}`
          }
          for (const [body, param] of [
            [{ to: "@dan", amount: "1", sealed: good }, "sealed"],
            [{ to: "@dan", confidential: false, sealed: good }, "confidential"],
            [{ to: "@dan", sealed: { ...good, guardian: "0x00" } }, "sealed.guardian"],
            [{ to: "@dan", sealed: { ...good, recipient: good.sender.slice(0, -2) } }, "sealed.recipient"],
            [{ to: "@dan", sealed: { ...good, transfer_id: "tr_nope" } }, "sealed.transfer_id"],
            [{ to: "@dan", sealed: { ...good, token: tampered(good.token) } }, "sealed.token"],
            // The token was made for @dan and USDG: another recipient or asset is refused.
            [{ to: "@carol-other", sealed: good }, "to"],
            [{ to: "@dan", asset: "ETH", sealed: good }, "sealed.token"],
            // Boxes bound to another transfer id do not open for the guardian: nothing is reserved.
            [{ to: "@dan", sealed: seal(1_000_000n, { ...context, transferId: new Uint8Array(32).fill(7) }) }, "sealed.guardian"]
          ] as const) {
            const answer = yield* create(body)
            if (param === "to") {
              expectEnvelope(answer, 404, "recipient_not_found")
              continue
            }
            assert.strictEqual(answer.status, 400, `refusal expected for ${param}: ${answer.text}`)
            const error = expectEnvelope(answer, 400, "invalid_request")
            assert.strictEqual(error.param, param, JSON.stringify(Object.keys(body)))
          }
          // Two creates of one preparation at once, under two keys: one pays, the other is told so.
          const twice = (yield* prepare({ to: "@dan" })).json as Record<string, string>
          const racing = yield* Effect.all(
            ["sealed-race-1", "sealed-race-2"].map((key) =>
              create({ to: "@dan", sealed: seal(1_000_000n, contextOf(twice), twice) }, { "idempotency-key": key })
            ),
            { concurrency: "unbounded" }
          )
          assert.deepStrictEqual(racing.map((answer) => answer.status).sort(), [201, 409], racing.map((answer) => answer.text).join("\n"))
          expectEnvelope(racing.find((answer) => answer.status === 409)!, 409, "prepared_transfer_used")
          // Nothing was reserved by the refusals: the whole remaining balance can still move.
          const all = yield* create({ to: "@dan", sealed: seal(50_000_000n - 31_415_926n - 1_000_000n) }, { "idempotency-key": "sealed-all" })
          assert.strictEqual(all.status, 201, all.text)
          // A preparation pays once: the same boxes under another key are told so.
          expectEnvelope(yield* create({ to: "@dan", sealed: seal(1n) }, { "idempotency-key": "sealed-again" }), 409, "prepared_transfer_used")
          const proof = yield* balanceProof(server.baseUrl, carol.api_key, carolKey)
          const balances = yield* send(`${server.baseUrl}/v1/accounts/me/balances`, {
            headers: { ...bearer(carol.api_key), "x-decryption-proof": proof }
          })
          expect(balances.json).toEqual({ balances: [{ asset: "USDG", amount: "0", as_of_block: block }, { asset: "ETH", amount: "0", as_of_block: block }] })
        }))

      it.effect("per-key totals (D40): exact after concurrent transfers through several keys, readable only by the holder", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const kim = yield* createAccount(server, "kim")
          const lee = yield* createAccount(server, "lee")
          const kimKey = yield* registerKey(server.baseUrl, kim.api_key)
          yield* registerKey(server.baseUrl, lee.api_key)
          yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(kim.api_key), { amount: "100" }))
          const issue = (name: string) =>
            send(`${server.adminUrl}/admin/keys`, postJson(bearer(server.adminToken), { account_id: kim.account_id, name })).pipe(
              Effect.map((response) => Schema.decodeUnknownSync(Schema.Struct({ key_id: Schema.String, api_key: Schema.String }))(response.json))
            )
          const ci = yield* issue("ci")
          const bot = yield* issue("bot")
          const pay = (apiKey: string, amount: string) =>
            send(`${server.baseUrl}/v1/transfers`, postJson(bearer(apiKey), { to: "@lee", amount }))
          const sealedPay = (apiKey: string, amount: string) =>
            Effect.promise(() =>
              SealedTransfers.send(Client.make({ baseUrl: server.baseUrl, apiKey }), { to: "@lee", amount }, { senderKey: kimKey.publicKey })
            )
          const answers = yield* Effect.all([
            ...Array.from({ length: 3 }, () => pay(kim.api_key, "1.5")),
            ...Array.from({ length: 4 }, () => pay(ci.api_key, "2.25")),
            ...Array.from({ length: 2 }, () => sealedPay(bot.api_key, "0.125").pipe(Effect.map((answer) => ({ status: answer.status, text: "" }))))
          ], { concurrency: "unbounded" })
          for (const answer of answers) assert.strictEqual(answer.status, 201, answer.text)
          // Refused (402) and not counted.
          expectEnvelope(yield* pay(ci.api_key, "1000"), 402, "insufficient_balance")

          const kimClient = Client.make({ baseUrl: server.baseUrl, apiKey: kim.api_key })
          const expected = { [kim.key_id]: ["4.5", 3n], [ci.key_id]: ["9", 4n], [bot.key_id]: ["0.25", 2n] } as const
          // A total counts a transfer once the guardian has settled it, just after its confirmation.
          let figures: ReadonlyArray<ApiKeys.ApiKeyFigures> = []
          for (let attempt = 0; attempt < 40; attempt++) {
            figures = yield* Effect.promise(() => ApiKeys.list(kimClient, kimKey))
            const done = figures.every((key) => {
              const [amount, transfers] = expected[key.keyId] ?? ["0", 0n]
              const usdg = key.totals.find((total) => total.asset === "USDG")
              return (usdg?.amount ?? "0") === amount && (usdg?.transfers ?? 0n) === transfers
            })
            if (done) break
            yield* Effect.sleep("250 millis")
          }
          expect(figures.map((key) => ({
            keyId: key.keyId,
            usdg: key.totals.find((total) => total.asset === "USDG")?.amount ?? "0",
            transfers: key.totals.find((total) => total.asset === "USDG")?.transfers ?? 0n
          })).sort((a, b) => a.keyId.localeCompare(b.keyId))).toEqual(
            Object.entries(expected).map(([keyId, [usdg, transfers]]) => ({ keyId, usdg, transfers })).sort((a, b) => a.keyId.localeCompare(b.keyId))
          )
          // Every confirmed transfer is marked settled with the guardian once the guardian
          // answered (concurrent completions share one UPDATE); an unmarked one would be settled
          // again by every recovery round.
          const sql = Context.get(server.services, SqlClient.SqlClient)
          let unsettled = -1
          for (let attempt = 0; attempt < 40 && unsettled !== 0; attempt++) {
            if (attempt > 0) yield* Effect.sleep("250 millis")
            const rows = yield* sql<{ count: string }>`
              SELECT count(*)::text AS count FROM transfers
              WHERE sender_account_id = ${kim.account_id} AND status = 'confirmed' AND NOT guardian_settled`.pipe(Effect.orDie)
            unsettled = Number(rows[0]?.count)
          }
          assert.strictEqual(unsettled, 0, "confirmed transfers not marked settled with the guardian")
          const ciFigures = figures.find((key) => key.keyId === ci.key_id)
          assert.isAtLeast(ciFigures?.requestCount ?? 0, 5, "request counts include this node's unflushed usage")
          assert.isNotNull(ciFigures?.lastUsedAt)
          // The totals are sealed: nobody else opens them, and the wire carries no amount.
          // Timestamps are plain by D40 and may contain the digits of an amount ("…:34.5…"), so they are
          // left out of the search; every other byte of the answer is searched.
          const raw = yield* send(`${server.baseUrl}/v1/accounts/me/api-keys`, { headers: bearer(kim.api_key) })
          const withoutTimestamps = JSON.stringify(raw.json, (key, value) =>
            key === "created_at" || key === "last_used_at" || key === "revoked_at" ? undefined : value)
          for (const needle of ["4.5", "4500000", "9000000", "250000", "0.25", "2.25"]) assert.notInclude(withoutTimestamps, needle)
          const leeKey = yield* registerKey(server.baseUrl, (yield* createAccount(server, "lee2")).api_key)
          const stolen = yield* Effect.promise(() => ApiKeys.list(kimClient, leeKey).then(() => "opened", (error: Error) => error.name))
          assert.strictEqual(stolen, "ConfidentialError")
          // Lee's own listing shows Lee's key, none of Kim's.
          const leeList = (yield* send(`${server.baseUrl}/v1/accounts/me/api-keys`, { headers: bearer(lee.api_key) })).json as { data: Array<{ key_id: string; totals: Array<unknown> }> }
          expect(leeList.data.map((key) => key.key_id)).toEqual([lee.key_id])
          expect(leeList.data[0]?.totals).toEqual([])
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

          // D6: a refusal is a first response too. Retried after the balance was topped up, the same
          // key and body answer the same 402, replayed: nothing is paid.
          const tooMuch = { to: "@erin", amount: "50" }
          expectEnvelope(yield* post(dave.api_key, tooMuch, { "idempotency-key": "too-much-1" }), 402, "insufficient_balance")
          assert.strictEqual((yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(dave.api_key), { amount: "100" }))).status, 200)
          const replayedRefusal = yield* post(dave.api_key, tooMuch, { "idempotency-key": "too-much-1" })
          expectEnvelope(replayedRefusal, 402, "insufficient_balance")
          assert.strictEqual(replayedRefusal.headers.get("idempotent-replayed"), "true")
          // A new key is a new request: it is paid.
          assert.strictEqual((yield* post(dave.api_key, tooMuch, { "idempotency-key": "too-much-2" })).status, 201)
        }))

      it.effect("D62: a standard transfer's public amount, read back from its transaction, opens for both parties", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const { recipient, recipientHandle, recipientKey, sender, senderKey } = yield* fundedPair(server, "10")
          const created = yield* send(
            `${server.baseUrl}/v1/transfers`,
            postJson(bearer(sender.api_key), { to: `@${recipientHandle}`, amount: "1.25", confidential: false, memo: "public pay" })
          )
          assert.strictEqual(created.status, 201, created.text)
          const transfer = Schema.decodeUnknownSync(TransferRecord)(created.json)
          expect(transfer).toMatchObject({ confidential: false, status: "confirmed" })
          // The transfer's representation stays amount-free (SPEC, D13): the amount is only in the sealed read.
          const read = yield* send(`${server.baseUrl}/v1/transfers/${transfer.transfer_id}`, { headers: bearer(recipient.api_key) })
          assert.notInclude(read.text, "1.25")
          for (const [party, key, keyPair] of [["sender", sender.api_key, senderKey], ["recipient", recipient.api_key, recipientKey]] as const) {
            const sealed = yield* send(`${server.baseUrl}/v1/transfers/${transfer.transfer_id}/sealed`, { headers: bearer(key) })
            expect(sealed.json, party).toMatchObject({ role: party, public_amount: "1.25", handle: party === "sender" ? expect.any(String) : null })
            const opened = yield* decryptTransfer(server.baseUrl, key, keyPair, transfer.transfer_id)
            expect(opened, party).toMatchObject({ role: party, amount: 1_250_000n, memo: "public pay" })
          }
          // A confidential transfer's sealed read has none.
          const secret = yield* send(`${server.baseUrl}/v1/transfers`, postJson(bearer(sender.api_key), { to: `@${recipientHandle}`, amount: "2" }))
          const secretId = Schema.decodeUnknownSync(TransferRecord)(secret.json).transfer_id
          for (const key of [sender.api_key, recipient.api_key]) {
            expect((yield* send(`${server.baseUrl}/v1/transfers/${secretId}/sealed`, { headers: bearer(key) })).json).toMatchObject({ public_amount: null })
          }
        }))

      it.effect("account reads asked together (each create reads its sender and recipient) each get their own row", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const accounts = Context.get(server.services, Accounts)
          const sql = Context.get(server.services, SqlClient.SqlClient)
          const gil = yield* createAccount(server, "reads.gil")
          const hana = yield* createAccount(server, "reads.hana")
          // Asked in the same turn, so they share a SELECT per kind: twice the same id, a missing
          // id and a missing handle among them.
          const [byGil, byHana, byGilAgain, byNobody, gilByHandle, hanaByHandle, nobodyByHandle] = yield* Effect.all([
            accounts.get(gil.account_id),
            accounts.get(hana.account_id),
            accounts.get(gil.account_id),
            accounts.get("acct_nobody"),
            accounts.findByHandle("reads.gil"),
            accounts.findByHandle("reads.hana"),
            accounts.findByHandle("reads.nobody")
          ], { concurrency: "unbounded" })
          const handleOf = (found: Option.Option<{ readonly handle: string }>) => Option.getOrUndefined(Option.map(found, (a) => a.handle))
          assert.deepStrictEqual(
            [byGil, byHana, byGilAgain, byNobody, gilByHandle, hanaByHandle, nobodyByHandle].map(handleOf),
            ["reads.gil", "reads.hana", "reads.gil", undefined, "reads.gil", "reads.hana", undefined]
          )
          assert.strictEqual(Option.getOrThrow(hanaByHandle).accountId, hana.account_id)
          // A read inside a transaction runs in it (reads are shared only within one transaction):
          // it sees the transaction's own uncommitted change, which is gone once it rolls back.
          const inside = yield* sql.withTransaction(Effect.gen(function*() {
            yield* sql`UPDATE accounts SET kyc_status = 'pending' WHERE account_id = ${gil.account_id}`
            const [read] = yield* Effect.all([accounts.get(gil.account_id), accounts.get(hana.account_id)], {
              concurrency: "unbounded"
            })
            return yield* Effect.fail(new RolledBack({ read }))
          })).pipe(Effect.catchTag("RolledBack", ({ read }) => Effect.succeed(read)))
          assert.strictEqual(Option.getOrThrow(inside).kycStatus, "pending")
          assert.strictEqual(Option.getOrThrow(yield* accounts.get(gil.account_id)).kycStatus, "verified")
        }))
    })
  })
