/**
 * Two invariants of the transfer path, over a real socket on embedded anvil:
 *
 * - Canary: transfers with distinctive amounts and memos leave no trace of them
 *   in the database dump, the logs, the event payloads or the chain calldata — in
 *   decimal, base units or hex.
 * - Conservation: 32 concurrent clients shuffling funds among 8 accounts; then
 *   the sum of the balances each account proves equals the sum of the faucet
 *   grants, and none is negative.
 *
 * The server seals on a thread of its own (`SEALING_THREAD=own`), so that the canary covers
 * the amount's way to that thread and back; the event loop's sealing (the default) is what
 * every other in-process suite runs, the agents' canary among them.
 */
import { createHash } from "node:crypto"
import { assert, describe, layer } from "@effect/vitest"
import { SqlClient } from "effect/sql"
import { Context, Effect, Fiber, Option, Schema } from "effect"
import { ConfidentialTokenArtifact, TestUsdgArtifact } from "@pps/contracts"
import { Settlement } from "../src/settlement/Settlement.ts"
import { TransferRecord } from "@pps/api/Transfers"
import { balanceProof, fundedPair, registerKey } from "./support/confidentialClient.ts"
import { dumpDatabase } from "./support/dumpDatabase.ts"
import { bearer, createAccount, postJson, send } from "./support/http.ts"
import { parseExposition, sampleOf } from "./support/metrics.ts"
import { makeTestServer, TestServer } from "./support/TestServer.ts"

/** The guardian calls of the senders' turns so far (the admin listener's `/metrics`). */
const authorizeManyCalls = (server: TestServer["Service"]) =>
  send(`${server.adminUrl}/metrics`, { headers: bearer(server.adminToken) }).pipe(
    Effect.map((scrape) =>
      sampleOf(parseExposition(scrape.text), "pps_guardian_call_duration_seconds_count", { operation: "authorizeMany" })
        .reduce((sum, sample) => sum + sample.value, 0)
    )
  )


