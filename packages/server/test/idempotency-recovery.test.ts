/**
 * D36 over a real socket on embedded anvil: an `Idempotency-Key` names one operation,
 * whatever happened to the request that ran it.
 *
 * A crash is reproduced at its exact line by putting the claim back in the state a
 * dead node leaves it in (no response, an owner whose heartbeat is gone); the process
 * kill itself, at random lines under load, is the fault harness's (test/fault).
 *
 * And the api-tier attacker of docs/security.md: with the whole database and every secret of
 * the api tier, a guessed amount cannot be confirmed from the idempotency store.
 */
import { createHmac } from "node:crypto"
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Exit, Option, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { GuardianClient } from "@pps/guardian"
import { ElGamal, EncryptionKey, Note } from "@pps/crypto"
import { bytesToHex, getAbiItem, type Hex, hexToBytes } from "viem"
import { ConfidentialTokenArtifact } from "@pps/contracts"
import { requestFingerprint } from "../src/http/Idempotency.ts"
import { CurrentIdempotencyScope, OperationReplay } from "../src/platform/IdempotentOperations.ts"
import { Secrets } from "../src/platform/Secrets.ts"
import { Settlement } from "../src/settlement/Settlement.ts"
import { makeTransfersContext } from "../src/transfers/context.ts"
import { recordCreated } from "../src/transfers/record.ts"
import { TransferStore } from "../src/transfers/TransferStore.ts"
import { transferEvents } from "@pps/api/Events"
import { TransferRecord } from "@pps/api/Transfers"
import { registerKey } from "./support/confidentialClient.ts"
import { bearer, createAccount, send } from "./support/http.ts"
import { makeTestServer, TestServer } from "./support/TestServer.ts"

const post = (url: string, apiKey: string, idempotencyKey: string, body: unknown) =>
  send(url, {
    method: "POST",
    headers: { ...bearer(apiKey), "content-type": "application/json", "idempotency-key": idempotencyKey },
    body: JSON.stringify(body)
  })

