/**
 * Replay nonces are reserved from the database in blocks and handed out from memory
 * (TransferStore.nextNonce): never the same nonce twice for an account, whether the calls
 * come at once on one node, from two nodes sharing one PostgreSQL database, or after a
 * restart (a new store forgets its block and reserves past it).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { dropDatabases, ensureDatabases } from "../scripts/cluster/cluster.ts"
import { AppConfig } from "../src/config/AppConfig.ts"
import { MigrationsLive, SqlLive } from "../src/platform/Database.ts"
import { DataDir } from "../src/platform/DataDir.ts"
import { ulid } from "../src/platform/Ids.ts"
import { TransferStore } from "../src/transfers/TransferStore.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgresAdminUrl, testConfig } from "./support/TestServer.ts"

const serverUrl = postgresAdminUrl.replace(/\/[^/]*$/, "")
const database = `pps_test_nonces_${ulid().toLowerCase()}`
const dataDirs: Array<string> = []
const freshDir = () => dataDirs[dataDirs.push(fs.mkdtempSync(path.join(os.tmpdir(), "pps-nonces-"))) - 1]!

/** One node's store: its own data directory, on PGlite there or on the shared PostgreSQL database. */
const nodeStore = (dataDir: string, postgres: boolean) =>
  Layer.build(
    TransferStore.layer.pipe(
      Layer.provideMerge(MigrationsLive),
      Layer.provideMerge(SqlLive),
      Layer.provideMerge(DataDir.layer),
      Layer.provideMerge(Layer.succeed(
        AppConfig,
        testConfig(dataDir, postgres ? { databaseUrl: Option.some(Redacted.make(`${serverUrl}/${database}`)) } : {})
      ))
    )
  ).pipe(Effect.map((context) => Context.get(context, TransferStore)))

/**
 * `count` nonces for two accounts, from `stores` in turn: all requested at once (each call finds
 * no block yet and reserves one), or one after another (most are handed out from a block).
 */
const take = (stores: ReadonlyArray<TransferStore["Service"]>, count: number, concurrency: "unbounded" | 1) =>
  Effect.forEach(
    Array.from({ length: count }, (_, i) => i),
    (i) => stores[i % stores.length]!.nextNonce(i % 3 === 0 ? "acct_b" : "acct_a", "test").pipe(Effect.map((nonce) => [i % 3 === 0 ? "b" : "a", nonce] as const)),
    { concurrency }
  )

const assertUnique = (taken: ReadonlyArray<readonly [string, bigint]>) => {
  for (const account of ["a", "b"]) {
    const nonces = taken.filter(([owner]) => owner === account).map(([, nonce]) => nonce)
    assert.strictEqual(new Set(nonces).size, nonces.length, `account ${account}: a nonce handed out twice`)
  }
}

afterAll(() => {
  for (const dir of dataDirs) fs.rmSync(dir, { recursive: true, force: true })
})

describe("replay nonces handed out in blocks", () => {
  it.live("PGlite: concurrent calls, then a restart, never repeat a nonce", () =>
    Effect.gen(function*() {
      const dataDir = freshDir()
      const first = yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* nodeStore(dataDir, false)
        // More than one block per account, one after another, then all at once.
        return [...yield* take([store], 150, 1), ...yield* take([store], 100, "unbounded")]
      }))
      const afterRestart = yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* nodeStore(dataDir, false)
        return yield* take([store], 30, 1)
      }))
      assertUnique([...first, ...afterRestart])
      const firstMax = first.filter(([owner]) => owner === "a").reduce((max, [, nonce]) => (nonce > max ? nonce : max), -1n)
      for (const [owner, nonce] of afterRestart) if (owner === "a") assert.isAbove(Number(nonce), Number(firstMax))
    }))
})

describe.skipIf(!postgresAvailable)("replay nonces handed out in blocks (PostgreSQL, two nodes)", () => {
  beforeAll(() => ensureDatabases(serverUrl, [database]), 60_000)
  afterAll(() => dropDatabases(serverUrl, [database]), 60_000)

  it.live("two nodes taking nonces for the same accounts, in turn and at once, never hand out the same one", () =>
    Effect.scoped(Effect.gen(function*() {
      const first = yield* nodeStore(freshDir(), true)
      const second = yield* nodeStore(freshDir(), true)
      assertUnique([...yield* take([first, second], 200, 1), ...yield* take([first, second], 200, "unbounded")])
    })), 60_000)
})
