/**
 * The submission store keeps a batch's signed transaction once (migration 0018), on PGlite
 * and on PostgreSQL: every member of a batch reads the bytes back (the restart path, `open`
 * and `adoptOrphans`, broadcasts them again), a re-signed subset reads its new bytes while
 * the rest keep the old ones, a transaction of one call keeps its bytes in its row (where a
 * node of the earlier version looks), and a row written the earlier way still reads its own.
 * Once no open submission carries a transaction, its bytes go: a final row keeps none, and the
 * settlement's sweep deletes the stored transaction. A final row keeps no call either (D79).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { type Address, type Hex, keccak256, toHex } from "viem"
import { dropDatabases, ensureDatabases } from "../scripts/cluster/cluster.ts"
import { AppConfig } from "../src/config/AppConfig.ts"
import { MigrationsLive, SqlLive } from "../src/platform/Database.ts"
import { DataDir } from "../src/platform/DataDir.ts"
import { ulid } from "../src/platform/Ids.ts"
import { NodeLiveness } from "../src/platform/NodeLiveness.ts"
import type { SubmissionRequest } from "../src/settlement/domain.ts"
import { SubmissionStore } from "../src/settlement/SubmissionStore.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgresAdminUrl, testConfig } from "./support/TestServer.ts"

const serverUrl = postgresAdminUrl.replace(/\/[^/]*$/, "")
const database = `pps_test_submissions_${ulid().toLowerCase()}`
const dataDirs: Array<string> = []
afterAll(async () => {
  for (const dir of dataDirs) fs.rmSync(dir, { recursive: true, force: true })
  if (postgresAvailable) await dropDatabases(serverUrl, [database])
})

const storeLayer = (databaseUrl: Option.Option<Redacted.Redacted<string>>) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-submissions-"))
  dataDirs.push(dataDir)
  return SubmissionStore.layer.pipe(
    Layer.provideMerge(NodeLiveness.layer),
    Layer.provideMerge(MigrationsLive),
    Layer.provideMerge(SqlLive),
    Layer.provideMerge(DataDir.layer),
    Layer.provideMerge(Layer.succeed(AppConfig, testConfig(dataDir, { databaseUrl })))
  )
}

const target = "0x5FbDB2315678afecb367f032d93F642f64180aa3" as Address
const relayer = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" as Address

const request = (id: string): SubmissionRequest => ({
  submissionId: id,
  mode: "test",
  kind: "confidential_transfer",
  target,
  data: toHex(new Uint8Array(1_200).fill(id.length)),
  gasLimit: 300_000n,
  deadlineSeconds: 2_000_000_000n,
  replayKey: null
})

/** Stand-in signed bytes: the store keeps them and their hash as given, it never parses them. */
const signed = (label: string, nonce: number, bytes: number) => {
  const rawTx = toHex(new Uint8Array(bytes).map((_, i) => (i * 31 + label.length) & 0xff))
  return { relayer, nonce, rawTx, txHash: keccak256(rawTx) as Hex }
}

