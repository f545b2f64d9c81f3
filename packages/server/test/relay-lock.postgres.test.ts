/**
 * The distributed mode, two workers: on PostgreSQL one outbox relay publishes at a time (a
 * transaction-level advisory lock, Relay.ts), so two workers do not both publish every
 * row. While another session holds the relay's lock (a relay mid-publish on another
 * node), this node's relay publishes nothing; once it is released the rows go out.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { dropDatabases, ensureDatabases } from "../scripts/cluster/cluster.ts"
import { Relay } from "../src/events/Relay.ts"
import { ulid } from "../src/platform/Ids.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgresAdminUrl } from "./support/TestServer.ts"
import { eventually } from "./support/webhooks-receiver.ts"
import { append, buildServices, confirmedEvent, newAccount } from "./support/webhooks-services.ts"

const serverUrl = postgresAdminUrl.replace(/\/[^/]*$/, "")
const database = `pps_test_relaylock_${ulid().toLowerCase()}`
const databaseUrl = `${serverUrl}/${database}`

describe.skipIf(!postgresAvailable)("the outbox relay on PostgreSQL: one relay at a time", () => {
  beforeAll(() => ensureDatabases(serverUrl, [database]), 60_000)
  afterAll(() => dropDatabases(serverUrl, [database]), 60_000)

  it.live("a relay does not publish while another holds the relay lock, and does once it is free", () =>
    Effect.gen(function*() {
      const node = yield* buildServices({
        databaseUrl: Option.some(Redacted.make(databaseUrl)),
        apiKeyPepper: Option.some(Redacted.make("test-pepper-0123456789abcdef0123456789abcdef")),
        walletKek: Option.some(Redacted.make(Buffer.alloc(32, 7).toString("base64"))),
        adminToken: Option.some(Redacted.make("adm_test_token_0123456789abcdef0123456789")),
        eventRelayPollMs: 50
      })
      const sql = Context.get(node.services, SqlClient.SqlClient)
      const unpublished = sql<{ readonly count: string }>`SELECT count(*)::text AS count FROM events WHERE published_at IS NULL`.pipe(
        Effect.map((rows) => Number(rows[0]?.count ?? "0")),
        Effect.orDie
      )
      const account = yield* newAccount(node.services, `relaylock-${ulid().toLowerCase().slice(-6)}`)
      const other = Context.get(yield* Layer.build(PgClient.layer({ url: Redacted.make(databaseUrl) })), SqlClient.SqlClient)
      // Another "relay" holds the lock for the whole block: this node's relay loop (polling
      // every 50 ms) and an explicit round both leave the rows alone.
      yield* other.withTransaction(Effect.gen(function*() {
        yield* other`SELECT pg_advisory_xact_lock(46630002)`
        yield* append(node.services, [0, 1, 2].map((i) => confirmedEvent(account.accountId, account.handle, "test", `tr_lock_${i}`)))
        yield* Effect.sleep(500)
        assert.strictEqual(yield* Context.get(node.services, Relay).runOnce, 0)
        assert.strictEqual(yield* unpublished, 3, "nothing published while the lock is held elsewhere")
      })).pipe(Effect.orDie)
      // Released with its transaction: the loop publishes them.
      yield* eventually(unpublished.pipe(Effect.map((count) => (count === 0 ? true : undefined))), "the rows published")
    }).pipe(Effect.scoped), { timeout: 60_000 })
})
