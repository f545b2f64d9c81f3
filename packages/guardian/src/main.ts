/**
 * `pnpm guardian`: the guardian as its own process. It serves the RPC group on
 * `GUARDIAN_HOST:GUARDIAN_PORT` (default 127.0.0.1:8090) behind GUARDIAN_SHARED_SECRET,
 * with its own database (DATA_DIR/guardian, or GUARDIAN_DATABASE_URL) and its own
 * secret. SIGTERM/SIGINT close the listener, the sweepers and the database in order;
 * a SIGKILL loses nothing that was answered (every decision is committed first).
 *
 * @since 0.1.0
 */
import { createServer } from "node:http"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Cause, Config, Effect, Layer, Logger, References } from "effect"
import { HttpRouter } from "effect/http"
import { Guardian } from "./Guardian.ts"
import * as GuardianConfig from "./GuardianConfig.ts"
import { layer as guardianLayer } from "./GuardianLive.ts"
import { routes } from "./GuardianServer.ts"

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
    return HttpRouter.serve(routes(listener.sharedSecret), { disableListenLog: true, disableLogger: true }).pipe(
      Layer.merge(announce),
      Layer.provide(NodeHttpServer.layer(createServer, { host: listener.host, port: listener.port })),
      Layer.provide(guardianLayer(options))
    )
  })
)

const LoggingLive = Layer.unwrap(Effect.gen(function*() {
  const level = yield* Config.Literals(logLevels, "LOG_LEVEL").pipe(Config.withDefault("Info" as const))
  return Layer.mergeAll(Logger.layer([Logger.consoleJson]), Layer.succeed(References.MinimumLogLevel, level))
}))

Layer.launch(MainLive).pipe(
  Effect.catchCause((cause) =>
    Effect.sync(() => {
      const failure = Cause.squash(cause)
      process.stderr.write(`\npps-guardian: cannot start: ${failure instanceof Error ? failure.message : String(failure)}\n`)
      process.exitCode = 1
    })
  ),
  Effect.provide(LoggingLive),
  NodeRuntime.runMain
)
