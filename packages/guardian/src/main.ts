/**
 * `pnpm guardian`: the guardian as its own process. It serves the RPC group on
 * `GUARDIAN_HOST:GUARDIAN_PORT` (default 127.0.0.1:8090) behind GUARDIAN_SHARED_SECRET,
 * with its own database (DATA_DIR/guardian, or GUARDIAN_DATABASE_URL) and its own
 * secret. SIGTERM/SIGINT close the listener, the sweepers and the database in order;
 * a SIGKILL loses nothing that was answered (every decision is committed first).
 *
 * The api server's embedded default starts this same entry as its child process, with
 * GUARDIAN_EXIT_WITH_PARENT set: the guardian then stops by itself once the server is gone.
 *
 * `pnpm guardian cancel-rotation …` instead submits one signed veto and exits (src/cancelRotation.ts).
 *
 * @since 0.1.0
 */
import { createServer } from "node:http"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Config, Effect, Layer, Logger, References } from "effect"
import { HttpRouter } from "effect/http"
import { run as runCancelRotation } from "./cancelRotation.ts"
import { Guardian } from "./Guardian.ts"
import * as GuardianConfig from "./GuardianConfig.ts"
import { layer as guardianLayer } from "./GuardianLive.ts"
import * as Lease from "./Lease.ts"
import { routes } from "./GuardianServer.ts"
import * as SpanLog from "./SpanLog.ts"
import * as StatementLog from "./StatementLog.ts"

const logLevels = ["Trace", "Debug", "Info", "Warn", "Error"] as const

const MainLive = Layer.unwrap(
  Effect.gen(function*() {
    const options = yield* GuardianConfig.options
    const listener = yield* GuardianConfig.listener
    const announce = Layer.effectDiscard(Effect.gen(function*() {
      const guardian = yield* Guardian
      yield* Effect.logInfo("guardian started").pipe(Effect.annotateLogs({
        listen: `http://${listener.host}:${listener.port}`,
        database: options.database._tag,
        signer: guardian.info.signer,
        chains: (options.chains ?? []).map((chain) => chain.chainId.toString())
      }))
    }))
    // On PostgreSQL several guardian processes may share the database: one serves, the
    // others wait for its lease (Lease.ts) before building anything.
    const lease = options.database._tag === "postgres"
      ? Lease.layer({ url: options.database.url, host: listener.host, port: listener.port })
      : Layer.empty
    return HttpRouter.serve(routes(listener.sharedSecret), { disableListenLog: true, disableLogger: true }).pipe(
      Layer.merge(announce),
      Layer.provide(NodeHttpServer.layer(createServer, { host: listener.host, port: listener.port })),
      Layer.provide(guardianLayer(options)),
      Layer.provide(lease)
    )
  })
)

/** How often the guardian checks that it was not re-parented (its parent died). */
const parentPollMs = 1_000
/** After asking itself to stop, how long graceful shutdown may take before a hard exit. */
const orphanExitDeadlineMs = 15_000

/**
 * Resolves when the parent is gone: the parent holds the write end of our stdin pipe,
 * and the kernel closes it whatever way the parent dies (SIGKILL included); a changed
 * ppid catches a parent that handed its stdin on.
 */
const parentGone = Effect.callback<void>((resume) => {
  const initialParentPid = process.ppid
  const onGone = () => resume(Effect.void)
  process.stdin.once("end", onGone)
  process.stdin.once("close", onGone)
  process.stdin.once("error", onGone)
  process.stdin.resume()
  const timer = setInterval(() => {
    if (process.ppid !== initialParentPid) onGone()
  }, parentPollMs)
  timer.unref()
  return Effect.sync(() => {
    clearInterval(timer)
    process.stdin.removeListener("end", onGone)
    process.stdin.removeListener("close", onGone)
    process.stdin.removeListener("error", onGone)
    process.stdin.destroy()
  })
})

/**
 * GUARDIAN_EXIT_WITH_PARENT: once the parent is gone, SIGTERM to ourselves, so the usual
 * graceful shutdown runs (listener, sweepers, database, data-dir lock); a shutdown that
 * hangs is cut short, because a leftover guardian would keep its lock from the next one.
 */
const ExitWithParentLive = Layer.unwrap(Effect.gen(function*() {
  if (!(yield* GuardianConfig.exitWithParent)) return Layer.empty
  return Layer.effectDiscard(Effect.forkScoped(parentGone.pipe(
    Effect.andThen(Effect.logWarning("guardian: parent process gone, stopping")),
    Effect.andThen(Effect.sync(() => {
      setTimeout(() => process.exit(1), orphanExitDeadlineMs).unref()
      process.kill(process.pid, "SIGTERM")
    }))
  )))
}))

const LoggingLive = Layer.unwrap(Effect.gen(function*() {
  const level = yield* Config.Literals(logLevels, "LOG_LEVEL").pipe(Config.withDefault("Info" as const))
  return Layer.mergeAll(Logger.layer([Logger.consoleJson]), Layer.succeed(References.MinimumLogLevel, level))
}))

// Everything the guardian writes (its secret, its database) is for it alone.
process.umask(0o077)

const reportFailure = (what: string) => (cause: Cause.Cause<unknown>) =>
  Effect.sync(() => {
    const failure = Cause.squash(cause)
    process.stderr.write(`\npps-guardian: ${what}: ${failure instanceof Error ? failure.message : String(failure)}\n`)
    process.exitCode = 1
  })

// `pnpm guardian cancel-rotation …` relays a veto (src/cancelRotation.ts); anything else starts the guardian.
if (process.argv[2] === "cancel-rotation") {
  runCancelRotation(process.argv.slice(3)).pipe(
    Effect.flatMap((hash) => Effect.sync(() => process.stdout.write(`${hash}\n`))),
    Effect.catchCause(reportFailure("cancel-rotation failed")),
    Effect.provide(LoggingLive),
    NodeRuntime.runMain
  )
} else {
  Layer.launch(Layer.merge(MainLive, ExitWithParentLive)).pipe(
    Effect.catchCause(reportFailure("cannot start")),
    Effect.provide(LoggingLive),
    // Spans off unless PPS_SPAN_LOG asks for them (packages/server/src/main.ts).
    SpanLog.fromEnvironment("guardian"),
    // Statements counted only when PPS_STATEMENT_LOG asks (StatementLog.ts).
    StatementLog.fromEnvironment("guardian"),
    NodeRuntime.runMain
  )
}
