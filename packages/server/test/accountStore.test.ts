/**
 * The account store's point reads on PGlite: reads by id, by handle and by wallet address asked
 * in the same turn share one SELECT (what lets a transfer's create read its sender and its
 * recipient in one round trip, transfers/resolve.ts), and each asker gets its own row: an id never
 * answers a read by handle, nor a handle a read by id, an address matches in any case, and an
 * unknown one is None. An address read uses an index (migration 0027). And `iso_utc`, which every
 * read of a timestamp calls (D5's form), is planned inline (migration 0026).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { PgliteClient } from "@effect/sql-pglite"
import { EmbeddedDatabase } from "@pps/guardian"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { AccountStore } from "../src/accounts/AccountStore.ts"
import { pgliteTemplate } from "../../../scripts/pgliteTemplate.ts"
import { MigrationsLive } from "../src/platform/Database.ts"

const dataDirs: Array<string> = []
afterAll(() => {
  for (const dir of dataDirs) fs.rmSync(dir, { recursive: true, force: true })
})

/**
 * The store on an embedded database of its own, with the database's own maintenance (a growth
 * check every few seconds) pushed past the test, so that the statements counted are the test's.
 */
const storeLayer = () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-accounts-"))
  dataDirs.push(dataDir)
  const never = 3_600_000
  const noMaintenance = {
    firstAfterMs: never,
    minIntervalMs: never,
    maxShare: 0.01,
    growthCheckMs: never,
    growthCheckMaxMs: never
  }
  const database = EmbeddedDatabase.makeEmbeddedClient(path.join(dataDir, "pglite"), 5_000, noMaintenance, "caller", pgliteTemplate())
  return AccountStore.layer.pipe(Layer.provideMerge(MigrationsLive), Layer.provideMerge(PgliteClient.layerFrom(database)))
}

const account = (index: number, handle: string) => ({
  accountId: `acct_${index}`,
  handle,
  type: "personal" as const,
  ownerAccountId: null,
  walletAddress: `0x${index.toString(16).padStart(40, "0")}`,
  walletKeySealed: new Uint8Array([index]),
  kycStatus: "verified" as const,
  createdAt: "2026-11-30T12:00:00.000Z"
})

/** The statements PGlite has executed so far (PreparedStatementPGlite counts them). */
const executions = Effect.gen(function*() {
  const client = yield* PgliteClient.PgliteClient
  const statistics = (client.pglite as { readonly preparedStatistics?: { readonly executions: number } }).preparedStatistics
  assert.isDefined(statistics, "the embedded database is a PreparedStatementPGlite")
  return statistics!.executions
})

describe("AccountStore's point reads", () => {
  it.effect("by id, by handle and by address, asked together: one SELECT, each asker its own row", () =>
    Effect.gen(function*() {
      const store = yield* AccountStore
      yield* store.insert(account(1, "alice"))
      // A handle that is an id no account has: a read by that id finds nothing.
      yield* store.insert(account(2, "acct_9"))
      yield* store.insert(account(3, "carol"))
      // Stored with a checksum's capitals; asked in lower case below.
      yield* store.insert({ ...account(10, "dave"), walletAddress: `0x${"0".repeat(39)}A` })
      const before = yield* executions
      const [sender, recipient, byHandleOfId, missingId, missingHandle, byAddress, missingAddress] = yield* Effect.all([
        store.findById("acct_1"),
        store.findByHandle("carol"),
        // An id that is no account's handle: a read by that handle finds nothing.
        store.findByHandle("acct_1"),
        store.findById("acct_9"),
        store.findByHandle("nobody"),
        store.findByWalletAddress(`0x${"0".repeat(39)}a`),
        store.findByWalletAddress(`0x${"f".repeat(40)}`)
      ], { concurrency: "unbounded" })
      assert.strictEqual((yield* executions) - before, 1)
      assert.strictEqual(Option.getOrThrow(sender).handle, "alice")
      assert.strictEqual(Option.getOrThrow(recipient).accountId, "acct_3")
      assert.isTrue(Option.isNone(byHandleOfId))
      assert.isTrue(Option.isNone(missingId))
      assert.isTrue(Option.isNone(missingHandle))
      assert.strictEqual(Option.getOrThrow(byAddress).accountId, "acct_10")
      assert.isTrue(Option.isNone(missingAddress))
      // One kind alone, and the same account asked both ways.
      const [alone, sameById, sameByHandle] = yield* Effect.all([
        store.findByHandle("acct_9"),
        store.findById("acct_3"),
        store.findByHandle("carol")
      ], { concurrency: "unbounded" })
      assert.strictEqual(Option.getOrThrow(alone).accountId, "acct_2")
      assert.strictEqual(Option.getOrThrow(sameById).handle, "carol")
      assert.strictEqual(Option.getOrThrow(sameByHandle).accountId, "acct_3")
      const single = yield* store.findById("acct_2")
      assert.strictEqual(Option.getOrThrow(single).handle, "acct_9")
    }).pipe(Effect.provide(storeLayer())), 60_000)
})

describe("account reads' plans (migrations 0026, 0027)", () => {
  it.effect("an address is found through its index; iso_utc is planned as its expression, not called per row, and writes D5's form", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // Only the plan's shape is asked: with a handful of rows a scan is cheaper, so scans are off.
      yield* sql`SET enable_seqscan = off`
      const byAddress = yield* sql<{ readonly "QUERY PLAN": string }>`
        EXPLAIN SELECT account_id FROM accounts WHERE lower(wallet_address) IN ('0xab', '0xcd')`
      assert.include(byAddress.map((row) => row["QUERY PLAN"]).join("\n"), "accounts_wallet_address_lower")
      yield* sql`RESET enable_seqscan`
      const plan = yield* sql<{ readonly "QUERY PLAN": string }>`
        EXPLAIN VERBOSE SELECT iso_utc(created_at) FROM accounts WHERE account_id = 'acct_0'`
      const text = plan.map((row) => row["QUERY PLAN"]).join("\n")
      assert.include(text, "to_char(")
      assert.notInclude(text, "iso_utc(")
      const [row] = yield* sql<{ readonly at: string }>`SELECT iso_utc('2026-11-30 13:04:05.678+02'::timestamptz) AS at`
      assert.strictEqual(row!.at, "2026-11-30T11:04:05.678Z")
    }).pipe(Effect.provide(storeLayer())), 60_000)
})
