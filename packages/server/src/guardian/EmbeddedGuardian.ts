/**
 * The embedded default's guardian: the program `pnpm guardian` runs (`@pps/guardian`'s
 * `src/main.ts`), started by the api server as its child process with the pinned node
 * (`process.execPath`), so that the api process never holds the guardian's secret.
 *
 * - **Its own directory and secret.** The child is given `DATA_DIR`; it creates
 *   `DATA_DIR/guardian/` (0700, files 0600), its secret and its PGlite there. This process
 *   never reads or writes inside that directory: it keeps its own bookkeeping (the child's
 *   pid) in `DATA_DIR/guardian.pid`, next to it.
 * - **Its channel.** Loopback TCP on a free port, authenticated by a bearer token generated
 *   here per server start and handed over in the child's environment (never its command
 *   line, which every local user can read). The child's environment is built from scratch:
 *   none of the server's own secrets, and no GUARDIAN_SECRET or GUARDIAN_DATABASE_URL.
 * - **Readiness.** The child counts as up once it answers `Info` with that token, which also
 *   proves that the port is ours and not a stranger's that won the race for it.
 * - **Supervision.** A child that dies is started again with exponential backoff (logged),
 *   on a fresh port; calls in the meantime fail as `unavailable` (retryable). Shutdown sends
 *   SIGTERM, then SIGKILL after `stopGraceMs`.
 * - **No orphans.** The child runs with GUARDIAN_EXIT_WITH_PARENT: it holds a pipe from us on
 *   its stdin and stops when that closes, which the kernel does however this process dies
 *   (SIGKILL included). It runs in its own process group, so a Ctrl-C meant for the server
 *   does not kill it behind the supervisor's back: the server stops it in order. A guardian
 *   still shutting down from a killed server is stopped at the next start (its pid file),
 *   like the embedded anvil (DevChain), before its data-directory lock could refuse us.
 * - **Its memory.** The child starts with the node flags and malloc settings the server gets
 *   from `npm start` (`ProcessMemory`, D67); the server's own malloc settings win when it has them.
 *
 * On one machine under one user this separates processes, not people: the operator (that
 * user) can still read `DATA_DIR/guardian`. The confidential deployment is the guardian on a
 * host of its own (GUARDIAN_URL).
 *
 * @since 0.1.0
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { GuardianClient, ProcessMemory } from "@pps/guardian"
import { Clock, Context, Effect, Exit, Layer, Option, Redacted, Ref, Scope } from "effect"
import { GuardianUnavailable } from "./errors.ts"

/**
 * What the embedded guardian needs from the server's configuration.
 *
 * @since 0.1.0
 * @category models
 */
export interface EmbeddedGuardianOptions {
  /** The server's data directory (absolute); the guardian keeps its own in `guardian/` below it. */
  readonly dataDir: string
  /** The chains the guardian reads (reconciliation, expiry verdicts, registered keys). */
  readonly chains: ReadonlyArray<{ readonly chainId: bigint; readonly rpcUrl: string }>
  readonly logLevel: string
  /**
   * The server's CHAIN_CONFIRMATIONS (counting the block itself). The guardian books a chain
   * event at the same depth, `GUARDIAN_CONFIRMATIONS = CHAIN_CONFIRMATIONS − 1` (it counts the
   * blocks on top), unless GUARDIAN_CONFIRMATIONS is set.
   */
  readonly confirmations: number
  /** How long a start may take: PGlite (WASM) and the mcl backend load in a few seconds, slower under load. */
  readonly startTimeoutMs: number
  /** The server's EMBEDDED_DATABASE_TEMPLATE, passed to the guardian for its own database. */
  readonly databaseTemplate?: string | undefined
}

