/**
 * D7 across nodes: in the distributed mode the token buckets live in
 * PostgreSQL, so two api nodes together allow a key its configured burst and rate, not
 * twice that, even when their requests race.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Clock, Context, Effect, Layer, Option, Redacted } from "effect"
import { dropDatabases, ensureDatabases } from "../scripts/cluster/cluster.ts"
import { AppConfig } from "../src/config/AppConfig.ts"
import { RateLimiter } from "../src/http/RateLimiter.ts"
import { MigrationsLive, SqlLive } from "../src/platform/Database.ts"
import { DataDir } from "../src/platform/DataDir.ts"
import { ulid } from "../src/platform/Ids.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgresAdminUrl, testConfig } from "./support/TestServer.ts"

const serverUrl = postgresAdminUrl.replace(/\/[^/]*$/, "")
const database = `pps_test_ratelimit_${ulid().toLowerCase()}`
const burst = 5
const perSecond = 1

const dataDirs: Array<string> = []

/** One api node's limiter: its own data directory and connection pool to the shared database. */
const nodeLimiter = () =>
  RateLimiter.layer.pipe(
    Layer.provideMerge(MigrationsLive),
    Layer.provideMerge(SqlLive),
    Layer.provideMerge(DataDir.layer),
    Layer.provideMerge(Layer.succeed(AppConfig, testConfig(dataDirs[dataDirs.push(fs.mkdtempSync(path.join(os.tmpdir(), "pps-ratelimit-"))) - 1]!, {
      databaseUrl: Option.some(Redacted.make(`${serverUrl}/${database}`)),
      rateLimitBurst: burst,
      rateLimitPerSecond: perSecond
    })))
  )

const twoNodes = Effect.gen(function*() {
  const first = yield* Layer.build(nodeLimiter())
  const second = yield* Layer.build(nodeLimiter())
  return [Context.get(first, RateLimiter), Context.get(second, RateLimiter)] as const
})

describe.skipIf(!postgresAvailable)("rate limits shared by the api nodes (PostgreSQL)", () => {
  beforeAll(() => ensureDatabases(serverUrl, [database]), 60_000)
  afterAll(async () => {
    await dropDatabases(serverUrl, [database])
    for (const dir of dataDirs) fs.rmSync(dir, { recursive: true, force: true })
  }, 60_000)

  it.live("two nodes together allow one burst, then refuse with a retry delay", () =>
    Effect.scoped(Effect.gen(function*() {
      const [first, second] = yield* twoNodes
      const key = `key_${ulid()}`
      const decisions = []
      for (let index = 0; index < burst; index++) decisions.push(yield* (index % 2 === 0 ? first : second).take(key))
      assert.deepStrictEqual(decisions.map((decision) => decision.allowed), [true, true, true, true, true])
      const refused = yield* second.take(key)
      assert.isFalse(refused.allowed)
      assert.isAtLeast(refused.allowed ? 0 : refused.retryAfterSeconds, 1)
      assert.isFalse((yield* first.take(key)).allowed)
      // Another key has its own bucket.
      assert.isTrue((yield* first.take(`key_${ulid()}`)).allowed)
    })), { timeout: 60_000 })

  it.live("racing requests on both nodes never take more than the bucket holds", () =>
    Effect.scoped(Effect.gen(function*() {
      const [first, second] = yield* twoNodes
      const key = `key_${ulid()}`
      const startedMs = yield* Clock.currentTimeMillis
      const decisions = yield* Effect.forEach(
        Array.from({ length: 30 }, (_, index) => (index % 2 === 0 ? first : second)),
        (limiter) => limiter.take(key),
        { concurrency: "unbounded" }
      )
      const elapsedSeconds = ((yield* Clock.currentTimeMillis) - startedMs) / 1000
      const allowed = decisions.filter((decision) => decision.allowed).length
      // The burst, plus what refilled while the race ran (one token a second).
      assert.isAtLeast(allowed, burst)
      assert.isAtMost(allowed, burst + Math.floor(elapsedSeconds * perSecond))
    })), { timeout: 60_000 })
})
