/**
 * `pnpm start`: the api server.
 *
 * With no configuration it runs the embedded mode: PGlite and generated secrets
 * in `DATA_DIR` (default `./.data`), the public API on 127.0.0.1:8080 and the
 * admin API on 127.0.0.1:8081, and the guardian as a child process with its own
 * directory and secret (`DATA_DIR/guardian`, which this process never opens). SIGTERM/SIGINT end the
 * open event streams at once (StopRequested: they would never finish, and their clients resume
 * against the next server), drain in-flight requests (up to `SHUTDOWN_TIMEOUT_MS`) and close
 * everything in reverse order: the listeners, the background
 * work, then the guardian child and the embedded anvil (each in a process group of its own, so a
 * signal to `npm start`'s group reaches this process alone); the process then exits 0.
 *
 * @since 0.1.0
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { SpanLog, StatementLog } from "@pps/guardian"
import { Cause, Effect, Exit, Layer, Option, Runtime } from "effect"
import { AppConfig } from "./config/AppConfig.ts"
import { DataDir } from "./platform/DataDir.ts"
import { loggingLayer } from "./platform/Logging.ts"
import { StopRequestedFromSignals } from "./platform/StopRequested.ts"
import { secretsFileName } from "./platform/Secrets.ts"
import { ListenersLive, ServicesLive } from "./Server.ts"

/**
 * The file the admin command reads to find the admin listener.
 *
 * @since 0.1.0
 * @category constants
 */
export const adminFileName = "admin.json"

/**
 * What the embedded default is (issue 45, item 4), said at every start: one machine, one user,
 * every key on it. docs/security.md ("The embedded default") says the same at length.
 *
 * @since 0.12.0
 * @category constants
 */
export const embeddedTrustNote =
  `  Embedded default: one machine, one user, every key on it. This user's files hold the\n` +
  `  custodial wallet keys with the WALLET_KEK that opens them (secrets.json), the guardian's\n` +
  `  secret and books (guardian/) and the chain: whoever runs as this user, or copies this data\n` +
  `  directory, can read every amount and move every account's funds. It is for development and\n` +
  `  tests by the one person who holds it. For confidentiality from the operator, run the guardian\n` +
  `  on its own host (GUARDIAN_URL); see docs/security.md, "The embedded default".\n\n`

const announce = Effect.gen(function*() {
  const config = yield* AppConfig
  const dataDir = yield* DataDir
  const baseUrl = `http://${config.host}:${config.port}`
  const adminUrl = `http://${config.adminHost}:${config.adminPort}`
  fs.writeFileSync(path.join(dataDir.path, adminFileName), JSON.stringify({ admin_url: adminUrl }, null, 2) + "\n", {
    mode: 0o600
  })
  const adminToken = Option.isSome(config.adminToken)
    ? "ADMIN_TOKEN (from the environment)"
    : path.join(dataDir.path, secretsFileName)
  const guardian = Option.isSome(config.guardianUrl)
    ? "own process (GUARDIAN_URL)"
    : config.guardianInProcess
    ? "inside this process (test only)"
    : `child process, its own data in ${path.join(dataDir.path, "guardian")}`
  yield* Effect.logInfo("server started").pipe(Effect.annotateLogs({
    mode: Option.isSome(config.databaseUrl) ? "distributed" : "embedded",
    guardian,
    base_url: baseUrl,
    admin_url: adminUrl,
    data_dir: dataDir.path,
    admin_credentials: adminToken
  }))
  // Humans starting the embedded server read this, not the JSON line.
  // The trust note is plain on purpose: a separate process is not a separate party.
  const trust = Option.isSome(config.guardianUrl)
    ? ""
    : Option.isNone(config.databaseUrl)
    ? embeddedTrustNote
    : `  The guardian runs as a separate process, but on this machine under this user: whoever\n` +
      `  runs the server can read its files, so the operator is still trusted with amounts.\n` +
      `  For confidentiality from the operator, run the guardian on its own host (GUARDIAN_URL).\n\n`
  process.stderr.write(
    `\nPrivate Payments Service\n  base URL:  ${baseUrl}/v1\n  admin URL: ${adminUrl}/admin (token in ${adminToken})\n` +
      `  data dir:  ${dataDir.path}\n  guardian:  ${guardian}\n\n${trust}`
  )
})

const MainLive = Layer.effectDiscard(announce).pipe(
  Layer.provideMerge(ListenersLive),
  Layer.provideMerge(ServicesLive),
  Layer.provideMerge(AppConfig.layer),
  // Built first and closed last: the signal is heard while the listeners drain.
  Layer.provideMerge(StopRequestedFromSignals)
)

const LoggingLive = Layer.unwrap(Effect.gen(function*() {
  return loggingLayer((yield* AppConfig).logLevel)
})).pipe(
  Layer.provide(AppConfig.layer)
)

/**
 * The exit code: 0 for the stop a signal asked for (the only interruption of the main fiber: the
 * runtime interrupts it on SIGTERM/SIGINT, and everything closed in order), as supervisors and
 * `npm start` read a clean stop; the runtime's own codes otherwise.
 */
const stopTeardown: Runtime.Teardown = (exit, onExit) =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(0) : Runtime.defaultTeardown(exit, onExit)

Layer.launch(MainLive).pipe(
  // Start-up refusals (data dir locked, missing secrets, bad config) get a plain
  // message and exit code 1 rather than a stack trace.
  Effect.catchCause((cause) =>
    Effect.sync(() => {
      const failure = Cause.squash(cause)
      process.stderr.write(`\npps: cannot start: ${failure instanceof Error ? failure.message : String(failure)}\n`)
      process.exitCode = 1
    })
  ),
  Effect.provide(LoggingLive),
  // Spans off, unless PPS_SPAN_LOG asks for them to be written: built and dropped they cost about
  // 5 % of the server's and the guardian's CPU per transfer (docs/benchmarks.md).
  SpanLog.fromEnvironment("server"),
  // The embedded database's statements counted only when PPS_STATEMENT_LOG asks (a measurement).
  StatementLog.fromEnvironment("server"),
  (main) => NodeRuntime.runMain(main, { teardown: stopTeardown })
)