/** SIGTERM lets the guardian close PGlite (bounded by 5 s there) and release its lock; then SIGKILL. */
const stopGraceMs = 10_000
/** First restart delay, doubled after each failed or short-lived run. */
const restartDelayMinMs = 500
/** The longest pause between restarts, so a guardian that recovers is back within this. */
const restartDelayMaxMs = 30_000
/** A run at least this long counts as healthy: the next restart starts from the shortest delay. */
const stableUptimeMs = 60_000
/** Start attempts before the server gives up starting: a lost port race or a leftover's lock deserve a retry. */
const startAttemptsMax = 3
/** Poll interval while waiting for the child to answer. */
const readyPollMs = 100
/** One readiness probe; a guardian that is up answers `Info` in milliseconds. */
const readyProbeTimeoutMs = 2_000
/** How long a leftover guardian (from a killed server) gets to stop after SIGTERM. */
const leftoverStopWaitMs = stopGraceMs
/** Bytes of the bearer token: 256 bits from the CSPRNG, base64url (43 characters, above the guardian's 32). */
const tokenBytes = 32

/** Variables passed on from the server's environment: the guardian's own tuning, and what node itself reads. */
const inheritedVariables = [
  "PATH",
  "HOME",
  "TMPDIR",
  "TZ",
  "LANG",
  "NODE_COMPILE_CACHE",
  // A measurement's CPU profile (`cpuProfileFlags`). Not NODE_OPTIONS: whatever the server's
  // environment preloads would then run inside the one process that can decrypt.
  "PPS_CPU_PROF_DIR",
  "GUARDIAN_RESERVATION_MARGIN_SECONDS",
  "GUARDIAN_DEADLINE_HORIZON_SECONDS",
  "GUARDIAN_SWEEP_INTERVAL_MS",
  "GUARDIAN_RECONCILE_INTERVAL_MS",
  "GUARDIAN_RECONCILE_RETRY_DELAY_MS",
  "GUARDIAN_CHAIN_POLL_MS",
  "GUARDIAN_CONFIRMATIONS",
  // The signers a rotation may go to without the guardian's veto: embedded, the operator sets it here.
  "GUARDIAN_APPROVED_ROTATIONS",
  // A measurement's span log (SpanLog.ts): the guardian's spans beside the server's; and its
  // count of statements (StatementLog.ts).
  "PPS_SPAN_LOG",
  "PPS_STATEMENT_LOG"
] as const

/**
 * The guardian's entry point, resolved through the workspace package (the same file as
 * `pnpm guardian`).
 *
 * @since 0.1.0
 * @category constants
 */
export const guardianMainPath = fileURLToPath(new URL("./main.ts", import.meta.resolve("@pps/guardian")))

/**
 * The file, outside the guardian's directory, that names the running child.
 *
 * @since 0.1.0
 * @category constants
 */
export const pidFileName = "guardian.pid"

interface ChildExit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

interface GuardianChild {
  readonly pid: number
  readonly process: ChildProcess
  /** The exit, once it happened. */
  readonly exitInfo: () => ChildExit | undefined
}

interface Running {
  readonly child: GuardianChild
  readonly client: GuardianClient.GuardianClientShape
  /** Holds the child and its client; closing it stops both. */
  readonly scope: Scope.Closeable
  readonly startedAtMs: number
}

/** Children still running, killed if this process exits without running its finalizers. */
const liveChildren = new Set<ChildProcess>()
let exitHookInstalled = false

const installExitHook = (): void => {
  if (exitHookInstalled) return
  exitHookInstalled = true
  process.once("exit", () => {
    for (const child of liveChildren) child.kill("SIGKILL")
  })
}

const unavailable = (message: string) => new GuardianUnavailable({ message })

/** Waits for the child's exit (at once if it has already exited). */
const awaitExit = (child: GuardianChild): Effect.Effect<ChildExit> =>
  Effect.callback<ChildExit>((resume) => {
    const known = child.exitInfo()
    if (known !== undefined) return resume(Effect.succeed(known))
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => resume(Effect.succeed({ code, signal }))
    child.process.once("exit", onExit)
    return Effect.sync(() => {
      child.process.removeListener("exit", onExit)
    })
  })

const describeExit = (exit: ChildExit): string =>
  exit.signal !== null ? `signal ${exit.signal}` : `code ${exit.code ?? "unknown"}`

const freePort: Effect.Effect<number, GuardianUnavailable> = Effect.callback<number, GuardianUnavailable>((resume) => {
  const server = net.createServer()
  server.unref()
  server.once("error", (error) => resume(Effect.fail(unavailable(`no free port for the guardian: ${error.message}`))))
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() =>
      resume(port > 0 ? Effect.succeed(port) : Effect.fail(unavailable("no free port for the guardian")))
    )
  })
})

