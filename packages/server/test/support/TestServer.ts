/**
 * A whole server for tests: both listeners on real loopback sockets (port 0),
 * real PGlite in a fresh temporary directory (or the PostgreSQL server, with
 * `databaseUrl`), and every log line captured after redaction, so tests can
 * search them.
 */
import * as fs from "node:fs"
import { createServer } from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Layer, Logger, Option, Redacted, References } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { type AppConfigShape, AppConfig } from "../../src/config/AppConfig.ts"
import { formatLogLine } from "../../src/platform/Logging.ts"
import { Secrets } from "../../src/platform/Secrets.ts"
import { AdminApp, PublicApp, ServicesLive } from "../../src/Server.ts"

export interface TestServerShape {
  readonly baseUrl: string
  readonly adminUrl: string
  readonly adminToken: string
  readonly dataDir: string
  /** Every log line written so far, after redaction. */
  readonly logs: ReadonlyArray<string>
  /** The server's services, to inspect state directly (e.g. dump the database). */
  readonly services: Context.Context<Layer.Success<typeof ServicesLive>>
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
  adminToken: Option.none(),
  apiKeyPepper: Option.none(),
  walletKek: Option.none(),
  rateLimitPerSecond: 1_000,
  rateLimitBurst: 1_000,
  apiKeyCacheTtlMs: 30_000,
  apiKeyUsageFlushMs: 200,
  shutdownTimeoutMs: 1_000,
  logLevel: "Info",
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
  readonly config?: Partial<AppConfigShape>
  readonly extraPublic?: Layer.Layer<never, never, R>
} = {}) =>
  Layer.effect(
    TestServer,
    Effect.gen(function*() {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-test-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true })))
      const logs: Array<string> = []
      const capture = Logger.make((options) => {
        logs.push(formatLogLine(options))
      })
      const loggerLayer = Layer.mergeAll(Logger.layer([capture]), Layer.succeed(References.MinimumLogLevel, "Debug"))
      const config = testConfig(dataDir, options.config)
      const services = yield* Layer.build(
        ServicesLive.pipe(Layer.provideMerge(Layer.succeed(AppConfig, config)), Layer.provide(loggerLayer))
      )
      const serve = <E, R>(app: Layer.Layer<never, E, R>) =>
        Layer.build(
          HttpRouter.serve(app, { disableListenLog: true, disableLogger: true }).pipe(
            Layer.provideMerge(NodeHttpServer.layer(createServer, { host: "127.0.0.1", port: 0 })),
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
