/**
 * A whole server for tests: both listeners on real loopback sockets (port 0),
 * real PGlite in a fresh temporary directory (or the PostgreSQL server, with
 * `databaseUrl`), and every log line captured after redaction, so tests can
 * search them.
 */
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Logger, Option, Redacted, References } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { SqlClient } from "effect/sql"
import { pgliteTemplate } from "../../../../scripts/pgliteTemplate.ts"
import { ulid } from "../../src/platform/Ids.ts"
import { type AppConfigShape, AppConfig } from "../../src/config/AppConfig.ts"
import { formatLogLine } from "../../src/platform/Logging.ts"
import { Secrets } from "../../src/platform/Secrets.ts"
import { AdminApp, PublicApp, ServicesLive } from "../../src/Server.ts"
import { makeNodeServer } from "../../src/http/Envelope.ts"

export interface TestServerShape {
  readonly baseUrl: string
  readonly adminUrl: string
  readonly adminToken: string
  readonly dataDir: string
  /** Every log line written so far, after redaction. */
  readonly logs: ReadonlyArray<string>
  /** The server's services, to inspect state directly (e.g. dump the database). */
  readonly services: Context.Context<Layer.Success<typeof ServicesLive> | AppConfig>
}

/**
 * Which database a test server runs on: embedded PGlite in a temporary
 * directory, or a fresh database on the PostgreSQL server (created for the test
 * server and dropped after it).
 */
export type DatabaseTarget = { readonly name: "pglite" } | { readonly name: "postgres" }
export const pglite: DatabaseTarget = { name: "pglite" }
export const postgres: DatabaseTarget = { name: "postgres" }