/**
 * The depth (blocks on top) at which the embedded guardian books a chain event:
 * GUARDIAN_CONFIRMATIONS when the server's environment sets it (the child inherits it), else
 * CHAIN_CONFIRMATIONS − 1, as `childEnvironment` gives it. The embedded chain's miner buries the
 * last block with transactions this deep (D88).
 *
 * @internal
 */
export const embeddedGuardianDepth = (
  confirmations: number,
  parent: Readonly<Record<string, string | undefined>> = process.env
): number => {
  const set = parent["GUARDIAN_CONFIRMATIONS"]
  return set !== undefined && /^\d{1,6}$/.test(set) ? Number(set) : Math.max(0, confirmations - 1)
}

/**
 * The child's whole environment: the variables it inherits, and what the server decides.
 * Without GUARDIAN_CONFIRMATIONS the guardian would book credits as soon as their block is the
 * latest while the server waits CHAIN_CONFIRMATIONS blocks: a reorganisation within the
 * server's depth could then take away a credit the guardian had booked.
 *
 * @internal
 */
export const childEnvironment = (
  options: EmbeddedGuardianOptions,
  port: number,
  token: Redacted.Redacted<string>,
  parent: Readonly<Record<string, string | undefined>> = process.env
) => {
  const environment: Record<string, string> = {}
  for (const name of inheritedVariables) {
    const value = parent[name]
    if (value !== undefined) environment[name] = value
  }
  return {
    GUARDIAN_CONFIRMATIONS: String(Math.max(0, options.confirmations - 1)),
    ...ProcessMemory.withMallocEnvironment(parent),
    ...environment,
    DATA_DIR: options.dataDir,
    ...(options.databaseTemplate === undefined ? {} : { EMBEDDED_DATABASE_TEMPLATE: options.databaseTemplate }),
    GUARDIAN_HOST: "127.0.0.1",
    GUARDIAN_PORT: String(port),
    GUARDIAN_SHARED_SECRET: Redacted.value(token),
    GUARDIAN_RPC_URLS: options.chains.map((chain) => `${chain.chainId}=${chain.rpcUrl}`).join(","),
    GUARDIAN_EXIT_WITH_PARENT: "true",
    LOG_LEVEL: options.logLevel
  }
}

/** Stops the child: SIGTERM, then SIGKILL after the grace period; waits for its exit. */
const stopChild = (child: GuardianChild, pidFile: string): Effect.Effect<void> =>
  Effect.gen(function*() {
    if (child.exitInfo() === undefined) {
      child.process.kill("SIGTERM")
      const stopped = yield* Effect.timeoutOption(awaitExit(child), stopGraceMs)
      if (Option.isNone(stopped)) {
        yield* Effect.logWarning("embedded guardian did not stop after SIGTERM; killing it").pipe(
          Effect.annotateLogs({ pid: child.pid })
        )
        child.process.kill("SIGKILL")
        yield* Effect.timeoutOption(awaitExit(child), stopGraceMs)
      }
    }
    yield* Effect.sync(() => {
      // Only our own record: a restart may already have written the next child's pid.
      if (readPidFile(pidFile) === child.pid) fs.rmSync(pidFile, { force: true })
    })
  })

/**
 * Node's `--cpu-prof` flags when the environment names a directory for the profile
 * (PPS_CPU_PROF_DIR: the throughput benchmark's --cpu-prof; the profile is written when the
 * guardian stops). Sampled every 500 µs.
 *
 * @internal
 */
export const cpuProfileFlags = (environment: Readonly<Record<string, string | undefined>>): ReadonlyArray<string> => {
  const directory = environment["PPS_CPU_PROF_DIR"]
  return directory === undefined || directory === "" ? [] : ["--cpu-prof", `--cpu-prof-dir=${directory}`, "--cpu-prof-interval=500"]
}