const behaviour = Effect.gen(function*() {
  const store = yield* SubmissionStore
  const sql = yield* SqlClient.SqlClient
  const prefix = ulid().toLowerCase()
  const ids = Array.from({ length: 8 }, (_, i) => `${prefix}-batch-${i}`)
  for (const id of ids) assert.isTrue(yield* store.record(request(id)))

  // One transaction for all eight: its bytes are stored once, under its hash.
  const first = signed("first", 7, 8 * 1_300)
  yield* store.markSent(ids, first)
  const stored = yield* sql<{ n: string; bytes: string }>`
    SELECT count(*)::text AS n, coalesce(sum(octet_length(raw_tx)), 0)::text AS bytes
    FROM chain_transactions WHERE tx_hash = ${first.txHash}`
  assert.deepStrictEqual(stored.map((row) => [row.n, row.bytes]), [["1", String(8 * 1_300)]])
  const inRows = yield* sql<{ n: string }>`
    SELECT count(*)::text AS n FROM chain_submissions WHERE ${sql.in("submission_id", ids)} AND raw_tx IS NOT NULL`
  assert.strictEqual(inRows[0]?.n, "0", "no member row carries the bytes")
  for (const id of ids) {
    const submission = Option.getOrThrow(yield* store.get(id))
    assert.strictEqual(submission.status, "sent")
    assert.strictEqual(submission.rawTx, first.rawTx, id)
    assert.strictEqual(submission.txHash, first.txHash, id)
  }

  // Three of them signed again (their nonce was spent): they read the new bytes, the rest the old.
  const again = signed("again", 8, 3 * 1_300)
  yield* store.markSent(ids.slice(0, 3), again)
  // The same transaction marked twice (a retried record) stores its bytes once.
  yield* store.markSent(ids.slice(0, 3), again)
  const open = new Map((yield* store.open("test")).map((submission) => [submission.request.submissionId, submission]))
  for (const [index, id] of ids.entries()) {
    const expected = index < 3 ? again : first
    assert.strictEqual(open.get(id)?.rawTx, expected.rawTx, id)
    assert.strictEqual(open.get(id)?.txHash, expected.txHash, id)
  }
  const transactions = yield* sql<{ n: string }>`
    SELECT count(*)::text AS n FROM chain_transactions WHERE ${sql.in("tx_hash", [first.txHash, again.txHash])}`
  assert.strictEqual(transactions[0]?.n, "2")

  // A transaction of one call keeps its bytes in its row (a node of the earlier version reads them there).
  const singleId = `${prefix}-single`
  assert.isTrue(yield* store.record(request(singleId)))
  const single = signed("single", 10, 1_300)
  yield* store.markSent([singleId], single)
  const singleRow = yield* sql<{ raw_tx: Uint8Array | null }>`SELECT raw_tx FROM chain_submissions WHERE submission_id = ${singleId}`
  assert.strictEqual(Buffer.from(singleRow[0]!.raw_tx!).toString("hex"), single.rawTx.slice(2))
  const singleStored = yield* sql<{ n: string }>`SELECT count(*)::text AS n FROM chain_transactions WHERE tx_hash = ${single.txHash}`
  assert.strictEqual(singleStored[0]?.n, "0", "stored once, in its row")
  assert.strictEqual(Option.getOrThrow(yield* store.get(singleId)).rawTx, single.rawTx)

  // A row written the earlier way (a node of an earlier version): its own bytes are read.
  const legacyId = `${prefix}-legacy`
  assert.isTrue(yield* store.record(request(legacyId)))
  const legacy = signed("legacy", 9, 1_300)
  yield* sql`
    UPDATE chain_submissions SET relayer = ${legacy.relayer}, relayer_nonce = ${legacy.nonce},
      raw_tx = ${Buffer.from(legacy.rawTx.slice(2), "hex")}, tx_hash = ${legacy.txHash}, status = 'sent'
    WHERE submission_id = ${legacyId}`
  assert.strictEqual(Option.getOrThrow(yield* store.get(legacyId)).rawTx, legacy.rawTx)

  // The restart path: a survivor adopting these rows gets every member's bytes.
  yield* sql`UPDATE chain_submissions SET owner_node = 'a-node-long-gone' WHERE ${sql.in("submission_id", [...ids, singleId, legacyId])}`
  const adopted = new Map((yield* store.adoptOrphans("test")).map((submission) => [submission.request.submissionId, submission]))
  for (const [index, id] of ids.entries()) assert.strictEqual(adopted.get(id)?.rawTx, (index < 3 ? again : first).rawTx, id)
  assert.strictEqual(adopted.get(legacyId)?.rawTx, legacy.rawTx)
  assert.strictEqual(adopted.get(singleId)?.rawTx, single.rawTx)
  // An open submission keeps its call: the restart path signs it again from the row.
  for (const id of [...ids, singleId, legacyId]) assert.strictEqual(adopted.get(id)?.request.data, request(id).data, id)

  // Bytes are kept while a submission they carry is open, and go once none is.
  // A grace below zero: every stored transaction is old enough, by the database's clock.
  const noGrace = -60_000
  const storedHashes = () =>
    sql<{ tx_hash: string }>`SELECT tx_hash FROM chain_transactions WHERE ${sql.in("tx_hash", [first.txHash, again.txHash])}
      ORDER BY tx_hash`.pipe(Effect.map((rows) => rows.map((row) => row.tx_hash)))
  const both = [first.txHash, again.txHash].sort()
  assert.strictEqual(yield* store.forgetSettledTransactions(noGrace, 500), 0, "every stored transaction carries an open submission")
  assert.deepStrictEqual(yield* storedHashes(), both)
  const confirmed = (id: string, txHash: Hex) => ({
    _tag: "Confirmed" as const,
    submissionId: id,
    mode: "test" as const,
    txHash,
    blockNumber: 42n,
    blockTimestampSeconds: 1_800_000_000n
  })
  // The three re-signed ones confirm: `again` carries nothing open, `first` still does.
  assert.deepStrictEqual(yield* store.confirmMany(ids.slice(0, 3).map((id) => confirmed(id, again.txHash))), ids.slice(0, 3))
  assert.strictEqual(yield* store.forgetSettledTransactions(3_600_000, 500), 0, "younger than the grace: kept")
  assert.strictEqual(yield* store.forgetSettledTransactions(noGrace, 500), 1)
  assert.deepStrictEqual(yield* storedHashes(), [first.txHash])
  for (const id of ids.slice(3)) assert.strictEqual(Option.getOrThrow(yield* store.get(id)).rawTx, first.rawTx, id)
  // The rest end, one of them failed: `first` goes too.
  assert.isTrue(yield* store.resolve({ _tag: "Failed", submissionId: ids[3]!, mode: "test", txHash: first.txHash, reason: "expired" }))
  assert.strictEqual(yield* store.forgetSettledTransactions(noGrace, 500), 0, "four members still open")
  yield* store.confirmMany(ids.slice(4).map((id) => confirmed(id, first.txHash)))
  assert.strictEqual(yield* store.forgetSettledTransactions(noGrace, 500), 1)
  assert.deepStrictEqual(yield* storedHashes(), [])
  // A final row keeps no bytes of its own either (a single call, a legacy row).
  yield* store.confirmMany([confirmed(singleId, single.txHash)])
  assert.isTrue(yield* store.resolve({ _tag: "Failed", submissionId: legacyId, mode: "test", txHash: legacy.txHash, reason: "expired" }))
  const withBytes = yield* sql<{ n: string }>`
    SELECT count(*)::text AS n FROM chain_submissions WHERE ${sql.in("submission_id", [...ids, singleId, legacyId])} AND raw_tx IS NOT NULL`
  assert.strictEqual(withBytes[0]?.n, "0")
  // Nor its call (D79), confirmed or failed: only an open submission's call is ever read.
  const withCall = yield* sql<{ n: string }>`
    SELECT count(*)::text AS n FROM chain_submissions WHERE ${sql.in("submission_id", [...ids, singleId, legacyId])}
      AND octet_length(call_data) > 0`
  assert.strictEqual(withCall[0]?.n, "0")
  const final = Option.getOrThrow(yield* store.get(singleId))
  assert.deepStrictEqual([final.status, final.rawTx, final.txHash], ["confirmed", null, single.txHash])
  // In slices: one a statement here, until a slice comes back short.
  for (const label of ["left", "leftover", "left behind"]) {
    const left = signed(label, 0, 100)
    yield* sql`INSERT INTO chain_transactions (tx_hash, raw_tx, created_at) VALUES (${left.txHash}, ${Buffer.from(left.rawTx.slice(2), "hex")}, now())`
  }
  assert.strictEqual(yield* store.forgetSettledTransactions(noGrace, 1), 3)
  assert.strictEqual(yield* store.forgetSettledTransactions(noGrace, 1), 0)

  // Bytes stored again (the same signature marked for open submissions) are young again: a sweep
  // that saw them unreferenced just before, and deletes after that commit, re-checks their age.
  const remarked = signed("marked again", 11, 2 * 1_300)
  yield* sql`INSERT INTO chain_transactions (tx_hash, raw_tx, created_at)
    VALUES (${remarked.txHash}, ${Buffer.from(remarked.rawTx.slice(2), "hex")}, now() - interval '1 hour')`
  const pair = [`${prefix}-pair-0`, `${prefix}-pair-1`]
  for (const id of pair) assert.isTrue(yield* store.record(request(id)))
  yield* store.markSent(pair, remarked)
  const age = yield* sql<{ young: boolean }>`
    SELECT created_at > now() - interval '1 minute' AS young FROM chain_transactions WHERE tx_hash = ${remarked.txHash}`
  assert.deepStrictEqual(age.map((row) => row.young), [true])
  for (const id of pair) assert.strictEqual(Option.getOrThrow(yield* store.get(id)).rawTx, remarked.rawTx, id)
})

describe("submission store: a signed transaction's bytes once per transaction", () => {
  it.live("on PGlite", () => behaviour.pipe(Effect.provide(storeLayer(Option.none()))), { timeout: 60_000 })

  it.live.skipIf(!postgresAvailable)("on PostgreSQL", () =>
    Effect.gen(function*() {
      yield* Effect.promise(() => ensureDatabases(serverUrl, [database]))
      yield* behaviour.pipe(Effect.provide(storeLayer(Option.some(Redacted.make(`${serverUrl}/${database}`)))))
    }), { timeout: 60_000 })
})
