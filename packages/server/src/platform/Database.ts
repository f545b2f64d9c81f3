/**
 * The SQL database: PostgreSQL through `@effect/sql-pg` when `DATABASE_URL` is
 * set, otherwise embedded PGlite in `DATA_DIR/pglite`. One dialect (PostgreSQL)
 * and one set of migrations serve both.
 *
 * PGlite runs on the event loop's thread, or with `EMBEDDED_DATABASE_THREAD=own` on a worker
 * thread of its own, where its statements' work runs beside the event loop's (HTTP, webhook
 * signing, fibers) on another core (the guardian package's `DatabaseThread`, which says what
 * each costs).
 *
 * PGlite runs through `@effect/sql-pglite`, patched with pnpm's patch mechanism
 * (patches/@effect__sql-pglite@4.0.0-beta.93.patch): the published build imports
 * `effect/unstable/...` paths that effect 4.1 no longer has, and does not set
 * `driver`. The PGlite instance is the guardian package's `EmbeddedDatabase` (one
 * prepared statement per statement text, executed in one call into PGlite), owned
 * there rather than by the adapter, so closing it is bounded: the adapter's own close
 * sits in an uninterruptible finalizer that can hang after heavy use.
 *
 * Values PGlite and pg return differently (bigint as number vs bigint) are read
 * as text (`::text`) and decoded with Schema, so both behave alike.
 *
 * @since 0.1.0
 */
import * as path from "node:path"
import { PgClient } from "@effect/sql-pg"
import { PgliteClient } from "@effect/sql-pglite"
import { EmbeddedDatabase } from "@pps/guardian"
import { Effect, Layer, Option } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import { AppConfig } from "../config/AppConfig.ts"
import { DataDir } from "./DataDir.ts"
import { migrations } from "./migrations/index.ts"

/** How long closing PGlite may take before shutdown goes on without it. */
const pgliteCloseTimeoutMs = 5_000

/**
 * Embedded PGlite in a directory (or in memory with `undefined`), started from `template`
 * when the directory holds no database yet (`EMBEDDED_DATABASE_TEMPLATE`).
 *
 * @since 0.1.0
 * @category layers
 */
export const pgliteLayer = (
  dataDir: string | undefined,
  threading: EmbeddedDatabase.DatabaseThreading = "caller",
  template: string | undefined = undefined
) =>
  PgliteClient.layerFrom(
    EmbeddedDatabase.makeEmbeddedClient(dataDir, pgliteCloseTimeoutMs, EmbeddedDatabase.defaultMaintenanceSchedule, threading, template)
  )

/**
 * The SqlClient chosen by configuration.
 *
 * @since 0.1.0
 * @category layers
 */
export const SqlLive = Layer.unwrap(
  Effect.gen(function*() {
    const config = yield* AppConfig
    if (Option.isSome(config.databaseUrl)) {
      return PgClient.layer({
        url: config.databaseUrl.value,
        maxConnections: config.databasePoolMax,
        applicationName: "pps-server"
      })
    }
    const dataDir = yield* DataDir
    return pgliteLayer(path.join(dataDir.path, "pglite"), config.embeddedDatabaseThread, Option.getOrUndefined(config.embeddedDatabaseTemplate))
  })
)

/**
 * Runs the migrations that have not run yet. The migrator locks its table, so
 * several nodes starting at once on PostgreSQL run each migration once.
 *
 * @since 0.1.0
 * @category constructors
 */
export const migrate = Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: "pps_migrations" })

/**
 * Runs the migrations when the layer is built.
 *
 * @since 0.1.0
 * @category layers
 */
export const MigrationsLive = Layer.effectDiscard(
  Effect.gen(function*() {
    const ran = yield* migrate
    if (ran.length > 0) yield* Effect.logInfo("database migrated").pipe(Effect.annotateLogs("migrations", ran.map(([id, name]) => `${id}_${name}`)))
  })
)

/**
 * Whether the database answers (for `/readyz`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const ping = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`SELECT 1`
})