const spawnChild = (environment: Record<string, string>, pidFile: string) =>
  Effect.acquireRelease(
    Effect.try({
      try: (): GuardianChild => {
        const flags = [
          ...ProcessMemory.nodeFlags,
          // The guardian compiles WebAssembly as this server does (D95): a test runner's short-lived
          // servers start equally short-lived guardians; `npm start` passes no such flag.
          ...ProcessMemory.webAssemblyFlags(process.execArgv),
          ...cpuProfileFlags(environment),
          "--disable-warning=ExperimentalWarning"
        ]
        const child = spawn(process.execPath, [...flags, guardianMainPath], {
          env: environment,
          // stdin: the pipe whose closing tells the guardian we are gone. Its logs go where ours go.
          stdio: ["pipe", "inherit", "inherit"],
          // Its own process group: a terminal's Ctrl-C reaches only the server, which stops it in order.
          detached: true
        })
        let exitInfo: ChildExit | undefined
        child.once("exit", (code, signal) => {
          exitInfo = { code, signal }
          liveChildren.delete(child)
        })
        // A spawn failure arrives as "error" (and then "exit"); without a listener it would be thrown.
        child.once("error", () => {
          exitInfo ??= { code: null, signal: null }
        })
        child.stdin?.on("error", () => {
          // EPIPE once the guardian has exited: nothing is ever written to it.
        })
        if (child.pid === undefined) throw new Error("the guardian process did not start")
        liveChildren.add(child)
        installExitHook()
        fs.writeFileSync(pidFile, String(child.pid), { mode: 0o600 })
        const pid = child.pid
        return { pid, process: child, exitInfo: () => exitInfo }
      },
      catch: (cause) => unavailable(`cannot start the guardian process: ${cause instanceof Error ? cause.message : String(cause)}`)
    }),
    (child) => stopChild(child, pidFile)
  )

/**
 * The inode of the socket listening on 127.0.0.1:`port` (Linux: /proc/net/tcp), if any.
 * Undefined elsewhere or when nothing listens.
 */
const listenerInode = (port: number): string | undefined => {
  let table: string
  try {
    table = fs.readFileSync("/proc/net/tcp", "utf8")
  } catch {
    return undefined
  }
  const local = `0100007F:${port.toString(16).toUpperCase().padStart(4, "0")}`
  for (const line of table.split("\n").slice(1)) {
    const fields = line.trim().split(/\s+/)
    // fields: sl, local_address, rem_address, st (0A = LISTEN), ..., inode (index 9)
    if (fields[1] === local && fields[3] === "0A") return fields[9]
  }
  return undefined
}

/**
 * Whether the socket listening on the guardian's port is the child's own. The port was free
 * when chosen, but another local process could bind it before the child does; the bearer
 * token must never go to that process (it would then hold the channel secret). Linux only:
 * where /proc is missing the check cannot be made and is skipped (docs/security.md).
 *
 * @since 0.3.0
 * @category internals
 */
export const listenerIsChilds = (pid: number, port: number): boolean | "unknown" => {
  if (!fs.existsSync("/proc/net/tcp")) return "unknown"
  const inode = listenerInode(port)
  if (inode === undefined) return false
  try {
    return fs.readdirSync(`/proc/${pid}/fd`).some((fd) => {
      try {
        return fs.readlinkSync(`/proc/${pid}/fd/${fd}`) === `socket:[${inode}]`
      } catch {
        return false
      }
    })
  } catch {
    return false
  }
}

/** Polls `Info` until the child answers, fails if it exits or the deadline passes. */
const awaitReady = (client: GuardianClient.GuardianClientShape, child: GuardianChild, port: number, startTimeoutMs: number) => {
  // The token travels with `Info`: only once the child itself listens on the port.
  const answered = Effect.sync(() => listenerIsChilds(child.pid, port)).pipe(
    Effect.flatMap((owned) =>
      owned === false
        ? Effect.succeed(false)
        : client.info.pipe(
          Effect.timeoutOption(readyProbeTimeoutMs),
          Effect.map(Option.isSome),
          Effect.catch(() => Effect.succeed(false))
        )
    )
  )
  const poll: Effect.Effect<void> = Effect.gen(function*() {
    while (!(yield* answered)) yield* Effect.sleep(readyPollMs)
  })
  const died = awaitExit(child).pipe(
    Effect.flatMap((exit) =>
      Effect.fail(unavailable(`the guardian process exited before it was ready (${describeExit(exit)}; its message is in the log above)`))
    )
  )
  return Effect.raceFirst(poll, died).pipe(
    Effect.timeoutOrElse({
      duration: startTimeoutMs,
      orElse: () => Effect.fail(unavailable(`the guardian process did not answer within ${startTimeoutMs} ms`))
    })
  )
}

