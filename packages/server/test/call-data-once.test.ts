/**
 * D79: a transfer's attested call is kept once, in its chain submission, and only while that is
 * open. Migration 0025 on a database that holds rows written the earlier way (each transfer's call
 * in its row and in its submission's): a transfer whose submission exists drops its copy, a final
 * submission drops its call, an open one keeps it, and a transfer an earlier version left without a
 * submission keeps its own. After it, the store writes new transfers without a call, and the
 * resubmission's read (`attestedCall`) finds each call where it is. Real PGlite, the real migrations.
 */
import { PgClient } from "@effect/sql-pg"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { dropDatabases, ensureDatabases } from "../scripts/cluster/cluster.ts"
import { pgliteLayer } from "../src/platform/Database.ts"
import { ulid } from "../src/platform/Ids.ts"
import { migrations } from "../src/platform/migrations/index.ts"
import { TransferStore } from "../src/transfers/TransferStore.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgresAdminUrl } from "./support/TestServer.ts"

const serverUrl = postgresAdminUrl.replace(/\/[^/]*$/, "")
const database = `pps_test_call_data_${ulid().toLowerCase()}`
afterAll(async () => {
  if (postgresAvailable) await dropDatabases(serverUrl, [database])
})

const before0025 = Object.keys(migrations).filter((name) => name < "0025_call_data_once").sort()

const call = (seed: number) => new Uint8Array(760).map((_, i) => (i * 7 + seed) & 0xff)

const legacyRows = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    INSERT INTO accounts (account_id, handle, type, wallet_address, wallet_key_sealed, kyc_status, created_at)
    VALUES ('acct_1', 'one', 'personal', '0x0000000000000000000000000000000000000001', '\\x00', 'verified', now())`
  const transfer = (id: string, status: string, seed: number) =>
    sql`
      INSERT INTO transfers (transfer_id, mode, sender_account_id, recipient_address, recipient_display, asset,
        confidential, status, api_key_id, replay_nonce, deadline_seconds, sender_box, recipient_box, sealed_digest,
        ciphertext, call_data, created_at)
      VALUES (${id}, 'test', 'acct_1', '0x0000000000000000000000000000000000000002', '0x02', 'USDG', true, ${status},
        'key_1', '1', '1', ${new Uint8Array([1])}, ${new Uint8Array([2])}, 'd', 'c', ${call(seed)}, now())`
  const submission = (id: string, status: string, seed: number) =>
    sql`
      INSERT INTO chain_submissions (submission_id, mode, kind, target, call_data, gas_limit, status, created_at, updated_at)
      VALUES (${id}, 'test', 'confidential_transfer', '0x0000000000000000000000000000000000000003', ${call(seed)},
        '300000', ${status}, now(), now())`
  yield* transfer("tr_confirmed", "confirmed", 1)
  yield* submission("tr_confirmed", "confirmed", 1)
  yield* transfer("tr_failed", "failed", 2)
  yield* submission("tr_failed", "failed", 2)
  yield* transfer("tr_open", "pending", 3)
  yield* submission("tr_open", "sent", 3)
  // An earlier version died between the transfer's commit and its submit: only its row has the call.
  yield* transfer("tr_unsubmitted", "pending", 4)
})

const lengths = (table: "transfers" | "chain_submissions", key: "transfer_id" | "submission_id") =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql.unsafe<{ id: string; n: number }>(
      `SELECT ${key} AS id, octet_length(call_data) AS n FROM ${table} ORDER BY ${key}`
    )
    return Object.fromEntries(rows.map((row) => [row.id, row.n]))
  })

const keepsTheCallOnce = Effect.gen(function*() {
  for (const name of before0025) yield* migrations[name]!
  yield* legacyRows
  yield* migrations["0025_call_data_once"]!

  assert.deepStrictEqual(yield* lengths("transfers", "transfer_id"), {
    tr_confirmed: 0,
    tr_failed: 0,
    tr_open: 0,
    tr_unsubmitted: 760
  })
  assert.deepStrictEqual(yield* lengths("chain_submissions", "submission_id"), {
    tr_confirmed: 0,
    tr_failed: 0,
    tr_open: 760
  })

  const store = yield* TransferStore
  const callOf = (id: string) =>
    store.attestedCall(id).pipe(Effect.map((found) => Option.map(found, (call) => Array.from(call))))
  assert.deepStrictEqual(yield* callOf("tr_open"), Option.some(Array.from(call(3))), "the open submission's call")
  assert.deepStrictEqual(yield* callOf("tr_unsubmitted"), Option.some(Array.from(call(4))), "the row's own")
  assert.deepStrictEqual(yield* callOf("tr_confirmed"), Option.some([]), "none left once final")
  assert.deepStrictEqual(yield* callOf("tr_none"), Option.none())

  yield* store.insert([{
    transferId: "tr_new",
    mode: "test",
    senderAccountId: "acct_1",
    recipientAccountId: null,
    recipientAddress: "0x0000000000000000000000000000000000000002",
    recipientDisplay: "0x02",
    asset: "USDG",
    confidential: true,
    apiKeyId: "key_1",
    replayNonce: 5n,
    deadlineSeconds: 1n,
    senderBox: new Uint8Array([1]),
    recipientBox: new Uint8Array([2]),
    sealedDigest: "d",
    ciphertext: "c",
    createdAt: new Date().toISOString(),
    refundOf: null
  }])
  assert.strictEqual((yield* lengths("transfers", "transfer_id")).tr_new, 0, "a new row keeps no call")
})

const title = "keeps a call once, while its submission is open; the store writes none and reads it from the submission"

describe("migration 0025_call_data_once (D79)", () => {
  it.effect(`${title}: PGlite`, () =>
    keepsTheCallOnce.pipe(Effect.provide(TransferStore.layer.pipe(Layer.provideMerge(pgliteLayer(undefined))))), {
    timeout: 60_000
  })

  it.live.skipIf(!postgresAvailable)(`${title}: PostgreSQL`, () =>
    Effect.gen(function*() {
      yield* Effect.promise(() => ensureDatabases(serverUrl, [database]))
      const client = PgClient.layer({ url: Redacted.make(`${serverUrl}/${database}`) })
      yield* keepsTheCallOnce.pipe(Effect.provide(TransferStore.layer.pipe(Layer.provideMerge(client))))
    }), { timeout: 60_000 })
})
