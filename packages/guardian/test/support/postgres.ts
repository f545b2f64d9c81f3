/**
 * The machine's PostgreSQL server for the distributed-mode targets: a fresh database per
 * guardian, dropped afterwards. Like the server's suites, CI sets PPS_REQUIRE_POSTGRES=1
 * so an unreachable server fails the run; locally it skips those targets with a warning.
 */
import * as net from "node:net"
import { randomBytes } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"

export const postgresAdminUrl = process.env["PPS_TEST_POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres"

const isReachable = (): Promise<boolean> =>
  new Promise((resolve) => {
    const url = new URL(postgresAdminUrl)
    const socket = net.connect({ host: url.hostname, port: Number(url.port || 5432) })
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(1_000, () => done(false))
    socket.once("connect", () => done(true))
    socket.once("error", () => done(false))
  })

export const postgresAvailable = await isReachable()

if (!postgresAvailable) {
  if (process.env["PPS_REQUIRE_POSTGRES"] === "1") {
    throw new Error(`PostgreSQL is required (PPS_REQUIRE_POSTGRES=1) but ${postgresAdminUrl} does not answer`)
  }
  console.warn(`\n*** PostgreSQL at ${postgresAdminUrl} does not answer: SKIPPING the guardian's PostgreSQL targets ***\n`)
}

/** Creates a fresh database and drops it when the scope closes; yields its URL. */
export const freshPostgresDatabase = Effect.gen(function*() {
  const name = `pps_guardian_test_${randomBytes(6).toString("hex")}`
  const admin = PgClient.layer({ url: Redacted.make(postgresAdminUrl) })
  const run = (statement: string) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(statement)
    }).pipe(Effect.provide(admin), Effect.orDie)
  yield* Effect.acquireRelease(run(`CREATE DATABASE ${name}`), () => run(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
  const url = new URL(postgresAdminUrl)
  url.pathname = `/${name}`
  return url.toString()
})