/**
 * One start: a fresh port, the child, a client with our token, readiness. On failure or
 * interruption everything it made is stopped again.
 */
const launch = (options: EmbeddedGuardianOptions, token: Redacted.Redacted<string>, pidFile: string) =>
  Effect.gen(function*() {
    // A standalone scope: its life is the child's, which a restart ends before the layer's.
    const scope = yield* Scope.make()
    const start = Effect.gen(function*() {
      const port = yield* freePort
      const child = yield* Scope.provide(spawnChild(childEnvironment(options, port, token), pidFile), scope)
      const context = yield* Layer.buildWithScope(GuardianClient.GuardianClient.layerHttp(`http://127.0.0.1:${port}`, token), scope)
      const client = Context.get(context, GuardianClient.GuardianClient)
      yield* awaitReady(client, child, port, options.startTimeoutMs)
      const running: Running = { child, client, scope, startedAtMs: yield* Clock.currentTimeMillis }
      return running
    })
    return yield* start.pipe(Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : Scope.close(scope, exit))))
  })

const readPidFile = (pidFile: string): number | undefined => {
  try {
    const pid = Number.parseInt(fs.readFileSync(pidFile, "utf8"), 10)
    return Number.isInteger(pid) && pid > 0 ? pid : undefined
  } catch {
    return undefined
  }
}

/** Whether `pid` is a guardian started from our entry point (Linux: /proc; elsewhere nothing is known). */
const isGuardianProcess = (pid: number): boolean => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(guardianMainPath)
  } catch {
    return false
  }
}

/**
 * A guardian left by a server killed with SIGKILL stops by itself once it notices (its stdin
 * closes at once); one still shutting down would hold the guardian's data-directory lock, so
 * it is asked to stop and, if it lingers, killed.
 */
const stopLeftover = (pidFile: string) =>
  Effect.gen(function*() {
    const pid = readPidFile(pidFile)
    if (pid === undefined || !isGuardianProcess(pid)) return
    yield* Effect.logWarning("stopping a guardian left running by a previous server").pipe(Effect.annotateLogs({ pid }))
    yield* Effect.sync(() => process.kill(pid, "SIGTERM")).pipe(Effect.ignore)
    for (let waitedMs = 0; waitedMs < leftoverStopWaitMs && isGuardianProcess(pid); waitedMs += readyPollMs) {
      yield* Effect.sleep(readyPollMs)
    }
    if (isGuardianProcess(pid)) yield* Effect.sync(() => process.kill(pid, "SIGKILL")).pipe(Effect.ignore)
  })

const restartDelayMs = (failures: number): number => Math.min(restartDelayMinMs * 2 ** failures, restartDelayMaxMs)

/** Starts the first child, retrying a few times (a lost port race, a leftover's lock being released). */
const launchInitial = (options: EmbeddedGuardianOptions, token: Redacted.Redacted<string>, pidFile: string) =>
  Effect.gen(function*() {
    for (let attempt = 1; ; attempt++) {
      const result = yield* Effect.result(launch(options, token, pidFile))
      if (result._tag === "Success") return result.success
      if (attempt >= startAttemptsMax) return yield* Effect.fail(result.failure)
      yield* Effect.logWarning("embedded guardian did not start; retrying").pipe(
        Effect.annotateLogs({ attempt, error: result.failure.message })
      )
      yield* Effect.sleep(restartDelayMs(attempt - 1))
    }
  })

/**
 * Watches the current child; when it dies, starts another (backoff doubling from
 * `restartDelayMinMs` to `restartDelayMaxMs`, reset after a run of `stableUptimeMs`).
 */
