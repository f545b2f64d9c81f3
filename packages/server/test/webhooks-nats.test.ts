/**
 * The distributed mode's bus (docs/operations.md): two api nodes on one PostgreSQL
 * database and one NATS JetStream stream (the real server at 127.0.0.1:4222).
 * Every event reaches each matching subscription exactly once although both
 * relays publish and both nodes consume and deliver; a republished event is
 * dropped by the stream (Nats-Msg-Id = event id).
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { EventBus } from "../src/events/EventBus.ts"
import { ulid } from "../src/platform/Ids.ts"
import { Dispatcher } from "../src/webhooks/Dispatcher.ts"
import { natsAvailable, natsUrl } from "./support/requireNats.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgresAdminUrl } from "./support/TestServer.ts"
import { eventually, makeTestCa, removeTestCa, startReceiver } from "./support/webhooks-receiver.ts"
import { append, buildServices, confirmedEvent, newAccount, newWebhook } from "./support/webhooks-services.ts"

const ca = makeTestCa()
const stream = `PPS_TEST_${ulid()}`
const subjectPrefix = `test.${stream.toLowerCase()}`

afterAll(async () => {
  removeTestCa(ca)
  if (!natsAvailable) return
  const nc = await connect({ servers: natsUrl })
  const jsm = await jetstreamManager(nc)
  await jsm.streams.delete(stream).catch(() => false)
  await nc.close()
})

const freshDatabase = Effect.gen(function*() {
  const name = `pps_test_${ulid().toLowerCase()}`
  const run = (statement: string) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(statement)
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(postgresAdminUrl) })), Effect.orDie)
  yield* Effect.acquireRelease(run(`CREATE DATABASE ${name}`), () => run(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
  const url = new URL(postgresAdminUrl)
  url.pathname = `/${name}`
  return url.toString()
})

describe.skipIf(!natsAvailable || !postgresAvailable)("webhooks over NATS JetStream", () => {
  it.live("two nodes: every event delivered exactly once per subscription; republishing is deduplicated", () =>
    Effect.gen(function*() {
      const receiver = yield* Effect.acquireRelease(
        Effect.promise(() => startReceiver(ca, () => ({ status: 200 }))),
        (r) => Effect.promise(() => r.close())
      )
      const databaseUrl = yield* freshDatabase
      const config = {
        databaseUrl: Option.some(Redacted.make(databaseUrl)),
        apiKeyPepper: Option.some(Redacted.make("test-pepper-0123456789abcdef0123456789abcdef")),
        walletKek: Option.some(Redacted.make(Buffer.alloc(32, 7).toString("base64"))),
        adminToken: Option.some(Redacted.make("adm_test_token_0123456789abcdef0123456789")),
        natsUrl: Option.some(natsUrl),
        natsStream: stream,
        natsSubjectPrefix: subjectPrefix,
        webhookCaFile: Option.some(ca.caFile)
      }
      const nodeA = yield* buildServices(config)
      const nodeB = yield* buildServices(config)
      assert.strictEqual(Context.get(nodeA.services, EventBus).kind, "jetstream")

      const subscriptions = 4
      const eventsPerAccount = 25
      const accounts = []
      for (let n = 0; n < subscriptions; n++) {
        const account = yield* newAccount(nodeA.services, `nats-${n}`)
        yield* newWebhook(nodeA.services, { accountId: account.accountId, mode: "test" }, `${receiver.url}/sub-${n}`)
        accounts.push(account)
      }
      const appended = []
      for (const [n, account] of accounts.entries()) {
        const node = n % 2 === 0 ? nodeA : nodeB
        for (let i = 0; i < eventsPerAccount; i++) {
          appended.push(...(yield* append(node.services, [confirmedEvent(account.accountId, account.handle, "test", `tr_${n}_${i}`)])))
        }
      }
      const total = subscriptions * eventsPerAccount
      yield* eventually(Effect.sync(() => (receiver.requests.length >= total ? true : undefined)), "every delivery", {
        timeoutMs: 30_000
      })
      // Republish everything through both buses: the stream drops the repeats.
      const messages = appended.map((event) => ({
        event_id: event.eventId,
        account_id: event.accountId,
        mode: event.mode,
        type: event.type
      }))
      yield* Context.get(nodeA.services, EventBus).publish(messages)
      yield* Context.get(nodeB.services, EventBus).publish(messages)
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 1_000)))
      const eventIds = receiver.requests.map((request) => String(request.headers["x-service-event-id"]))
      assert.strictEqual(eventIds.length, total, "no duplicate delivery")
      assert.strictEqual(new Set(eventIds).size, total)
      assert.deepStrictEqual(receiver.concurrentDuplicates, [])
      for (const [pathname, max] of receiver.maxOpenByPath) assert.strictEqual(max, 1, pathname)

      const info = yield* Effect.promise(async () => {
        const nc = await connect({ servers: natsUrl })
        const jsm = await jetstreamManager(nc)
        const streamInfo = await jsm.streams.info(stream)
        const consumer = await jsm.consumers.info(stream, `${stream}_webhook_fanout`)
        await nc.close()
        return { messages: streamInfo.state.messages, subjects: streamInfo.config.subjects, pending: consumer.num_pending }
      })
      assert.strictEqual(info.messages, total, "one stream message per event, whatever was republished")
      assert.deepStrictEqual(info.subjects, [`${subjectPrefix}.>`])
      assert.strictEqual(info.pending, 0)
      // Every attempt was made by one of the two nodes, each attempt recorded once.
      const attempts = yield* Context.get(nodeA.services, SqlClient.SqlClient)<{ node_id: string; count: string }>`
        SELECT node_id, count(*)::text AS count FROM webhook_attempts GROUP BY node_id`.pipe(Effect.orDie)
      const nodeIds = [Context.get(nodeA.services, Dispatcher).nodeId, Context.get(nodeB.services, Dispatcher).nodeId]
      for (const row of attempts) assert.include(nodeIds, row.node_id)
      assert.strictEqual(attempts.reduce((sum, row) => sum + Number(row.count), 0), total)
    }), { timeout: 90_000 })
})
