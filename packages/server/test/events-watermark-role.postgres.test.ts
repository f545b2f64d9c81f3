/**
 * D58's watermark (`EventStore.visibleFrom`) read by a role that is neither superuser nor a
 * member of pg_read_all_stats, as a production api role is: it still sees every session's
 * `backend_xid` in pg_stat_activity (PostgreSQL shows `datid`, `pid`, `usesysid`,
 * `application_name`, `backend_xid` and `backend_xmin` to every role, and hides only the rest),
 * so the service needs no grant. Another role's transaction, open in the database, holds the
 * watermark at its id even after a later transaction committed (moving the snapshot's xmax past
 * it): were its id hidden, the watermark would be that xmax and a stream could hand out the
 * later event before the open one commits, then skip it.
 */
import { assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Context, Deferred, Effect, Fiber, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { EventStore } from "../src/events/EventStore.ts"
import { ulid } from "../src/platform/Ids.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgresAdminUrl } from "./support/TestServer.ts"

const urlFor = (role: string, database: string) => {
  const url = new URL(postgresAdminUrl)
  url.username = role
  url.password = ""
  url.pathname = `/${database}`
  return url.toString()
}

/** Runs statements as the administrator of the test server (trust authentication, as .ci/run sets it up). */
const asAdmin = (statements: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (const statement of statements) yield* sql.unsafe(statement)
  }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(postgresAdminUrl) })), Effect.orDie)

const currentXid = (sql: SqlClient.SqlClient) =>
  sql<{ readonly xid: string }>`SELECT pg_current_xact_id()::text AS xid`.pipe(Effect.map((rows) => BigInt(rows[0]!.xid)))

describe.skipIf(!postgresAvailable)("the D58 watermark under a role without pg_read_all_stats", () => {
  it.live("another role's open transaction holds it back at its id", () =>
    Effect.gen(function*() {
      const suffix = ulid().toLowerCase()
      const [service, other, database] = [`pps_wm_service_${suffix}`, `pps_wm_other_${suffix}`, `pps_wm_${suffix}`]
      yield* Effect.acquireRelease(
        asAdmin([`CREATE ROLE ${service} LOGIN NOSUPERUSER`, `CREATE ROLE ${other} LOGIN NOSUPERUSER`, `CREATE DATABASE ${database} OWNER ${service}`]),
        () => asAdmin([`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`, `DROP ROLE IF EXISTS ${service}`, `DROP ROLE IF EXISTS ${other}`])
      )
      // Connections built for the test's scope: the pools stay open until it closes.
      const connect = (role: string) => Layer.build(PgClient.layer({ url: Redacted.make(urlFor(role, database)) })).pipe(
        Effect.map((context) => Context.get(context, SqlClient.SqlClient))
      )
      const serviceSql = yield* connect(service)
      const store = Context.get(yield* Layer.build(EventStore.layer.pipe(Layer.provide(Layer.succeed(SqlClient.SqlClient, serviceSql)))), EventStore)
      const [privileges] = yield* serviceSql<{ readonly superuser: boolean; readonly reads_all_stats: boolean }>`
        SELECT rolsuper AS superuser, pg_has_role(current_user, 'pg_read_all_stats', 'USAGE') AS reads_all_stats
        FROM pg_roles WHERE rolname = current_user`
      assert.deepStrictEqual(privileges, { superuser: false, reads_all_stats: false })

      // The other role's transaction takes an id and stays open until released.
      const otherSql = yield* connect(other)
      const opened = yield* Deferred.make<bigint>()
      const release = yield* Deferred.make<void>()
      // Released first when the test ends, failed or not, so the connections close at once.
      yield* Effect.addFinalizer(() => Deferred.succeed(release, undefined))
      const holding = yield* Effect.forkChild(otherSql.withTransaction(Effect.gen(function*() {
        yield* Deferred.succeed(opened, yield* currentXid(otherSql))
        yield* Deferred.await(release)
      })))
      const open = yield* Deferred.await(opened)
      // A later transaction of the service's role commits: the snapshot's xmax moves past `open`.
      const later = yield* serviceSql.withTransaction(currentXid(serviceSql))
      assert.isTrue(later > open)
      assert.strictEqual((yield* store.visibleFrom).txId, open.toString())

      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holding)
      assert.isTrue(BigInt((yield* store.visibleFrom).txId) > later)
    }).pipe(Effect.scoped), { timeout: 30_000 })
})