const supervise = (
  current: Ref.Ref<Running>,
  options: EmbeddedGuardianOptions,
  token: Redacted.Redacted<string>,
  pidFile: string
): Effect.Effect<never> =>
  Effect.gen(function*() {
    let failures = 0
    for (;;) {
      const running = yield* Ref.get(current)
      const exit = yield* awaitExit(running.child)
      if ((yield* Clock.currentTimeMillis) - running.startedAtMs >= stableUptimeMs) failures = 0
      yield* Scope.close(running.scope, Exit.void)
      for (;;) {
        const delayMs = restartDelayMs(failures)
        failures++
        yield* Effect.logWarning("embedded guardian stopped; restarting").pipe(
          Effect.annotateLogs({ pid: running.child.pid, exit: describeExit(exit), restart_in_ms: delayMs })
        )
        yield* Effect.sleep(delayMs)
        // Published in the same uninterruptible step, so shutdown always finds the child to stop.
        const started = yield* Effect.uninterruptibleMask((restore) =>
          Effect.result(restore(launch(options, token, pidFile))).pipe(
            Effect.tap((result) => (result._tag === "Success" ? Ref.set(current, result.success) : Effect.void))
          )
        )
        if (started._tag === "Success") {
          yield* Effect.logInfo("embedded guardian restarted").pipe(Effect.annotateLogs({ pid: started.success.child.pid }))
          break
        }
        yield* Effect.logError("embedded guardian restart failed").pipe(Effect.annotateLogs({ error: started.failure.message }))
      }
    }
  })

/** The client the server uses: every call goes to whichever child is current. */
const delegating = (current: Ref.Ref<Running>): GuardianClient.GuardianClientShape => {
  const client = Ref.get(current).pipe(Effect.map((running) => running.client))
  return {
    info: Effect.flatMap(client, (c) => c.info),
    authorize: (request) => Effect.flatMap(client, (c) => c.authorize(request)),
    authorizeMany: (requests) => Effect.flatMap(client, (c) => c.authorizeMany(requests)),
    settle: (request) => Effect.flatMap(client, (c) => c.settle(request)),
    credit: (request) => Effect.flatMap(client, (c) => c.credit(request)),
    sync: (request) => Effect.flatMap(client, (c) => c.sync(request)),
    nonZero: (request) => Effect.flatMap(client, (c) => c.nonZero(request)),
    sealedBalance: (request) => Effect.flatMap(client, (c) => c.sealedBalance(request)),
    sealedKeyTotals: (request) => Effect.flatMap(client, (c) => c.sealedKeyTotals(request)),
    rotationVeto: (request) => Effect.flatMap(client, (c) => c.rotationVeto(request)),
    keyRotation: (request) => Effect.flatMap(client, (c) => c.keyRotation(request)),
    forgetKey: (request) => Effect.flatMap(client, (c) => c.forgetKey(request)),
    reconcile: (request) => Effect.flatMap(client, (c) => c.reconcile(request)),
    health: Effect.flatMap(client, (c) => c.health)
  }
}

/**
 * The guardian as a supervised child process, and the client to it.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: EmbeddedGuardianOptions): Layer.Layer<GuardianClient.GuardianClient, GuardianUnavailable> =>
  Layer.effect(
    GuardianClient.GuardianClient,
    Effect.gen(function*() {
      const pidFile = path.join(options.dataDir, pidFileName)
      const token = Redacted.make(randomBytes(tokenBytes).toString("base64url"))
      yield* stopLeftover(pidFile)
      // The finalizer is registered in the same step that makes the child known, and before the
      // supervisor is forked: at shutdown the supervisor is interrupted first, then the child stopped.
      const current = yield* Effect.uninterruptibleMask((restore) =>
        restore(launchInitial(options, token, pidFile)).pipe(
          Effect.flatMap((running) => Ref.make(running)),
          Effect.tap((ref) =>
            Effect.addFinalizer(() => Effect.flatMap(Ref.get(ref), (running) => Scope.close(running.scope, Exit.void)))
          )
        )
      )
      const first = yield* Ref.get(current)
      yield* Effect.logInfo("embedded guardian started").pipe(Effect.annotateLogs({ pid: first.child.pid }))
      yield* Effect.forkScoped(supervise(current, options, token, pidFile))
      return GuardianClient.GuardianClient.of(delegating(current))
    })
  )