describe("transfer invariants", () => {
  layer(makeTestServer({ config: { sealingThread: "own" } }), { timeout: "180 seconds", excludeTestServices: true })("embedded", (it) => {
    it.effect("canary: no amount or memo in the database, the logs, the events or the calldata", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const sender = yield* createAccount(server, "canary.sender")
        const recipient = yield* createAccount(server, "canary.recipient")
        yield* registerKey(server.baseUrl, sender.api_key)
        yield* registerKey(server.baseUrl, recipient.api_key)
        yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(sender.api_key), { amount: "90000" }))
        const canaries = [
          { amount: "7351.438291", units: 7_351_438_291n, memo: "canary-memo-ZQX7-alpha" },
          { amount: "61.000737", units: 61_000_737n, memo: "canary memo ünïcode 🐦 beta" }
        ]
        const hashes: Array<string> = []
        // With an Idempotency-Key, so the idempotency store is in the dump too: a plain hash of the
        // body stored there could be inverted by trying amounts.
        const unkeyedHashes: Array<string> = []
        for (const [i, canary] of canaries.entries()) {
          const body = JSON.stringify({ to: "@canary.recipient", amount: canary.amount, memo: canary.memo })
          unkeyedHashes.push(createHash("sha256").update(body).digest("hex"))
          unkeyedHashes.push(createHash("sha256").update(`POST\n/v1/transfers\n${body}`).digest("hex"))
          const response = yield* send(`${server.baseUrl}/v1/transfers`, {
            method: "POST",
            headers: { ...bearer(sender.api_key), "content-type": "application/json", "idempotency-key": `canary-${i}` },
            body
          })
          assert.strictEqual(response.status, 201, response.text)
          hashes.push(Schema.decodeUnknownSync(TransferRecord)(response.json).tx_hash ?? "")
        }
        // A refused one too: error paths must not echo the amount either.
        const refused = yield* send(
          `${server.baseUrl}/v1/transfers`,
          postJson(bearer(sender.api_key), { to: "@canary.recipient", amount: "88888.123457", memo: "canary-refused-memo" })
        )
        assert.strictEqual(refused.status, 402)

        const dump = yield* dumpDatabase.pipe(Effect.provide(server.services))
        const logs = server.logs.join("\n")
        const chain = Option.getOrThrow(Context.get(server.services, Settlement).chain("test"))
        const calldata = yield* Effect.forEach(hashes, (hash) =>
          Effect.promise(() => chain.client.getTransaction({ hash: hash as `0x${string}` })).pipe(Effect.map((tx) => tx.input)))
        const haystacks = { database: dump.toLowerCase(), logs: logs.toLowerCase(), calldata: calldata.join("\n").toLowerCase(), refusal: refused.text }
        assert.isAbove(dump.length, 1000)
        const sql = Context.get(server.services, SqlClient.SqlClient)
        const claims = yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM idempotency_keys WHERE response_status = 201`
        assert.isAtLeast(Number(claims[0]!.n), 2, "the idempotency store is in the dump")
        assert.notInclude(dump, "canary-0", "an idempotency key is stored only as a keyed digest")
        for (const hash of unkeyedHashes) assert.notInclude(dump, hash, "an unkeyed hash of a transfer body is stored")
        assert.include(dump, "transfer.confirmed", "the events are in the dump")
        for (const canary of [...canaries, { amount: "88888.123457", units: 88_888_123_457n, memo: "canary-refused-memo" }]) {
          const needles = [canary.amount, canary.units.toString(), canary.units.toString(16), canary.memo.toLowerCase()]
          for (const [where, haystack] of Object.entries(haystacks)) {
            for (const needle of needles) assert.notInclude(haystack, needle, `${needle} found in the ${where}`)
          }
        }
      }))

    it.effect("conservation: 32 concurrent clients among 8 accounts; balances sum to the grants, none negative", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const accounts = yield* Effect.forEach(Array.from({ length: 8 }, (_, i) => i), (i) =>
          Effect.gen(function*() {
            const account = yield* createAccount(server, `pool-${i}`)
            const keyPair = yield* registerKey(server.baseUrl, account.api_key)
            const grant = yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(account.api_key), { amount: "100" }))
            assert.strictEqual(grant.status, 200, grant.text)
            return { ...account, keyPair, index: i }
          }), { concurrency: 4 })
        const grantsUnits = 8n * 100_000_000n
        // A fixed pseudo-random schedule (no Math.random): client c sends from account c % 8.
        const statuses = yield* Effect.forEach(Array.from({ length: 32 }, (_, c) => c), (client) =>
          Effect.forEach(Array.from({ length: 4 }, (_, k) => k), (k) => {
            const from = accounts[client % 8]!
            const to = accounts[(client * 3 + k * 5 + 1) % 8 === client % 8 ? (client + 1) % 8 : (client * 3 + k * 5 + 1) % 8]!
            const amount = `${(client * 7 + k * 13) % 60 + 1}.${String((client * 31 + k) % 1000).padStart(3, "0")}`
            return send(`${server.baseUrl}/v1/transfers`, postJson(bearer(from.api_key), { to: `@${to.handle.slice(1)}`, amount })).pipe(
              Effect.map((response) => response.status)
            )
          }), { concurrency: 32 }).pipe(Effect.map((all) => all.flat()))
        const counts = new Map<number, number>()
        for (const status of statuses) counts.set(status, (counts.get(status) ?? 0) + 1)
        for (const status of counts.keys()) assert.include([201, 402], status, `unexpected status ${status}`)
        assert.isAbove(counts.get(201) ?? 0, 64, "most transfers go through")

        // Wait until nothing is pending, then every account proves its balance.
        yield* Effect.gen(function*() {
          for (let attempt = 0; attempt < 100; attempt++) {
            const pending = yield* Effect.forEach(accounts, (a) =>
              send(`${server.baseUrl}/v1/transfers?status=pending`, { headers: bearer(a.api_key) }))
            if (pending.every((p) => (p.json as { data: ReadonlyArray<unknown> }).data.length === 0)) return
            yield* Effect.sleep("200 millis")
          }
          assert.fail("transfers still pending")
        })
        let total = 0n
        for (const account of accounts) {
          const proof = yield* balanceProof(server.baseUrl, account.api_key, account.keyPair)
          const response = yield* send(`${server.baseUrl}/v1/accounts/me/balances`, {
            headers: { ...bearer(account.api_key), "x-decryption-proof": proof }
          })
          assert.strictEqual(response.status, 200, response.text)
          const usdg = (response.json as { balances: ReadonlyArray<{ asset: string; amount: string }> }).balances.find((b) => b.asset === "USDG")!
          assert.notInclude(usdg.amount, "-")
          const [whole, fraction = ""] = usdg.amount.split(".")
          total += BigInt(whole!) * 1_000_000n + BigInt(fraction.padEnd(6, "0"))
        }
        assert.strictEqual(total, grantsUnits)
      }))

    it.effect("the sender's actor (D73): 40 transfers of one sender at once, funds for 25: exactly 25 paid, in fewer guardian calls than transfers", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const { recipientHandle, sender, senderKey: keyPair } = yield* fundedPair(server, "25")
        const callsBefore = yield* authorizeManyCalls(server)
        const statuses = yield* Effect.forEach(Array.from({ length: 40 }), () =>
          send(`${server.baseUrl}/v1/transfers`, postJson(bearer(sender.api_key), { to: `@${recipientHandle}`, amount: "1" })).pipe(
            Effect.map((response) => response.status)
          ), { concurrency: 40 })
        assert.deepStrictEqual([statuses.filter((s) => s === 201).length, statuses.filter((s) => s === 402).length], [25, 15])
        // Turns took the transfers that waited together: one guardian call for several of them.
        const calls = (yield* authorizeManyCalls(server)) - callsBefore
        assert.isAtLeast(calls, 1)
        assert.isBelow(calls, 40, `${calls} AuthorizeMany calls for 40 transfers`)
        const proof = yield* balanceProof(server.baseUrl, sender.api_key, keyPair)
        const balances = yield* send(`${server.baseUrl}/v1/accounts/me/balances`, { headers: { ...bearer(sender.api_key), "x-decryption-proof": proof } })
        const usdg = (balances.json as { balances: ReadonlyArray<{ asset: string; amount: string }> }).balances.find((b) => b.asset === "USDG")!
        assert.strictEqual(Number(usdg.amount), 0)
      }))

    it.effect("the sender's actor (D73): keyed and unkeyed creates in one turn each bind only their own Idempotency-Key", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const { recipientHandle, sender } = yield* fundedPair(server, "20")
        const body = JSON.stringify({ to: `@${recipientHandle}`, amount: "1" })
        const create = (key: string | undefined) =>
          send(`${server.baseUrl}/v1/transfers`, {
            method: "POST",
            headers: { ...bearer(sender.api_key), "content-type": "application/json", ...(key === undefined ? {} : { "idempotency-key": key }) },
            body
          })
        const keys = Array.from({ length: 12 }, (_, i) => i % 2 === 0 ? `mixed-${i}` : undefined)
        // A keyed create starts the sender's actor; the others arrive while it works, so its later
        // turns take unkeyed creates too.
        const starter = yield* Effect.forkChild(create(keys[0]))
        yield* Effect.sleep("5 millis")
        const rest = yield* Effect.forEach(keys.slice(1), create, { concurrency: "unbounded" })
        const first = [yield* Fiber.join(starter), ...rest]
        for (const response of first) assert.strictEqual(response.status, 201, response.text)
        const idOf = (response: { readonly json: unknown }) => (response.json as { transfer_id: string }).transfer_id
        assert.strictEqual(new Set(first.map(idOf)).size, 12)
        // Each key is bound to its own transfer, and to no other (an unkeyed create in the same
        // actor once bound the key of the create that started the actor to itself).
        const sql = Context.get(server.services, SqlClient.SqlClient)
        const bound = yield* sql<{ readonly operation_id: string }>`
          SELECT operation_id FROM idempotency_keys WHERE account_id = ${sender.account_id} ORDER BY operation_id`
        const keyedIds = keys.flatMap((key, i) => key === undefined ? [] : [idOf(first[i]!)]).sort()
        assert.deepStrictEqual(bound.map((row) => row.operation_id), keyedIds)
      }))

    it.effect("the sender's actor (D73): a client that hangs up during its turn leaves its transfer recorded under its key", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const { recipientHandle, sender } = yield* fundedPair(server, "24")
        const create = (key: string, signal?: AbortSignal) =>
          Effect.promise(() =>
            fetch(`${server.baseUrl}/v1/transfers`, {
              method: "POST",
              headers: { ...bearer(sender.api_key), "content-type": "application/json", "idempotency-key": key },
              body: JSON.stringify({ to: `@${recipientHandle}`, amount: "1" }),
              ...(signal === undefined ? {} : { signal })
            }).then((response) => response.status, () => 0)
          )
        // 24 creates for exactly the funds, each cut off by its client at a different moment of its
        // way (some before their turn, some in it, some after).
        yield* Effect.forEach(Array.from({ length: 24 }, (_, i) => i), (i) => create(`hangup-${i}`, AbortSignal.timeout(2 + 8 * i)), {
          concurrency: "unbounded"
        })
        yield* Effect.sleep("500 millis")
        // Retried under the same keys: each is answered (replayed or created now), and all 24 fit
        // the funds: no decision was left reserving funds without its transfer.
        const statuses = yield* Effect.forEach(Array.from({ length: 24 }, (_, i) => i), (i) =>
          Effect.gen(function*() {
            for (let attempt = 0; attempt < 40; attempt++) {
              const status = yield* create(`hangup-${i}`)
              if (status !== 409) return status
              yield* Effect.sleep("100 millis")
            }
            return 409
          }))
        assert.deepStrictEqual(statuses, Array.from({ length: 24 }, () => 201))
      }))

    it.effect("no key the api tier holds owns the contracts: the embedded owner key is never stored", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const sql = Context.get(server.services, SqlClient.SqlClient)
        const chain = Option.getOrThrow(Context.get(server.services, Settlement).chain("test"))
        const held = yield* sql<{ role: string; address: string }>`SELECT role, address FROM chain_keys`
        assert.notInclude(held.map((k) => k.role), "operator")
        const wallets = yield* sql<{ wallet_address: string }>`SELECT wallet_address FROM accounts`
        const ours = new Set([...held.map((k) => k.address), ...wallets.map((w) => w.wallet_address)].map((a) => a.toLowerCase()))
        for (const token of [chain.contracts.confidentialUsdg, chain.contracts.confidentialEth]) {
          const owner = yield* Effect.promise(() =>
            chain.client.readContract({ address: token, abi: ConfidentialTokenArtifact.abi, functionName: "owner" }))
          assert.isFalse(ours.has(owner.toLowerCase()), `the owner of ${token} is a key the api tier holds`)
        }
        // The faucet key is only a test USDG minter.
        const faucet = Option.getOrThrow(chain.faucet).address
        assert.isTrue(yield* Effect.promise(() =>
          chain.client.readContract({ address: chain.contracts.usdg, abi: TestUsdgArtifact.abi, functionName: "isMinter", args: [faucet] })))
      }))
  })
})
