/**
 * `statementWithoutWaitingForDisk` (src/platform/CommitDurability.ts) on the embedded database on
 * disk: its commit leaves the WAL unsynced (PostgreSQL's flush position behind its insert
 * position), every other commit syncs it, the next one syncing the earlier write too; inside a
 * caller's transaction it does not weaken that transaction's commit. And the writes that use it
 * (the relay's mark, the guardian's settlement mark, the webhook worker's lease writes and its
 * attempt results written while more are coming, D72; the idempotency claim, D80) do so.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { randomBytes } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { TestClock } from "effect/testing"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import type { HttpApiGroup } from "effect/http-api"
import { SqlClient } from "effect/sql"
import { CurrentPrincipal, Idempotency, PublicApi } from "@pps/api/Api"
import { EventStore } from "../src/events/EventStore.ts"
import { IdempotencyLive } from "../src/http/Idempotency.ts"
import { CurrentIdempotencyScope, OperationReplay } from "../src/platform/IdempotentOperations.ts"
import { NodeLiveness } from "../src/platform/NodeLiveness.ts"
import { Secrets } from "../src/platform/Secrets.ts"
import { AppConfig } from "../src/config/AppConfig.ts"
import { testConfig } from "./support/TestServer.ts"
import { statementWithoutWaitingForDisk } from "../src/platform/CommitDurability.ts"
import { migrate, pgliteLayer } from "../src/platform/Database.ts"
import { TransferStore } from "../src/transfers/TransferStore.ts"
import { WebhookStore } from "../src/webhooks/WebhookStore.ts"

/** Whether WAL is written that has not reached the disk yet. */
const unsynced = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql<{ readonly unsynced: boolean }>`
    SELECT pg_current_wal_insert_lsn() > pg_current_wal_flush_lsn() AS unsynced`
  return row?.unsynced === true
})

/** A fresh directory for the database, removed with the test's scope. */
const temporaryDirectory = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "pps-commit-durability-"))),
  (dataDir) => Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true }))
)

/** The idempotency middleware on a migrated database, as this one node. */
const idempotencyLayer = IdempotencyLive.pipe(
  Layer.provideMerge(OperationReplay.layer),
  Layer.provide(Layer.succeed(NodeLiveness, NodeLiveness.of({
    nodeId: "node_1",
    otherNodesHearingControl: Effect.succeed([]),
    hearsControl: () => Effect.void
  }))),
  Layer.provide(Layer.succeed(Secrets, Secrets.of({
    apiKeyPepper: Redacted.make(new Uint8Array(randomBytes(32))),
    walletKek: Redacted.make(new Uint8Array(randomBytes(32))),
    walletKekAccepted: [],
    adminToken: Redacted.make("admin")
  }))),
  Layer.provideMerge(Layer.effectDiscard(migrate))
)