/** The maintenance database on the machine's PostgreSQL server (trust auth for `postgres`). */
export const postgresAdminUrl = process.env["PPS_TEST_POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres"

/** Whether the PostgreSQL server answers a TCP connection within a second. */
export const isPostgresReachable = (): Promise<boolean> =>
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

/** Creates a fresh database (for one test server, or a test's nodes) and drops it when the scope closes. */
export const freshPostgresDatabase = Effect.gen(function*() {
  const name = `pps_test_${ulid().toLowerCase()}`
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

/** Secrets that distributed mode requires from configuration (fixed test values; also the rate benchmark's `--postgres`). */
export const distributedSecrets = {
  apiKeyPepper: Option.some(Redacted.make("test-pepper-0123456789abcdef0123456789abcdef")),
  walletKek: Option.some(Redacted.make(Buffer.alloc(32, 7).toString("base64"))),
  adminToken: Option.some(Redacted.make("adm_test_token_0123456789abcdef0123456789"))
}

export class TestServer extends Context.Service<TestServer, TestServerShape>()("test/TestServer") {}

export const testConfig = (dataDir: string, overrides: Partial<AppConfigShape> = {}): AppConfigShape => ({
  host: "127.0.0.1",
  port: 0,
  adminHost: "127.0.0.1",
  adminPort: 0,
  dataDir,
  databaseUrl: Option.none(),
  databasePoolMax: 5,
  embeddedDatabaseThread: "caller",
  // The run's initialised cluster (scripts/pgliteTemplate.ts, the projects' global setup).
  embeddedDatabaseTemplate: Option.fromNullishOr(pgliteTemplate()),
  // The default; the transfers suite on PostgreSQL and the invariants (canary, conservation) seal
  // on the thread (transfers.postgres.test.ts, transfers-invariants.test.ts), and
  // transferSealer.test.ts covers the thread alone.
  sealingThread: "caller",
  adminToken: Option.none(),
  apiKeyPepper: Option.none(),
  walletKek: Option.none(),
  walletKekAccepted: Option.none(),
  rateLimitPerSecond: 1_000,
  rateLimitBurst: 1_000,
  apiKeyCacheTtlMs: 30_000,
  apiKeyUsageFlushMs: 200,
  shutdownTimeoutMs: 1_000,
  logLevel: "Info",
  rpcUrlTestnet: Option.none(),
  migrateContracts: false,
  rpcUrlMainnet: Option.none(),
  chainBlockTimeMs: 100,
  chainConfirmations: 1,
  relayerCount: 4,
  // The production default (unbatched), so the suites run the path deployments run;
  // settlement.test.ts's batching test asks for batches itself.
  settlementBatchMax: 1,
  relayerKeysTestnet: Option.none(),
  relayerKeysMainnet: Option.none(),
  guardianUrl: Option.none(),
  guardianSharedSecret: Option.none(),
  guardianStartTimeoutMs: 60_000,
  // The production default is a guardian child process (test/embeddedGuardian.test.ts); the
  // in-process guardian saves each test its start-up.
  guardianInProcess: true,
  // Anvil stays in the test worker's process group: a test runner's Ctrl-C stops it with the worker.
  embeddedChainOwnProcessGroup: false,
  // The production default; tests that steer mining themselves (evm_setIntervalMining) ask for
  // `interval`.
  embeddedChainMining: "on-demand",
  transferCreateTimeoutMs: 5_000,
  // Shedding off in the functional suites (some race 100 transfers at once on purpose);
  // admission.test.ts turns it on with its own limits.
  transferAdmissionTargetMs: 0,
  transferAdmissionMaxInFlight: 1_024,
  attestationLifetimeSeconds: 600,
  approvalWindowMs: 24 * 60 * 60 * 1000,
  agentsPerAccountMax: 100,
  approvalSweepIntervalMs: 1_000,
  vetoRelayIntervalMs: 15_000,
  faucetKeyTestnet: Option.none(),
  natsUrl: Option.none(),
  natsStream: "PPS_EVENTS",
  natsSubjectPrefix: "events",
  eventRelayPollMs: 100,
  eventRelayLingerMs: 50,
  eventRetentionDays: 30,
  eventStreamMaxLifetimeMs: 60 * 60 * 1000,
  webhookAllowInsecureLoopback: true,
  webhookAllowedPrivateCidrs: [],
  webhookCaFile: Option.none(),
  webhookDispatchPollMs: 200,
  webhookConcurrency: 16,
  webhookSecretOverlapSeconds: 86_400,
  ...overrides
})

const urlOf = (context: Context.Context<HttpServer.HttpServer>) => {
  const address = Context.get(context, HttpServer.HttpServer).address
  if (address._tag === "UnixPathAddress") throw new Error("expected a TCP address")
  return `http://127.0.0.1:${address.port}`
}

/**
 * Starts a server; `extraPublic` adds routes to the public listener (test-only
 * endpoints that exercise shared middleware).
 */
export const makeTestServer = <R = never>(options: {
  readonly database?: DatabaseTarget
  readonly config?: Partial<AppConfigShape>
  readonly extraPublic?: Layer.Layer<never, never, R>
  /** A data directory (and, on PostgreSQL, a database URL) the caller owns and keeps: a restart on the same state. */
  readonly dataDir?: string
  readonly databaseUrl?: string
} = {}) =>
  Layer.effect(
    TestServer,
    Effect.gen(function*() {
      const dataDir = options.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), "pps-test-"))
      if (options.dataDir === undefined) {
        yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true })))
      }
      const logs: Array<string> = []
      const capture = Logger.make((options) => {
        logs.push(formatLogLine(options))
      })
      const loggerLayer = Layer.mergeAll(Logger.layer([capture]), Layer.succeed(References.MinimumLogLevel, "Debug"))
      const database = options.database ?? pglite
      const config = database.name === "postgres"
        ? testConfig(dataDir, {
          databaseUrl: Option.some(Redacted.make(options.databaseUrl ?? (yield* freshPostgresDatabase))),
          ...distributedSecrets,
          ...options.config
        })
        : testConfig(dataDir, options.config)
      const services = yield* Layer.build(
        ServicesLive.pipe(Layer.provideMerge(Layer.succeed(AppConfig, config)), Layer.provide(loggerLayer))
      )
      const serve = <E, R>(app: Layer.Layer<never, E, R>) =>
        Layer.build(
          HttpRouter.serve(app, { disableListenLog: true, disableLogger: true }).pipe(
            Layer.provideMerge(NodeHttpServer.layer(makeNodeServer, { host: "127.0.0.1", port: 0 })),
            Layer.provide(Layer.succeedContext(services)),
            Layer.provide(loggerLayer)
          ) as Layer.Layer<HttpServer.HttpServer, never, never>
        )
      const publicApp: Layer.Layer<never, unknown, unknown> = options.extraPublic === undefined
        ? PublicApp
        : Layer.mergeAll(PublicApp, options.extraPublic)
      const publicServer = yield* serve(publicApp)
      const adminServer = yield* serve(AdminApp)
      return {
        baseUrl: urlOf(publicServer),
        adminUrl: urlOf(adminServer),
        adminToken: Redacted.value(Context.get(services, Secrets).adminToken),
        dataDir,
        logs,
        services
      }
    })
  )
