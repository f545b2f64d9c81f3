/**
 * Guardian availability in the distributed deployment: several guardian processes on one
 * PostgreSQL database, one serving at a time. The serving one holds a session-level advisory lock
 * (the lease) on a connection of its own; the others wait for it on theirs. When the
 * holder dies, its connection closes and PostgreSQL releases the lock at once, so a
 * standby takes over as soon as its own start completes. Active-standby rather than
 * active-active because the guardian's sweepers and chain follower were written for one
 * process at a time; the books are safe either way (row locks), the operations simpler
 * this way.
 *
 * While waiting, a standby answers `GET /healthz` with `{"status":"standby"}` (so an
 * orchestrator sees it alive) and everything else with 503, which clients read as
 * "unavailable, try another guardian" (GuardianClient's failover). A holder that can no
 * longer prove it holds the lease (its connection failed, or a check went unanswered for
 * 5 s) exits at once: a second serving guardian is the one thing this module exists to
 * prevent.
 *
 * A holder killed on a live host releases the lease at once (the kernel closes its
 * socket). A holder whose host vanishes holds it until PostgreSQL notices the dead
 * connection: set the server's `tcp_keepalives_idle`/`_interval`/`_count` low (e.g. 5, 5,
 * 3) where that matters; the holder itself has stopped serving by then if it still runs.
 *
 * @since 0.4.0
 */
import { createServer, type Server } from "node:http"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, type Redacted, Schedule } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The advisory lock's key (a fixed number every guardian of one database agrees on).
 *
 * @since 0.4.0
 * @category constants
 */
export const leaseLockKey = 46_630_090

/** How often the holder checks that its lease connection still answers. */
const leaseCheckEveryMs = 1_000
/** A check unanswered this long counts as a lost lease (a partition hangs rather than fails). */
const leaseCheckTimeoutMs = 5_000

/** Serves the standby's answers on the guardian's address until the lease is ours. */
const standbyListener = (host: string, port: number) =>
  Effect.acquireRelease(
    Effect.callback<Server, Error>((resume) => {
      const server = createServer((request, response) => {
        const healthz = request.method === "GET" && request.url === "/healthz"
        response.writeHead(healthz ? 200 : 503, { "content-type": "application/json" })
        response.end(JSON.stringify(healthz ? { status: "standby" } : { error: "standby: another guardian holds the lease" }))
      })
      server.once("error", (error) => resume(Effect.fail(error)))
      server.listen(port, host, () => resume(Effect.succeed(server)))
    }),
    (server) =>
      Effect.callback<void>((resume) => {
        server.close(() => resume(Effect.void))
        server.closeAllConnections()
      })
  )

/**
 * Holds the lease for the layer's lifetime; built before the guardian itself, so a
 * standby builds nothing else (no migrations, no sweepers, no listener) until it serves.
 *
 * @since 0.4.0
 * @category layers
 */
export const layer = (options: { readonly url: Redacted.Redacted<string>; readonly host: string; readonly port: number }) =>
  Layer.effectDiscard(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const connection = yield* sql.reserve
      const acquired = yield* connection.execute("SELECT pg_try_advisory_lock($1) AS acquired", [leaseLockKey], undefined).pipe(
        Effect.map((rows) => rows[0]?.acquired === true)
      )
      if (!acquired) {
        yield* Effect.logInfo("guardian standby: waiting for the lease").pipe(Effect.annotateLogs("lock", leaseLockKey))
        yield* Effect.scoped(
          standbyListener(options.host, options.port).pipe(
            Effect.andThen(connection.executeRaw("SELECT pg_advisory_lock($1)", [leaseLockKey]))
          )
        )
      }
      yield* Effect.logInfo("guardian lease taken: serving")
      yield* Effect.forkScoped(
        connection.executeRaw("SELECT 1", []).pipe(
          Effect.timeoutOrElse({
            duration: leaseCheckTimeoutMs,
            orElse: () => Effect.fail(new Error(`the lease connection did not answer in ${leaseCheckTimeoutMs} ms`))
          }),
          Effect.repeat(Schedule.spaced(leaseCheckEveryMs)),
          Effect.catchCause((cause) =>
            Effect.logError("guardian lease lost: exiting so that no two guardians serve", cause).pipe(
              Effect.andThen(Effect.sync(() => process.exit(1)))
            )
          )
        )
      )
    })
  ).pipe(Layer.provide(PgClient.layer({ url: options.url, maxConnections: 1, applicationName: "pps-guardian-lease" })))