describe("commits that do not wait for the disk", () => {
  it.effect("leave the WAL unsynced until the next commit, which syncs both; inside a transaction, commit as it does", () =>
    Effect.gen(function*() {
      const dataDir = yield* temporaryDirectory
      yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE marks (id integer PRIMARY KEY, done boolean NOT NULL)`
        yield* sql`INSERT INTO marks VALUES (1, false), (2, false)`
        assert.isFalse(yield* unsynced, "a commit waits for the disk")

        yield* statementWithoutWaitingForDisk(sql, (setting) => sql`UPDATE marks SET done = true FROM (SELECT ${setting}) AS c WHERE id = 1`)
        assert.isTrue(yield* unsynced, "this one does not")

        yield* sql`UPDATE marks SET done = true WHERE id = 2`
        assert.isFalse(yield* unsynced, "the next commit syncs the WAL, the earlier write's with it")

        yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`INSERT INTO marks VALUES (3, false)`
          yield* statementWithoutWaitingForDisk(sql, (setting) => sql`UPDATE marks SET done = true FROM (SELECT ${setting}) AS c WHERE id = 3`)
        }))
        assert.isFalse(yield* unsynced, "inside a transaction it commits as the transaction does")
        const rows = yield* sql<{ readonly id: number; readonly done: boolean }>`SELECT id, done FROM marks ORDER BY id`
        assert.deepStrictEqual(rows.map((row) => [row.id, row.done]), [[1, true], [2, true], [3, true]])
      }).pipe(Effect.provide(pgliteLayer(path.join(dataDir, "pglite"))))
    }), { timeout: 60_000 })

  it.effect("the relay's mark and the guardian's settlement mark are such commits", () =>
    Effect.gen(function*() {
      const dataDir = yield* temporaryDirectory
      yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* migrate
        yield* sql`
          INSERT INTO accounts (account_id, handle, type, wallet_address, wallet_key_sealed, kyc_status, created_at)
          VALUES ('acct_1', 'one', 'personal', '0x0000000000000000000000000000000000000001', '\\x00', 'verified', now())`
        yield* sql`
          INSERT INTO events (event_id, account_id, mode, type, payload, created_at)
          VALUES ('evt_1', 'acct_1', 'test', 'transfer.confirmed', '{}', now())`
        assert.isFalse(yield* unsynced)
        yield* (yield* EventStore).markPublished(["evt_1"], new Date().toISOString())
        assert.isTrue(yield* unsynced, "the relay's mark")
        const [published] = yield* sql<{ readonly published: boolean }>`
          SELECT published_at IS NOT NULL AS published FROM events WHERE event_id = 'evt_1'`
        assert.isTrue(published?.published)

        // The transfer's row, written by a commit that waits, syncs the relay's mark with it.
        yield* sql.unsafe(`
          INSERT INTO transfers (transfer_id, mode, sender_account_id, recipient_address, recipient_display, asset,
            confidential, status, api_key_id, replay_nonce, deadline_seconds, sender_box, recipient_box, sealed_digest,
            ciphertext, call_data, created_at)
          VALUES ('tr_1', 'test', 'acct_1', '0x0000000000000000000000000000000000000002', '0x02', 'USDG', true, 'confirmed',
            'key_1', '1', '1', '\\x00', '\\x00', 'd', 'c', '\\x00', now())`)
        assert.isFalse(yield* unsynced)
        yield* (yield* TransferStore).markGuardianSettled("tr_1")
        assert.isTrue(yield* unsynced, "the guardian's settlement mark")
      }).pipe(
        Effect.provide(Layer.mergeAll(EventStore.layer, TransferStore.layer).pipe(Layer.provideMerge(pgliteLayer(path.join(dataDir, "pglite")))))
      )
    }), { timeout: 60_000 })

  it.effect("D72: one statement's commit, the webhook worker's lease writes and its results written while more are coming", () =>
    Effect.gen(function*() {
      const dataDir = yield* temporaryDirectory
      yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const store = yield* WebhookStore
        yield* migrate
        yield* sql`
          INSERT INTO accounts (account_id, handle, type, wallet_address, wallet_key_sealed, kyc_status, created_at)
          VALUES ('acct_1', 'one', 'personal', '0x0000000000000000000000000000000000000001', '\\x00', 'verified', now())`
        yield* sql`
          INSERT INTO events (event_id, account_id, mode, type, payload, created_at, published_at)
          VALUES ('evt_1', 'acct_1', 'test', 'transfer.confirmed', '{}', now(), now())`
        yield* sql`
          INSERT INTO webhooks (webhook_id, account_id, mode, url, event_types, secret_sealed, created_at)
          VALUES ('wh_1', 'acct_1', 'test', 'https://example.com/hook', 'transfer.confirmed', '\\x00', now())`
        yield* store.insertDeliveries([{ deliveryId: "dlv_1", webhookId: "wh_1", eventId: "evt_1", trigger: "event", createdAt: new Date().toISOString() }], new Date(0).toISOString())
        /** A write that waits for the disk, syncing what came before it. */
        const syncedWrite = sql`UPDATE accounts SET kyc_status = 'verified' WHERE account_id = 'acct_1'`
        assert.isFalse(yield* unsynced)

        yield* statementWithoutWaitingForDisk(sql, (setting) => sql`UPDATE webhooks SET url = url FROM (SELECT ${setting}) AS s`)
        assert.isTrue(yield* unsynced, "one statement that does not wait")
        yield* syncedWrite
        yield* sql.withTransaction(statementWithoutWaitingForDisk(sql, (setting) => sql`UPDATE webhooks SET url = url FROM (SELECT ${setting}) AS s`))
        assert.isFalse(yield* unsynced, "inside a transaction it commits as the transaction does")

        const now = new Date()
        const leaseUntil = new Date(now.getTime() + 30_000).toISOString()
        assert.deepStrictEqual(yield* store.claimSubscriptions({ nodeId: "node_1", now: now.toISOString(), leaseUntil, limit: 1 }), ["wh_1"])
        assert.isTrue(yield* unsynced, "the claim")
        yield* syncedWrite
        assert.isTrue(yield* store.extendLease("wh_1", "node_1", leaseUntil))
        assert.isTrue(yield* unsynced, "the renewal")
        yield* syncedWrite

        const result = (attemptNumber: number) => ({
          deliveryId: "dlv_1",
          attemptNumber,
          nodeId: "node_1",
          startedAt: now.toISOString(),
          durationMs: 5,
          statusCode: 500,
          error: undefined,
          status: { nextAttemptAt: now.toISOString() },
          webhookId: "wh_1",
          leaseUntil
        })
        assert.deepStrictEqual(yield* store.recordAttempts([result(1)], false), [{ recorded: true, leaseHeld: true }])
        assert.isTrue(yield* unsynced, "a result written while more are coming")
        assert.deepStrictEqual(yield* store.recordAttempts([result(2)]), [{ recorded: true, leaseHeld: true }])
        assert.isFalse(yield* unsynced, "the writer's last write waits, and syncs the earlier one with it")
        const rows = yield* sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM webhook_attempts WHERE delivery_id = 'dlv_1'`
        assert.strictEqual(rows[0]?.n, 2)

        yield* store.releaseLease("wh_1", "node_1")
        assert.isTrue(yield* unsynced, "the release")
      }).pipe(
        Effect.provide(WebhookStore.layer.pipe(Layer.provideMerge(pgliteLayer(path.join(dataDir, "pglite")))))
      )
    }), { timeout: 60_000 })
  it.effect("D80: the idempotency claim is such a commit, and the run's record, bound to it, syncs it", () =>
    Effect.gen(function*() {
      const dataDir = yield* temporaryDirectory
      yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const middleware = yield* Idempotency
        const replay = yield* OperationReplay
        yield* sql`CREATE TABLE records (id text PRIMARY KEY)`
        assert.isFalse(yield* unsynced)
        const seen: Array<[string, boolean]> = []
        const run = Effect.gen(function*() {
          seen.push(["claimed", yield* unsynced])
          // The operation's record and its bind, one transaction that waits for the disk.
          yield* sql.withTransaction(Effect.gen(function*() {
            yield* sql`INSERT INTO records VALUES ('rec_1')`
            yield* replay.bind("transfer", "rec_1")
          }))
          seen.push(["recorded", yield* unsynced])
          const scope = yield* CurrentIdempotencyScope
          seen.push(["scoped", Option.isSome(scope)])
          return HttpServerResponse.text("{}", { status: 201, contentType: "application/json" })
        }).pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.orDie)
        const request = HttpServerRequest.fromWeb(
          new Request("http://localhost/v1/transfers", { method: "POST", headers: { "idempotency-key": "key_1" }, body: "{}" })
        )
        // The middleware does not read which endpoint it wraps; the group's own type is too precise for
        // the option's (its `prefix` returns a narrower group), so it is widened here.
        const group = PublicApi.groups.transfers as unknown as HttpApiGroup.Top
        const response = yield* middleware(run, { endpoint: PublicApi.groups.transfers.endpoints.create, group }).pipe(
          Effect.provideService(HttpServerRequest.HttpServerRequest, request),
          Effect.provideService(HttpServerRequest.ParsedSearchParams, {}),
          Effect.provideService(HttpRouter.RouteContext, { params: {}, route: HttpRouter.route("POST", "/v1/transfers", HttpServerResponse.empty()) }),
          Effect.provideService(CurrentPrincipal, { keyId: "key_1", accountId: "acct_1", accountType: "personal", ownerAccountId: null, mode: "test" })
        )
        assert.strictEqual(response.status, 201)
        assert.deepStrictEqual(seen, [["claimed", true], ["recorded", false], ["scoped", true]])
        const [claim] = yield* sql<{ readonly operation_id: string; readonly response_status: number }>`
          SELECT operation_id, response_status FROM idempotency_keys WHERE account_id = 'acct_1'`
        assert.deepStrictEqual([claim?.operation_id, claim?.response_status], ["rec_1", 201])
      }).pipe(
        Effect.provide(idempotencyLayer.pipe(Layer.provideMerge(pgliteLayer(path.join(dataDir, "pglite")))))
      )
    }), { timeout: 60_000 })
  it.effect("D80: a node's heartbeat is such a commit", () =>
    Effect.gen(function*() {
      const dataDir = yield* temporaryDirectory
      yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const liveness = yield* NodeLiveness
        const beats = sql<{ readonly beat_at: string }>`
          SELECT beat_at::text AS beat_at FROM node_heartbeats WHERE node_id = ${liveness.nodeId}`
        const first = (yield* beats)[0]?.beat_at
        yield* liveness.hearsControl(false)
        assert.isFalse(yield* unsynced, "what the node hears is written by a commit that waits")
        yield* TestClock.adjust("2 seconds")
        // The beat runs on its own fiber: read until its row has moved (each read yields to it).
        let moved = false
        for (let read = 0; read < 1_000 && !moved; read++) moved = (yield* beats)[0]?.beat_at !== first
        assert.isTrue(moved, "the schedule beat again")
        assert.isTrue(yield* unsynced, "the beat does not wait")
      }).pipe(
        Effect.provide(NodeLiveness.layer.pipe(
          Layer.provideMerge(Layer.effectDiscard(migrate)),
          Layer.provide(Layer.succeed(AppConfig, testConfig(dataDir))),
          Layer.provideMerge(pgliteLayer(path.join(dataDir, "pglite")))
        ))
      )
    }), { timeout: 60_000 })
})
