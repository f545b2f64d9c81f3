/**
 * The API-key cache in the distributed mode. Two server instances on one
 * PostgreSQL database and the real NATS (127.0.0.1:4222), cache on. Node B reaches NATS
 * through a loopback proxy the test can cut, so "B missed the revocation message" is
 * real, not simulated.
 *
 * A revocation answers once every other live node that hears revocations has answered that it
 * evicted the key, so "refused at once by the other node" is a guarantee, not a race the
 * message usually wins; a node that caches nothing (cut from NATS) is not waited for.
 *
 * Whether a key is served from a node's cache is observed by revoking it behind the
 * servers' back (an UPDATE on the row, which publishes nothing): a node that still
 * accepts it answered from its cache; one that refuses it asked the database.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { dropDatabases, ensureDatabases } from "../scripts/cluster/cluster.ts"
import { ulid } from "../src/platform/Ids.ts"
import { cuttableProxy, throughProxy } from "./support/cuttableProxy.ts"
import { bearer, createAccount, postJson, send } from "./support/http.ts"
import { deleteStream, natsAvailable, natsUrl } from "./support/requireNats.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { makeTestServer, postgres, postgresAdminUrl, TestServer } from "./support/TestServer.ts"
import { eventually } from "./support/webhooks-receiver.ts"

const serverUrl = postgresAdminUrl.replace(/\/[^/]*$/, "")
const database = `pps_test_revocation_${ulid().toLowerCase()}`
const databaseUrl = `${serverUrl}/${database}`
const stream = `PPS_TEST_${ulid()}`
const subjectPrefix = `test.${stream.toLowerCase()}`

const onTheDatabase = <A>(run: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.gen(function*() {
    return yield* run(yield* SqlClient.SqlClient)
  }).pipe(
    Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl) })),
    Effect.orDie
  )

const revokeBehindTheServersBack = (keyId: string) =>
  onTheDatabase((sql) => sql`UPDATE api_keys SET revoked_at = now() WHERE key_id = ${keyId}`)

/** How many nodes' heartbeat rows say they hear revocations. */
const nodesHearing = onTheDatabase((sql) =>
  sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM node_heartbeats WHERE hears_control`.pipe(Effect.map((rows) => rows[0]!.n))
)

const CreatedKey = Schema.Struct({ key_id: Schema.String, api_key: Schema.String })

const node = (nats: string) =>
  Layer.build(makeTestServer({
    database: postgres,
    config: {
      databaseUrl: Option.some(Redacted.make(databaseUrl)),
      natsUrl: Option.some(nats),
      natsStream: stream,
      natsSubjectPrefix: subjectPrefix,
      // Long enough that only an eviction (or the channel's loss) can explain a refusal.
      apiKeyCacheTtlMs: 10 * 60_000
    }
  })).pipe(Effect.map((context) => Context.get(context, TestServer)))

const cacheOnLines = (server: { readonly logs: ReadonlyArray<string> }) =>
  server.logs.filter((line) => line.includes("api key cache on")).length

describe.skipIf(!natsAvailable || !postgresAvailable)("API-key revocation pushed over NATS (two nodes, cache on)", () => {
  beforeAll(() => ensureDatabases(serverUrl, [database]), 60_000)
  afterAll(async () => {
    await dropDatabases(serverUrl, [database])
    await deleteStream(stream)
  }, 60_000)

  it.live("revoked on one node, refused at once by the other; a node cut from NATS stops caching until it is back", () =>
    Effect.scoped(Effect.gen(function*() {
      const proxy = yield* cuttableProxy(natsUrl, 4222)
      const a = yield* node(natsUrl)
      const b = yield* node(throughProxy(natsUrl, proxy))
      yield* eventually(Effect.sync(() => cacheOnLines(a) > 0 && cacheOnLines(b) > 0 ? true : undefined), "both caches on")

      const admin = bearer(a.adminToken)
      const account = yield* createAccount(a, `revoke-${ulid().toLowerCase().slice(-8)}`)
      const newKey = Effect.gen(function*() {
        const created = yield* send(`${a.adminUrl}/admin/keys`, postJson(admin, { account_id: account.account_id, name: "k" }))
        assert.strictEqual(created.status, 200, created.text)
        return Schema.decodeUnknownSync(CreatedKey)(created.json)
      })
      const statusOn = (server: { readonly baseUrl: string }, key: string) =>
        send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(key) }).pipe(Effect.map((response) => response.status))

      // The cache is on in this mode: a key revoked behind both nodes' backs is still
      // served by each from its cache.
      const proof = yield* newKey
      assert.strictEqual(yield* statusOn(a, proof.api_key), 200)
      assert.strictEqual(yield* statusOn(b, proof.api_key), 200)
      yield* revokeBehindTheServersBack(proof.key_id)
      assert.strictEqual(yield* statusOn(a, proof.api_key), 200, "node A serves the key from its cache")
      assert.strictEqual(yield* statusOn(b, proof.api_key), 200, "node B serves the key from its cache")

      // Verified (cached) on both, revoked through A: B refuses it on the very next request.
      const revoked = yield* newKey
      assert.strictEqual(yield* statusOn(a, revoked.api_key), 200)
      assert.strictEqual(yield* statusOn(b, revoked.api_key), 200)
      const answer = yield* send(`${a.adminUrl}/admin/keys/${revoked.key_id}/revoke`, postJson(admin, {}))
      assert.strictEqual(answer.status, 200, answer.text)
      assert.strictEqual(yield* statusOn(b, revoked.api_key), 401, "node B refuses at once")
      assert.strictEqual(yield* statusOn(a, revoked.api_key), 401)
      // And the other way round, through B.
      const other = yield* newKey
      assert.strictEqual(yield* statusOn(a, other.api_key), 200)
      assert.strictEqual(yield* statusOn(b, other.api_key), 200)
      assert.strictEqual((yield* send(`${b.adminUrl}/admin/keys/${other.key_id}/revoke`, postJson(admin, {}))).status, 200)
      assert.strictEqual(yield* statusOn(a, other.api_key), 401, "node A refuses at once")

      // A live node whose row says it hears revocations but which does not answer (its loss of
      // NATS not noticed yet): A waits for it, names it when no answer comes, and answers
      // anyway: the revocation is committed.
      const unacknowledged = (server: { readonly logs: ReadonlyArray<string> }) =>
        server.logs.filter((line) => line.includes("api key revocation not acknowledged")).length
      assert.strictEqual(unacknowledged(a), 0, "every earlier revocation was acknowledged by B")
      assert.strictEqual(yield* nodesHearing, 2, "both nodes' rows say they hear revocations")
      const silentNode = `node_silent_${ulid()}`
      yield* onTheDatabase((sql) =>
        sql`INSERT INTO node_heartbeats (node_id, started_at, beat_at, hears_control) VALUES (${silentNode}, now(), now(), true)`
      )
      const toSilent = yield* newKey
      const silentStartedMs = Date.now()
      assert.strictEqual((yield* send(`${a.adminUrl}/admin/keys/${toSilent.key_id}/revoke`, postJson(admin, {}))).status, 200)
      assert.isAtLeast(Date.now() - silentStartedMs, 1_900, "A waited for the silent node's answer before answering")
      assert.strictEqual(unacknowledged(a), 1, "A names the node that did not answer")
      assert.isTrue(a.logs.some((line) => line.includes("api key revocation not acknowledged") && line.includes(silentNode)))
      yield* onTheDatabase((sql) => sql`DELETE FROM node_heartbeats WHERE node_id = ${silentNode}`)

      // B loses NATS: it drops its cache at once and stops caching, so a revocation whose
      // message it cannot receive is still refused; then its row says it no longer hears
      // revocations, and A no longer waits for it.
      const missed = yield* newKey
      assert.strictEqual(yield* statusOn(b, missed.api_key), 200)
      proxy.cut()
      yield* eventually(Effect.sync(() => b.logs.some((line) => line.includes("api key cache off")) ? true : undefined), "B's cache off")
      yield* eventually(nodesHearing.pipe(Effect.map((n) => n === 1 ? true : undefined)), "B's row says it no longer hears revocations")
      const startedMs = Date.now()
      assert.strictEqual((yield* send(`${a.adminUrl}/admin/keys/${missed.key_id}/revoke`, postJson(admin, {}))).status, 200)
      assert.isBelow(Date.now() - startedMs, 1_900, "A did not wait for B, which caches nothing")
      assert.strictEqual(unacknowledged(a), 1, "and named no node")
      assert.strictEqual(yield* statusOn(b, missed.api_key), 401, "B, cut from NATS, asks the database")
      const uncached = yield* newKey
      assert.strictEqual(yield* statusOn(b, uncached.api_key), 200)
      yield* revokeBehindTheServersBack(uncached.key_id)
      assert.strictEqual(yield* statusOn(b, uncached.api_key), 401, "B did not cache while cut from NATS")

      // Back on NATS (subscription registered again): B caches again and hears revocations.
      const onBefore = cacheOnLines(b)
      proxy.resume()
      yield* eventually(Effect.sync(() => cacheOnLines(b) > onBefore ? true : undefined), "B's cache on again", { timeoutMs: 30_000 })
      assert.strictEqual(yield* nodesHearing, 2, "B's row says it hears revocations (written before its cache went on)")
      const again = yield* newKey
      assert.strictEqual(yield* statusOn(b, again.api_key), 200)
      yield* revokeBehindTheServersBack(again.key_id)
      assert.strictEqual(yield* statusOn(b, again.api_key), 200, "B caches again")
      const after = yield* newKey
      assert.strictEqual(yield* statusOn(b, after.api_key), 200)
      assert.strictEqual((yield* send(`${a.adminUrl}/admin/keys/${after.key_id}/revoke`, postJson(admin, {}))).status, 200)
      assert.strictEqual(yield* statusOn(b, after.api_key), 401, "B hears revocations again")
    })), { timeout: 120_000 })

  it.live("D60: suspended on one node, the account's and its agent's keys are refused at once by the other (cached there)", () =>
    Effect.scoped(Effect.gen(function*() {
      const a = yield* node(natsUrl)
      const b = yield* node(natsUrl)
      yield* eventually(Effect.sync(() => cacheOnLines(a) > 0 && cacheOnLines(b) > 0 ? true : undefined), "both caches on")
      const admin = bearer(a.adminToken)
      const owner = yield* createAccount(a, `suspend-${ulid().toLowerCase().slice(-8)}`)
      const agent = yield* send(`${a.baseUrl}/v1/accounts/me/agents`, postJson(bearer(owner.api_key), {
        name: "bot",
        spend_policy: { daily_limit_usdg: 1, per_transaction_limit_usdg: 1 }
      }))
      assert.strictEqual(agent.status, 201, agent.text)
      const agentId = (agent.json as { account_id: string }).account_id
      const issued = yield* send(`${a.adminUrl}/admin/keys`, postJson(admin, { account_id: agentId, name: "bot" }))
      const agentKey = Schema.decodeUnknownSync(CreatedKey)(issued.json).api_key
      const statusOn = (server: { readonly baseUrl: string }, key: string) =>
        send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(key) }).pipe(Effect.map((response) => response.status))
      // Verified, so cached, on B.
      for (const key of [owner.api_key, agentKey]) assert.strictEqual(yield* statusOn(b, key), 200)
      assert.strictEqual((yield* send(`${a.adminUrl}/admin/accounts/${owner.account_id}/suspend`, postJson(admin, {}))).status, 200)
      assert.strictEqual(yield* statusOn(b, owner.api_key), 403, "node B refuses the owner's key at once")
      assert.strictEqual(yield* statusOn(b, agentKey), 403, "and its agent's")
      assert.strictEqual((yield* send(`${b.adminUrl}/admin/accounts/${owner.account_id}/reactivate`, postJson(admin, {}))).status, 200)
      for (const server of [a, b]) for (const key of [owner.api_key, agentKey]) assert.strictEqual(yield* statusOn(server, key), 200)
    })), { timeout: 120_000 })
})