describe("idempotency after a fault (D36)", () => {
  layer(makeTestServer(), { timeout: "180 seconds", excludeTestServices: true })("embedded", (it) => {
    /** Puts every claim of the account back as a node that died mid-request leaves it. */
    const crashClaims = (accountId: string) =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const sql = Context.get(server.services, SqlClient.SqlClient)
        yield* sql`
          UPDATE idempotency_keys SET response_status = NULL, response_body = NULL, owner_node = 'node_dead'
          WHERE account_id = ${accountId}`
      })

    /** A claim as a node that died right after claiming leaves it, naming `operation` if given. */
    const insertDeadClaim = (
      accountId: string,
      key: string,
      path: string,
      body: unknown,
      operation: { readonly kind: string; readonly id: string } | null
    ) =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const sql = Context.get(server.services, SqlClient.SqlClient)
        const pepper = Redacted.value(Context.get(server.services, Secrets).apiKeyPepper)
        const digest = new Uint8Array(createHmac("sha256", pepper).update("pps/idempotency-key/v2\n").update(key).digest())
        const fingerprint = requestFingerprint(key, "POST", path, JSON.stringify(body))
        yield* sql`
          INSERT INTO idempotency_keys (account_id, mode, key_digest, request_hash, owner_node, operation_kind, operation_id, created_at, expires_at)
          VALUES (${accountId}, 'test', ${digest}, ${fingerprint}, 'node_dead', ${operation?.kind ?? null},
                  ${operation?.id ?? null}, now(), now() + interval '1 day')`
      })

    const transfersOf = (accountId: string) =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const sql = Context.get(server.services, SqlClient.SqlClient)
        return yield* sql<{ transfer_id: string; status: string }>`
          SELECT transfer_id, status FROM transfers WHERE sender_account_id = ${accountId}`
      })

    it.effect("a transfer whose request died after recording it is answered from it, never paid again", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const alice = yield* createAccount(server, "crash.alice")
        const bob = yield* createAccount(server, "crash.bob")
        yield* registerKey(server.baseUrl, alice.api_key)
        yield* registerKey(server.baseUrl, bob.api_key)
        const funded = yield* post(`${server.baseUrl}/v1/test/faucet`, alice.api_key, "fund-1", { amount: "50" })
        assert.strictEqual(funded.status, 200, funded.text)

        const body = { to: "@crash.bob", amount: "3.5", memo: "once" }
        const first = yield* post(`${server.baseUrl}/v1/transfers`, alice.api_key, "pay-bob-1", body)
        assert.strictEqual(first.status, 201, first.text)
        const created = Schema.decodeUnknownSync(TransferRecord)(first.json)

        yield* crashClaims(alice.account_id)
        const retried = yield* post(`${server.baseUrl}/v1/transfers`, alice.api_key, "pay-bob-1", body)
        assert.strictEqual(retried.status, 201, retried.text)
        assert.strictEqual(retried.headers.get("idempotent-replayed"), "true")
        const answered = Schema.decodeUnknownSync(TransferRecord)(retried.json)
        assert.strictEqual(answered.transfer_id, created.transfer_id)
        assert.strictEqual(answered.status, "confirmed")
        assert.lengthOf(yield* transfersOf(alice.account_id), 1)

        // A different body under the same key is still a reuse, even with no stored response.
        const reused = yield* post(`${server.baseUrl}/v1/transfers`, alice.api_key, "pay-bob-1", { ...body, amount: "3.6" })
        assert.strictEqual(reused.status, 409, reused.text)
        assert.strictEqual((reused.json as { error: { code: string } }).error.code, "idempotency_key_reused")
      }))

    it.effect("creates recorded together bind each idempotency key to its own transfer and store its own response", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const sql = Context.get(server.services, SqlClient.SqlClient)
        const recipient = yield* createAccount(server, "batch.zed")
        yield* registerKey(server.baseUrl, recipient.api_key)
        const senders = yield* Effect.forEach(["batch.ann", "batch.ben", "batch.cat", "batch.dan"], (handle) =>
          Effect.gen(function*() {
            const sender = yield* createAccount(server, handle)
            yield* registerKey(server.baseUrl, sender.api_key)
            const funded = yield* post(`${server.baseUrl}/v1/test/faucet`, sender.api_key, `fund-${handle}`, { amount: "10" })
            assert.strictEqual(funded.status, 200, funded.text)
            return sender
          }), { concurrency: "unbounded" })
        // Concurrent creates of different senders reach the record step together (the guardian
        // answers its group at once) and share its transaction; each key must name its own transfer.
        const answers = yield* Effect.forEach(senders, (sender, index) =>
          post(`${server.baseUrl}/v1/transfers`, sender.api_key, `pay-zed-${index}`, { to: "@batch.zed", amount: "1" }).pipe(
            Effect.map((answer) => ({ sender, answer }))
          ), { concurrency: "unbounded" })
        for (const { answer, sender } of answers) {
          assert.strictEqual(answer.status, 201, answer.text)
          const created = Schema.decodeUnknownSync(TransferRecord)(answer.json)
          const bound = yield* sql<{ operation_id: string }>`
            SELECT operation_id FROM idempotency_keys WHERE account_id = ${sender.account_id} AND operation_kind = 'transfer'`
          assert.deepStrictEqual(bound.map((row) => row.operation_id), [created.transfer_id])
          assert.deepStrictEqual((yield* transfersOf(sender.account_id)).map((row) => row.transfer_id), [created.transfer_id])
        }
        // Their responses are stored together too (one statement for a turn's responses), each under its own key.
        for (const [index, { answer, sender }] of answers.entries()) {
          const created = Schema.decodeUnknownSync(TransferRecord)(answer.json)
          const stored = yield* sql<{ response_status: number; response_body: string }>`
            SELECT response_status, response_body FROM idempotency_keys WHERE account_id = ${sender.account_id} AND operation_kind = 'transfer'`
          assert.strictEqual(stored[0]?.response_status, 201)
          assert.strictEqual(Schema.decodeUnknownSync(TransferRecord)(JSON.parse(stored[0]?.response_body ?? "null")).transfer_id, created.transfer_id)
          const replayed = yield* post(`${server.baseUrl}/v1/transfers`, sender.api_key, `pay-zed-${index}`, { to: "@batch.zed", amount: "1" })
          assert.strictEqual(replayed.headers.get("idempotent-replayed"), "true")
          assert.strictEqual(Schema.decodeUnknownSync(TransferRecord)(replayed.json).transfer_id, created.transfer_id)
        }
      }))

    it.effect("a webhook replay cut off after it was recorded is answered with its delivery, never delivered twice", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const sql = Context.get(server.services, SqlClient.SqlClient)
        const carol = yield* createAccount(server, "replay.carol")
        const dave = yield* createAccount(server, "replay.dave")
        yield* registerKey(server.baseUrl, carol.api_key)
        yield* registerKey(server.baseUrl, dave.api_key)
        assert.strictEqual((yield* post(`${server.baseUrl}/v1/test/faucet`, carol.api_key, "replay-fund", { amount: "5" })).status, 200)
        const hook = yield* post(`${server.baseUrl}/v1/webhooks`, carol.api_key, "replay-hook", {
          url: "https://example.com/hook",
          events: ["transfer.initiated"]
        })
        assert.strictEqual(hook.status, 201, hook.text)
        const webhookId = (hook.json as { webhook_id: string }).webhook_id
        assert.strictEqual((yield* post(`${server.baseUrl}/v1/transfers`, carol.api_key, "replay-pay", { to: "@replay.dave", amount: "1" })).status, 201)
        const [event] = yield* sql<{ event_id: string }>`SELECT event_id FROM events WHERE account_id = ${carol.account_id} LIMIT 1`
        const url = `${server.baseUrl}/v1/webhooks/${webhookId}/replay/${event!.event_id}`
        const first = yield* post(url, carol.api_key, "replay-1", {})
        assert.strictEqual(first.status, 202, first.text)

        yield* crashClaims(carol.account_id)
        const retried = yield* post(url, carol.api_key, "replay-1", {})
        assert.strictEqual(retried.status, 202, retried.text)
        assert.strictEqual(retried.headers.get("idempotent-replayed"), "true")
        assert.strictEqual((retried.json as { delivery_id: string }).delivery_id, (first.json as { delivery_id: string }).delivery_id)
        const replays = yield* sql<{ n: string }>`
          SELECT count(*)::text AS n FROM webhook_deliveries WHERE webhook_id = ${webhookId} AND trigger = 'replay'`
        assert.strictEqual(replays[0]?.n, "1")
      }))

    it.effect("a claim that recorded nothing runs once on retry; a live node's claim is in progress", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const sql = Context.get(server.services, SqlClient.SqlClient)
        const carol = yield* createAccount(server, "crash.carol")
        yield* createAccount(server, "crash.dave").pipe(Effect.tap((dave) => registerKey(server.baseUrl, dave.api_key)))
        yield* registerKey(server.baseUrl, carol.api_key)
        yield* post(`${server.baseUrl}/v1/test/faucet`, carol.api_key, "fund-1", { amount: "20" })
        const body = { to: "@crash.dave", amount: "1" }

        // A dead node claimed the key and died before recording anything (a 402, or a crash
        // before the transfer's SQL transaction): the retry runs the transfer, once.
        const before = (yield* transfersOf(carol.account_id)).length
        yield* insertDeadClaim(carol.account_id, "pay-dave-1", "/v1/transfers", body, null)
        const first = yield* post(`${server.baseUrl}/v1/transfers`, carol.api_key, "pay-dave-1", body)
        assert.strictEqual(first.status, 201, first.text)
        assert.strictEqual(first.headers.get("idempotent-replayed"), null)
        const again = yield* post(`${server.baseUrl}/v1/transfers`, carol.api_key, "pay-dave-1", body)
        assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
        assert.strictEqual((yield* transfersOf(carol.account_id)).length, before + 1)

        // A claim of another node whose heartbeat is fresh, without a response yet: in progress.
        yield* sql`INSERT INTO node_heartbeats (node_id, started_at, beat_at) VALUES ('node_other', now(), now())`
        yield* sql`
          UPDATE idempotency_keys SET response_status = NULL, response_body = NULL, owner_node = 'node_other'
          WHERE account_id = ${carol.account_id}`
        const busy = yield* post(`${server.baseUrl}/v1/transfers`, carol.api_key, "pay-dave-1", body)
        assert.strictEqual(busy.status, 409, busy.text)
        assert.strictEqual((busy.json as { error: { code: string } }).error.code, "idempotency_key_in_progress")
        // The same claim as this node's own, no longer running here: answered from its record.
        const node = yield* sql<{ node_id: string }>`SELECT node_id FROM node_heartbeats WHERE node_id <> 'node_other' LIMIT 1`
        yield* sql`UPDATE idempotency_keys SET owner_node = ${node[0]!.node_id} WHERE account_id = ${carol.account_id}`
        const mine = yield* post(`${server.baseUrl}/v1/transfers`, carol.api_key, "pay-dave-1", body)
        assert.strictEqual(mine.status, 201, mine.text)
        assert.strictEqual(mine.headers.get("idempotent-replayed"), "true")
      }))

    it.effect("a run whose claim was taken over cannot commit a record beside the other's (fencing)", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const sql = Context.get(server.services, SqlClient.SqlClient)
        const operations = Context.get(server.services, OperationReplay)
        const kim = yield* createAccount(server, "fence.kim")
        yield* insertDeadClaim(kim.account_id, "fenced", "/v1/transfers", {}, null)
        const pepper = Redacted.value(Context.get(server.services, Secrets).apiKeyPepper)
        const keyDigest = new Uint8Array(createHmac("sha256", pepper).update("pps/idempotency-key/v2\n").update("fenced").digest())
        yield* sql`UPDATE idempotency_keys SET claim_token = 'the-retry' WHERE account_id = ${kim.account_id}`
        const write = (claimToken: string) =>
          sql.withTransaction(Effect.gen(function*() {
            yield* sql`INSERT INTO node_heartbeats (node_id, started_at, beat_at) VALUES (${`node_marker_${claimToken}`}, now(), now())`
            yield* operations.bind("transfer", `tr_${claimToken}`)
          })).pipe(
            Effect.provideService(CurrentIdempotencyScope, Option.some({ accountId: kim.account_id, mode: "test", keyDigest, claimToken, answer: { storable: true } }))
          )
        // The superseded run: its bind dies, and its whole transaction (the marker row) rolls back.
        const superseded = yield* Effect.exit(write("the-first"))
        assert.isTrue(Exit.hasDies(superseded))
        assert.lengthOf(yield* sql`SELECT 1 FROM node_heartbeats WHERE node_id = 'node_marker_the-first'`, 0)
        // The run holding the claim binds.
        yield* write("the-retry")
        const bound = yield* sql<{ operation_id: string }>`SELECT operation_id FROM idempotency_keys WHERE account_id = ${kim.account_id}`
        assert.strictEqual(bound[0]!.operation_id, "tr_the-retry")

        // Records bound together (one statement for a batch of creates): one superseded claim
        // among them fails the whole transaction, and nobody's binding is committed.
        yield* insertDeadClaim(kim.account_id, "fenced-2", "/v1/transfers", {}, null)
        const secondDigest = new Uint8Array(createHmac("sha256", pepper).update("pps/idempotency-key/v2\n").update("fenced-2").digest())
        yield* sql`UPDATE idempotency_keys SET claim_token = 'second-run' WHERE account_id = ${kim.account_id} AND key_digest = ${secondDigest}`
        yield* sql`UPDATE idempotency_keys SET claim_token = 'the-retry', operation_id = NULL WHERE account_id = ${kim.account_id} AND key_digest = ${keyDigest}`
        const scopeOf = (digest: Uint8Array, claimToken: string) =>
          Option.some({ accountId: kim.account_id, mode: "test", keyDigest: digest, claimToken, answer: { storable: true } })
        const together = yield* Effect.exit(sql.withTransaction(operations.bindEach("transfer", [
          { scope: scopeOf(keyDigest, "the-retry"), operationId: "tr_together-1" },
          { scope: Option.none(), operationId: "tr_without-key" },
          { scope: scopeOf(secondDigest, "superseded-run"), operationId: "tr_together-2" }
        ])))
        assert.isTrue(Exit.hasDies(together))
        const afterFailure = yield* sql<{ operation_id: string | null }>`
          SELECT operation_id FROM idempotency_keys WHERE account_id = ${kim.account_id} ORDER BY operation_id NULLS LAST`
        assert.deepStrictEqual(afterFailure.map((row) => row.operation_id), [null, null])
        // Every claim current: each key names its own record.
        yield* sql.withTransaction(operations.bindEach("transfer", [
          { scope: scopeOf(keyDigest, "the-retry"), operationId: "tr_together-1" },
          { scope: Option.none(), operationId: "tr_without-key" },
          { scope: scopeOf(secondDigest, "second-run"), operationId: "tr_together-2" }
        ]))
        const named = yield* sql<{ key_digest: Uint8Array; operation_id: string }>`
          SELECT key_digest, operation_id FROM idempotency_keys WHERE account_id = ${kim.account_id}`
        assert.deepStrictEqual(
          new Map(named.map((row) => [Buffer.from(row.key_digest).toString("hex"), row.operation_id])),
          new Map([[Buffer.from(keyDigest).toString("hex"), "tr_together-1"], [Buffer.from(secondDigest).toString("hex"), "tr_together-2"]])
        )
        yield* sql`DELETE FROM node_heartbeats WHERE node_id LIKE 'node_marker_%'`
      }))

    it.effect("the record step, fenced: a shared record with a taken-over claim commits none of its rows, one with its claim commits all", () =>
      Effect.gen(function*() {
        // The record step writes a create's binding, transfer row, events and chain submission
        // in one statement (record.ts); the binding's fence must still keep all of them out.
        const server = yield* TestServer
        const sql = Context.get(server.services, SqlClient.SqlClient)
        const context = yield* makeTransfersContext.pipe(Effect.provide(server.services))
        const lou = yield* createAccount(server, "fence.lou")
        yield* insertDeadClaim(lou.account_id, "fenced-record", "/v1/transfers", {}, null)
        const pepper = Redacted.value(Context.get(server.services, Secrets).apiKeyPepper)
        const keyDigest = new Uint8Array(createHmac("sha256", pepper).update("pps/idempotency-key/v2\n").update("fenced-record").digest())
        yield* sql`UPDATE idempotency_keys SET claim_token = 'the-retry' WHERE account_id = ${lou.account_id}`
        const record = (transferId: string, claimToken: string) => {
          const transfer = {
            transferId,
            mode: "test" as const,
            senderAccountId: lou.account_id,
            recipientAccountId: null,
            recipientAddress: "0x000000000000000000000000000000000000dEaD",
            recipientDisplay: "0x000000000000000000000000000000000000dEaD",
            asset: "USDG",
            confidential: true,
            apiKeyId: "key_fence",
            replayNonce: 1n,
            deadlineSeconds: 2_000_000_000n,
            senderBox: new Uint8Array([1]),
            recipientBox: new Uint8Array([2]),
            sealedDigest: `0x${"00".repeat(32)}`,
            ciphertext: "{}",
            createdAt: "2026-11-30T12:00:00.000Z",
            refundOf: null
          }
          const events = transferEvents({
            event: "transfer.initiated",
            mode: "test",
            transferId,
            sender: { accountId: lou.account_id, handle: "fence.lou", ownerAccountId: null },
            recipient: null,
            recipientDisplay: transfer.recipientDisplay,
            asset: "USDG",
            confidential: true,
            txHash: null,
            refundOf: null
          })
          const submission = {
            submissionId: transferId,
            mode: "test" as const,
            kind: "confidential_transfer" as const,
            target: "0x5FbDB2315678afecb367f032d93F642f64180aa3" as const,
            data: "0x01" as const,
            gasLimit: 300_000n,
            deadlineSeconds: 2_000_000_000n,
            replayKey: null
          }
          return recordCreated(context)(transfer, events, submission).pipe(
            Effect.provideService(
              CurrentIdempotencyScope,
              Option.some({ accountId: lou.account_id, mode: "test", keyDigest, claimToken, answer: { storable: true } })
            )
          )
        }
        const rowsOf = (transferId: string) =>
          Effect.all([
            sql`SELECT 1 FROM transfers WHERE transfer_id = ${transferId}`,
            sql`SELECT 1 FROM events WHERE payload LIKE ${`%${transferId}%`}`,
            sql`SELECT 1 FROM chain_submissions WHERE submission_id = ${transferId}`,
            sql`SELECT 1 FROM idempotency_keys WHERE operation_id = ${transferId}`
          ]).pipe(Effect.map((found) => found.map((rows) => rows.length)))
        // The superseded run: it dies, and nothing of its record is committed.
        const superseded = yield* Effect.exit(record("tr_fenced_superseded", "the-first"))
        assert.isTrue(Exit.hasDies(superseded))
        assert.deepStrictEqual(yield* rowsOf("tr_fenced_superseded"), [0, 0, 0, 0])
        // The run holding the claim: the row, its sender's event, its submission and its binding.
        yield* record("tr_fenced_current", "the-retry")
        assert.deepStrictEqual(yield* rowsOf("tr_fenced_current"), [1, 1, 1, 1])
      }))

    it.effect("a client-sealed create whose guardian answer was lost is answered, on retry, by that decision: paid once", () =>
      Effect.gen(function*() {
        // The crash at its exact line: the create had fixed its nonce and deadline
        // (sealed_attempts), asked the guardian, which reserved and signed, and died before
        // recording anything else. Its retry must reach the guardian as the same request, so
        // the guardian replays its decision; a new nonce made the guardian refuse a reused
        // transfer id, and the key then answered 409 for ever with nothing paid.
        const server = yield* TestServer
        const lena = yield* createAccount(server, "sealed.lena")
        const max = yield* createAccount(server, "sealed.max")
        const lenaKey = yield* registerKey(server.baseUrl, lena.api_key)
        const maxKey = yield* registerKey(server.baseUrl, max.api_key)
        const funded = yield* post(`${server.baseUrl}/v1/test/faucet`, lena.api_key, "fund-1", { amount: "10" })
        assert.strictEqual(funded.status, 200, funded.text)
        const prepared = Schema.decodeUnknownSync(Schema.Struct({
          transfer_id: Schema.String,
          binding_id: Schema.String,
          chain_id: Schema.Number,
          contract: Schema.String,
          recipient_address: Schema.String,
          sender_key: Schema.String,
          recipient_key: Schema.String,
          guardian_key: Schema.String,
          token: Schema.String
        }))((yield* post(`${server.baseUrl}/v1/transfers/prepare`, lena.api_key, "prepare-1", { to: "@sealed.max" })).json)
        const guardianKey = EncryptionKey.parsePublicKey(hexToBytes(prepared.guardian_key as Hex))
        assert.isTrue(guardianKey.ok)
        if (!guardianKey.ok) return
        const amount = 4_000_000n
        const boxes = Note.sealTransfer({
          context: { chainId: BigInt(prepared.chain_id), contract: prepared.contract as Hex, transferId: hexToBytes(prepared.binding_id as Hex) },
          note: { amount, memo: "" },
          opening: ElGamal.newOpening(amount),
          senderKey: lenaKey.publicKey,
          recipientKey: maxKey.publicKey,
          guardianKey: guardianKey.value
        })
        const body = {
          to: "@sealed.max",
          sealed: {
            transfer_id: prepared.transfer_id,
            token: prepared.token,
            guardian: bytesToHex(boxes.guardian),
            sender: bytesToHex(boxes.sender),
            recipient: bytesToHex(boxes.recipient)
          }
        }

        const store = Context.get(server.services, TransferStore)
        const attempt = yield* store.sealedAttempt(
          { transferId: prepared.transfer_id, senderAccountId: lena.account_id },
          store.nextNonce(lena.account_id, "test").pipe(
            Effect.map((nonce) => ({ nonce, deadlineSeconds: BigInt(Math.floor(Date.now() / 1000) + 600) }))
          )
        )
        const me = Schema.decodeUnknownSync(Schema.Struct({ public_key: Schema.String }))(
          (yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(lena.api_key) })).json
        )
        const guardian = Context.get(server.services, GuardianClient.GuardianClient)
        const lost = yield* guardian.authorize({
          transferId: prepared.binding_id,
          chainId: BigInt(prepared.chain_id),
          contract: prepared.contract,
          kind: "confidential",
          from: me.public_key,
          to: prepared.recipient_address,
          fromKey: prepared.sender_key,
          toKey: prepared.recipient_key,
          sealedDigest: Note.sealedDigest(boxes),
          nonce: attempt.nonce,
          deadline: attempt.deadlineSeconds,
          guardianNote: bytesToHex(boxes.guardian),
          apiKey: lena.key_id
        })
        assert.strictEqual(lost._tag, "Authorized")
        yield* insertDeadClaim(lena.account_id, "sealed-lost-1", "/v1/transfers", body, null)

        const retried = yield* post(`${server.baseUrl}/v1/transfers`, lena.api_key, "sealed-lost-1", body)
        assert.strictEqual(retried.status, 201, retried.text)
        const answered = Schema.decodeUnknownSync(TransferRecord)(retried.json)
        assert.strictEqual(answered.transfer_id, prepared.transfer_id)
        assert.strictEqual(answered.status, "confirmed")
        assert.lengthOf(yield* transfersOf(lena.account_id), 1)
        // Reserved once: the rest of the balance (6 of 10) can still move, and no more.
        const rest = yield* post(`${server.baseUrl}/v1/transfers`, lena.api_key, "rest-1", { to: "@sealed.max", amount: "6.000001" })
        assert.strictEqual(rest.status, 402, rest.text)
      }))

    it.effect("a client that goes away mid-request leaves one transfer, answered on retry", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const erin = yield* createAccount(server, "crash.erin")
        const frank = yield* createAccount(server, "crash.frank")
        yield* registerKey(server.baseUrl, erin.api_key)
        yield* registerKey(server.baseUrl, frank.api_key)
        yield* post(`${server.baseUrl}/v1/test/faucet`, erin.api_key, "fund-1", { amount: "20" })
        const body = JSON.stringify({ to: "@crash.frank", amount: "2" })
        // Dropped at several moments of the request; each key must end as exactly one transfer.
        const delays = [5, 40, 120, 400]
        for (const [i, delayMs] of delays.entries()) {
          yield* Effect.promise(async () => {
            const controller = new AbortController()
            const timer = setTimeout(() => controller.abort(), delayMs)
            await fetch(`${server.baseUrl}/v1/transfers`, {
              method: "POST",
              headers: { ...bearer(erin.api_key), "content-type": "application/json", "idempotency-key": `drop-${i}` },
              body,
              signal: controller.signal
            }).then((r) => r.text()).catch(() => "dropped")
            clearTimeout(timer)
          })
        }
        const ids = new Set<string>()
        for (const i of delays.keys()) {
          // The first request may still be running: retry while it is.
          let answer = yield* send(`${server.baseUrl}/v1/transfers`, {
            method: "POST",
            headers: { ...bearer(erin.api_key), "content-type": "application/json", "idempotency-key": `drop-${i}` },
            body
          })
          for (let tries = 0; answer.status === 409 && tries < 50; tries++) {
            yield* Effect.sleep("200 millis")
            answer = yield* send(`${server.baseUrl}/v1/transfers`, {
              method: "POST",
              headers: { ...bearer(erin.api_key), "content-type": "application/json", "idempotency-key": `drop-${i}` },
              body
            })
          }
          assert.strictEqual(answer.status, 201, answer.text)
          ids.add(Schema.decodeUnknownSync(TransferRecord)(answer.json).transfer_id)
        }
        assert.strictEqual(ids.size, delays.length)
        const rows = yield* transfersOf(erin.account_id)
        assert.sameMembers(rows.map((r) => r.transfer_id), [...ids])
      }))

    it.effect("a faucet grant cut off before or after it was mined is granted exactly once", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const sql = Context.get(server.services, SqlClient.SqlClient)
        const chain = Option.getOrThrow(Context.get(server.services, Settlement).chain("test"))
        const gina = yield* createAccount(server, "crash.gina")
        const me = yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(gina.api_key) })
        const wallet = (me.json as { public_key: `0x${string}` }).public_key
        const shields = Effect.promise(() =>
          chain.client.getLogs({
            address: chain.contracts.confidentialUsdg,
            event: getAbiItem({ abi: ConfidentialTokenArtifact.abi, name: "Shielded" }),
            args: { to: wallet },
            fromBlock: 0n
          })
        )
        // Mined, then the process died before writing the hash or answering.
        const first = yield* post(`${server.baseUrl}/v1/test/faucet`, gina.api_key, "grant-1", { amount: "7" })
        assert.strictEqual(first.status, 200, first.text)
        const firstHash = (first.json as { tx_hash: string }).tx_hash
        yield* sql`UPDATE faucet_grants SET tx_hash = NULL WHERE account_id = ${gina.account_id}`
        yield* crashClaims(gina.account_id)
        const again = yield* post(`${server.baseUrl}/v1/test/faucet`, gina.api_key, "grant-1", { amount: "7" })
        assert.strictEqual(again.status, 200, again.text)
        assert.strictEqual((again.json as { tx_hash: string }).tx_hash, firstHash)
        assert.lengthOf(yield* shields, 1)

        // Recorded, then the process died before sending: the retry grants, once.
        yield* sql`
          INSERT INTO faucet_grants (grant_id, account_id, wallet_address, amount, from_block, created_at)
          VALUES ('grant_01JZZZZZZZZZZZZZZZZZZZZZZZ', ${gina.account_id}, ${wallet}, '5000000',
                  ${(yield* Effect.promise(() => chain.client.getBlockNumber({ cacheTime: 0 }))).toString()}, now())`
        yield* insertDeadClaim(gina.account_id, "grant-2", "/v1/test/faucet", { amount: "5" }, {
          kind: "faucet_grant",
          id: "grant_01JZZZZZZZZZZZZZZZZZZZZZZZ"
        })
        const resumed = yield* post(`${server.baseUrl}/v1/test/faucet`, gina.api_key, "grant-2", { amount: "5" })
        assert.strictEqual(resumed.status, 200, resumed.text)
        assert.strictEqual((resumed.json as { amount: string }).amount, "5")
        const again2 = yield* post(`${server.baseUrl}/v1/test/faucet`, gina.api_key, "grant-2", { amount: "5" })
        assert.strictEqual((again2.json as { tx_hash: string }).tx_hash, (resumed.json as { tx_hash: string }).tx_hash)
        assert.lengthOf(yield* shields, 2)
      }))

    it.effect("the api tier's attacker, with the database and every api-tier secret, cannot test a guessed amount", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const sql = Context.get(server.services, SqlClient.SqlClient)
        const pepper = Redacted.value(Context.get(server.services, Secrets).apiKeyPepper)
        const hank = yield* createAccount(server, "guess.hank")
        const ivy = yield* createAccount(server, "guess.ivy")
        yield* registerKey(server.baseUrl, hank.api_key)
        yield* registerKey(server.baseUrl, ivy.api_key)
        yield* post(`${server.baseUrl}/v1/test/faucet`, hank.api_key, "fund-1", { amount: "100" })
        const secretAmount = "73.25"
        const paid = yield* post(`${server.baseUrl}/v1/transfers`, hank.api_key, "3f1c9a52-7b7e-4d0e-9a51-0c6f2d1e8b44", {
          to: "@guess.ivy",
          amount: secretAmount
        })
        assert.strictEqual(paid.status, 201, paid.text)
        const rows = yield* sql<{ request_hash: Uint8Array }>`
          SELECT request_hash FROM idempotency_keys WHERE account_id = ${hank.account_id}`
        const stored = rows.map((r) => Buffer.from(r.request_hash).toString("hex"))
        // Every way the api tier could recompute a fingerprint from what it holds: the pepper,
        // and every idempotency key it could know (none is stored in clear; it tries the ones
        // it might guess, and the digest it does store).
        const storedDigests = yield* sql<{ key_digest: Uint8Array }>`
          SELECT key_digest FROM idempotency_keys WHERE account_id = ${hank.account_id}`
        const hmacKeys: Array<Uint8Array | string> = [pepper, ...storedDigests.map((r) => new Uint8Array(r.key_digest)), "", "fund-1"]
        let tried = 0
        for (let cents = 7000; cents <= 7500; cents++) {
          const guess = (cents / 100).toString()
          const body = JSON.stringify({ to: "@guess.ivy", amount: guess })
          for (const key of hmacKeys) {
            for (const prefix of ["pps/idempotency/v1\nPOST\n/v1/transfers\n", "pps/idempotency/v2\nPOST\n/v1/transfers\n"]) {
              tried++
              const candidate = createHmac("sha256", key).update(prefix).update(body).digest("hex")
              assert.notInclude(stored, candidate, `the guess ${guess} is confirmed by the idempotency store`)
            }
          }
        }
        assert.isAbove(tried, 1000)
        // The right key does confirm it: so the test above would fail if the key were stored.
        const withKey = createHmac("sha256", "3f1c9a52-7b7e-4d0e-9a51-0c6f2d1e8b44")
          .update("pps/idempotency/v2\nPOST\n/v1/transfers\n").update(JSON.stringify({ to: "@guess.ivy", amount: secretAmount }))
          .digest("hex")
        assert.include(stored, withKey)
      }))
  })
})
