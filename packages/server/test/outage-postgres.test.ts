/**
 * Failure modes (docs/operations.md), "PostgreSQL is down": a server node whose database link
 * goes through a loopback proxy the test cuts while transfers are in flight, then
 * resumes. While cut, `/readyz` answers 503 and every request that needs the database
 * answers 503 with Retry-After in D1's envelope (no internals); no transfer is answered as created that
 * was not committed. Once resumed, `/readyz` is 200 again, transfers go through, and
 * every request cut off is retried with its own Idempotency-Key: one transfer per key,
 * and the balances, decrypted client-side against the chain, are exact.
 */
import { assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { TransferRecord } from "@pps/api/Transfers"
import { Context, Effect, Fiber, Layer, Option, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { ulid } from "../src/platform/Ids.ts"
import { balanceProof, fundedPair } from "./support/confidentialClient.ts"
import { cuttableProxy, throughProxy } from "./support/cuttableProxy.ts"
import { bearer, expectEnvelope, postJson, send, type TestResponse } from "./support/http.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { freshPostgresDatabase, makeTestServer, postgres, TestServer } from "./support/TestServer.ts"
import { eventually } from "./support/webhooks-receiver.ts"

/** Transfers sent at once around the cut; amounts differ, so a double payment shows in the balances. */
const amountsAroundCut = ["1.1", "1.2", "1.3", "1.4"] as const
/** How long a retried key keeps being sent after the resume before the test gives up. */
const retryWindowMs = 60_000

/** Words that would mean a database fault leaked into an answer. */
const internals = /postgres|sql|econn|connection|terminated|stack|at \w+ \(|pg_|select |insert |update /i

/**
 * 503 `service_unavailable` with Retry-After in D1's envelope that names no internals: what a
 * database outage gives a client (an outage is not a fault: never 500).
 */
const expectOpaqueServerError = (response: TestResponse, what: string) => {
  assert.strictEqual(response.status, 503, `${what}: ${response.status} ${response.text}`)
  expectEnvelope(response, 503, "service_unavailable")
  assert.match(response.headers.get("retry-after") ?? "", /^[1-9][0-9]*$/, `${what}: Retry-After`)
  assert.notMatch(response.text, internals, `${what} leaks internals`)
}

const isRetryable = (response: TestResponse) =>
  response.status >= 500 || (response.status === 409 && JSON.stringify(response.json).includes("idempotency_key_in_progress"))

describe.skipIf(!postgresAvailable)("PostgreSQL down under a server node", () => {
  it.live("cut mid-transfer: 503 readiness, opaque 5xx, nothing answered that was not committed; resumed: one transfer per key, balances exact", () =>
    Effect.scoped(Effect.gen(function*() {
      const databaseUrl = yield* freshPostgresDatabase
      const proxy = yield* cuttableProxy(databaseUrl, 5432)
      const server = yield* Layer.build(makeTestServer({
        database: postgres,
        config: { databaseUrl: Option.some(Redacted.make(throughProxy(databaseUrl, proxy))) }
      })).pipe(Effect.map((context) => Context.get(context, TestServer)))
      // The test's own link to the database, around the proxy: it watches for a transfer in flight.
      const direct = Context.get(yield* Layer.build(PgClient.layer({ url: Redacted.make(databaseUrl) })), SqlClient.SqlClient)
      const readiness = send(`${server.baseUrl}/readyz`).pipe(Effect.map((response) => response.status))

      const { recipient: bob, recipientHandle: bobHandle, recipientKey: bobKey, sender: alice, senderKey: aliceKey } = yield* fundedPair(server, "100")

      const transfer = (key: string, amount: string) =>
        send(`${server.baseUrl}/v1/transfers`, postJson({ ...bearer(alice.api_key), "idempotency-key": key }, { to: `@${bobHandle}`, amount }))
      const before = yield* transfer(`before-${ulid()}`, "1")
      assert.strictEqual(before.status, 201, before.text)
      assert.strictEqual(yield* readiness, 200)

      // Transfers at once; the link is cut as soon as one of them is recorded and not yet
      // settled (its chain submission in flight), so the cut lands mid-transfer.
      const keys = amountsAroundCut.map((amount) => ({ key: `around-${ulid()}`, amount }))
      const fibers = yield* Effect.forEach(keys, ({ amount, key }) => Effect.forkChild(transfer(key, amount)))
      yield* eventually(
        direct<{ n: string }>`SELECT count(*)::text AS n FROM transfers WHERE status = 'pending'`.pipe(
          Effect.map(([row]) => (Number(row?.n ?? "0") > 0 ? true : undefined))
        ),
        "a transfer recorded and not yet settled",
        { timeoutMs: 30_000 }
      )
      proxy.cut()
      const unansweredAtCut = (yield* Effect.forEach(fibers, (fiber) => Effect.sync(() => fiber.pollUnsafe()))).filter(
        (exit) => exit === undefined
      ).length
      assert.isAbove(unansweredAtCut, 0, "the cut lands while a transfer is in flight")

      // Cut: not ready, and what needs the database fails opaquely.
      yield* eventually(readiness.pipe(Effect.map((status) => (status === 503 ? true : undefined))), "readyz 503", { timeoutMs: 10_000 })
      const notReady = yield* send(`${server.baseUrl}/readyz`)
      assert.strictEqual(notReady.status, 503)
      expectOpaqueServerError(yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(alice.api_key) }), "a read while cut")
      const duringKey = `during-${ulid()}`
      expectOpaqueServerError(yield* transfer(duringKey, "1.5"), "a transfer while cut")
      const aroundAnswers = yield* Effect.forEach(fibers, Fiber.join)
      const answeredCreated = new Map<string, string>()
      for (const [index, answer] of aroundAnswers.entries()) {
        if (answer.status === 201) answeredCreated.set(keys[index]!.key, Schema.decodeUnknownSync(TransferRecord)(answer.json).transfer_id)
        else expectOpaqueServerError(answer, `transfer ${keys[index]!.key} cut off`)
      }

      // Resumed: ready again, and the same keys sent again until each is answered for good.
      proxy.resume()
      yield* eventually(readiness.pipe(Effect.map((status) => (status === 200 ? true : undefined))), "readyz 200", { timeoutMs: 30_000 })
      const retried = [...keys, { key: duringKey, amount: "1.5" }]
      const finalIds = new Map<string, string>()
      for (const { amount, key } of retried) {
        const answer = yield* eventually(
          transfer(key, amount).pipe(Effect.map((response) => (isRetryable(response) ? undefined : response))),
          `key ${key} answered after the resume`,
          { timeoutMs: retryWindowMs }
        )
        assert.strictEqual(answer.status, 201, answer.text)
        const transferId = Schema.decodeUnknownSync(TransferRecord)(answer.json).transfer_id
        finalIds.set(key, transferId)
        // What was answered as created before the cut is the very transfer the retry names.
        const first = answeredCreated.get(key)
        if (first !== undefined) assert.strictEqual(transferId, first, `key ${key} names one transfer`)
      }
      const after = yield* transfer(`after-${ulid()}`, "2")
      assert.strictEqual(after.status, 201, after.text)

      // Every transfer settles; the only ones are those the keys name (one each).
      const expectedIds = new Set([
        Schema.decodeUnknownSync(TransferRecord)(before.json).transfer_id,
        ...finalIds.values(),
        Schema.decodeUnknownSync(TransferRecord)(after.json).transfer_id
      ])
      assert.strictEqual(expectedIds.size, retried.length + 2, "one transfer per key")
      const listing = yield* eventually(
        send(`${server.baseUrl}/v1/transfers?limit=100`, { headers: bearer(alice.api_key) }).pipe(Effect.map((response) => {
          const page = Schema.decodeUnknownSync(Schema.Struct({ data: Schema.Array(TransferRecord) }))(response.json)
          return page.data.some((record) => record.status === "pending") ? undefined : page.data
        })),
        "every transfer settled",
        { timeoutMs: 60_000 }
      )
      assert.sameMembers(listing.map((record) => record.transfer_id), [...expectedIds])
      const amountOf = new Map<string, number>([
        [Schema.decodeUnknownSync(TransferRecord)(before.json).transfer_id, 1],
        ...retried.map(({ amount, key }): [string, number] => [finalIds.get(key)!, Number(amount)]),
        [Schema.decodeUnknownSync(TransferRecord)(after.json).transfer_id, 2]
      ])
      const sentCents = listing.filter((record) => record.status === "confirmed")
        .reduce((sum, record) => sum + Math.round(amountOf.get(record.transfer_id)! * 100), 0)

      // Balances from the chain, decrypted by each party: funding minus exactly what was sent.
      const balanceOf = (apiKey: string, keyPair: Parameters<typeof balanceProof>[2]) =>
        Effect.gen(function*() {
          const proof = yield* balanceProof(server.baseUrl, apiKey, keyPair)
          const answer = yield* send(`${server.baseUrl}/v1/accounts/me/balances`, {
            headers: { ...bearer(apiKey), "x-decryption-proof": proof }
          })
          const balances = Schema.decodeUnknownSync(Schema.Struct({
            balances: Schema.Array(Schema.Struct({ asset: Schema.String, amount: Schema.String }))
          }))(answer.json)
          return Math.round(Number(balances.balances.find((balance) => balance.asset === "USDG")?.amount) * 100)
        })
      yield* eventually(
        Effect.gen(function*() {
          const [aliceCents, bobCents] = [yield* balanceOf(alice.api_key, aliceKey), yield* balanceOf(bob.api_key, bobKey)]
          return aliceCents === 10_000 - sentCents && bobCents === sentCents ? true : undefined
        }),
        `balances 100 - ${sentCents / 100} and ${sentCents / 100}`,
        { timeoutMs: 30_000 }
      )
    })), { timeout: 240_000 })
})
