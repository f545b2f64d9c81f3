/**
 * D58's stream order is numeric, whatever the digits: the store hands out an account's events
 * in (transaction id, sequence) order as numbers, so a page's last event is its furthest and
 * paging after it hands out every later event once. The positions here cross a digit boundary
 * in both parts (transaction 9 → 10, sequence 99 → 100), where an order by their decimal text
 * ("10" before "9") once put a later event first: the next page, after the earlier one, handed
 * the later one out again (`pps listen` forwarded an event twice when the embedded database's
 * transaction ids passed 999 → 1000). On PGlite and on PostgreSQL.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { dropDatabases, ensureDatabases } from "../scripts/cluster/cluster.ts"
import { AppConfig } from "../src/config/AppConfig.ts"
import { type EventPosition, EventStore } from "../src/events/EventStore.ts"
import { MigrationsLive, SqlLive } from "../src/platform/Database.ts"
import { DataDir } from "../src/platform/DataDir.ts"
import { ulid } from "../src/platform/Ids.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgresAdminUrl, testConfig } from "./support/TestServer.ts"

const serverUrl = postgresAdminUrl.replace(/\/[^/]*$/, "")
const database = `pps_test_event_order_${ulid().toLowerCase()}`
const dataDirs: Array<string> = []
afterAll(async () => {
  for (const dir of dataDirs) fs.rmSync(dir, { recursive: true, force: true })
  if (postgresAvailable) await dropDatabases(serverUrl, [database])
})

const storeLayer = (databaseUrl: Option.Option<Redacted.Redacted<string>>) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-event-order-"))
  dataDirs.push(dataDir)
  return EventStore.layer.pipe(
    Layer.provideMerge(MigrationsLive),
    Layer.provideMerge(SqlLive),
    Layer.provideMerge(DataDir.layer),
    Layer.provideMerge(Layer.succeed(AppConfig, testConfig(dataDir, { databaseUrl })))
  )
}

/**
 * The positions, in stream order. Transactions 9 and 10 ended long ago in any migrated database
 * (below every watermark); the ids run the other way, so id order says nothing of position.
 */
const positions: ReadonlyArray<EventPosition> = [
  { txId: "9", seq: "99" },
  { txId: "9", seq: "100" },
  { txId: "10", seq: "8" },
  { txId: "10", seq: "9" },
  { txId: "10", seq: "10" }
]

const behaviour = Effect.gen(function*() {
  const store = yield* EventStore
  const sql = yield* SqlClient.SqlClient
  const accountId = `acct_${ulid()}`
  yield* sql`
    INSERT INTO accounts (account_id, handle, type, wallet_address, wallet_key_sealed, kyc_status, created_at)
    VALUES (${accountId}, ${`order-${accountId.slice(-8).toLowerCase()}`}, 'personal', ${`0x${accountId.slice(-20)}`},
      ${Buffer.from([0])}, 'verified', now())`
  const ids = positions.map((_, index) => `evt_${ulid()}${index}`)
  const [first, ...rest] = positions.map((position, index) => ({
    event_id: ids[positions.length - 1 - index],
    account_id: accountId,
    mode: "test",
    type: "transfer.confirmed",
    payload: "{}",
    created_at: new Date().toISOString(),
    tx_id: position.txId,
    seq: position.seq
  }))
  yield* sql`INSERT INTO events ${sql.insert([first!, ...rest])}`
  const listed = (after: EventPosition, limit: number) =>
    store.listAfterPosition({ accountId, mode: "test", after, types: [], limit }).pipe(
      Effect.map((page) => page.events.map((event) => event.position))
    )

  // One page: in numeric order, all of them.
  assert.deepStrictEqual(yield* listed({ txId: "0", seq: "0" }, 100), positions)
  // Pages of two, each after the last one's end (as the stream reads): each once, in order.
  const paged: Array<EventPosition> = []
  let after: EventPosition = { txId: "0", seq: "0" }
  for (let pages = 0; pages < positions.length + 1; pages++) {
    const page = yield* listed(after, 2)
    if (page.length === 0) break
    paged.push(...page)
    after = page.at(-1)!
  }
  assert.deepStrictEqual(paged, positions)
  // Resuming after an id past retention starts before the earliest position among larger ids.
  assert.deepStrictEqual(yield* store.firstPositionAfterId("evt_0", accountId, "test"), Option.some(positions[0]!))
  assert.deepStrictEqual(yield* store.positionOf(ids[0]!, accountId, "test"), Option.some(positions.at(-1)!))
})

describe("the event stream's order across a digit boundary (D58)", () => {
  it.live("on PGlite", () => behaviour.pipe(Effect.provide(storeLayer(Option.none()))), { timeout: 60_000 })

  it.live.skipIf(!postgresAvailable)("on PostgreSQL", () =>
    Effect.gen(function*() {
      yield* Effect.promise(() => ensureDatabases(serverUrl, [database]))
      yield* behaviour.pipe(Effect.provide(storeLayer(Option.some(Redacted.make(`${serverUrl}/${database}`)))))
    }), { timeout: 60_000 })
})
