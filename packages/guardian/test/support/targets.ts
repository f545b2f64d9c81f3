/**
 * The two deployments the guardian suite runs against:
 *
 * - `inProcess`: `GuardianClient.fromGuardian` over the embedded guardian on PGlite in a
 *   fresh temporary directory (the server's default);
 * - `http`: the guardian's HTTP service (`GuardianServer.routes`) on a real loopback
 *   socket over a fresh PostgreSQL database, called through `GuardianClient.layerHttp`
 *   with the shared secret (the distributed deployment).
 *
 * Each target also exposes the guardian's SqlClient so tests can dump its storage, and
 * every log line, so tests can search them.
 */
import * as fs from "node:fs"
import { createServer } from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Context, Effect, Layer, Logger, Redacted, References } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { SqlClient } from "effect/sql"
import { pgliteTemplate } from "../../../../scripts/pgliteTemplate.ts"
import { type ChainReader, GuardianClient, GuardianLive, GuardianServer, type Guardian } from "../../src/index.ts"
import { freshPostgresDatabase } from "./postgres.ts"

export type TargetName = "in-process/pglite" | "http/postgres"

export interface TestGuardianShape {
  readonly name: TargetName
  readonly client: GuardianClient.GuardianClientShape
  readonly encryptionKey: `0x${string}`
  readonly signer: `0x${string}`
  /** Every row of every guardian table, as text. */
  readonly dumpStorage: Effect.Effect<string>
  /** Raw bytes of the storage files (PGlite's directory); empty for PostgreSQL. */
  readonly storageFiles: () => Array<Buffer>
  readonly logs: ReadonlyArray<string>
  readonly sql: SqlClient.SqlClient
  /** HTTP requests the guardian's server received so far (always 0 in process). */
  readonly httpRequests: () => number
}

export class TestGuardian extends Context.Service<TestGuardian, TestGuardianShape>()("test/TestGuardian") {}

/** A fixed guardian secret: tests derive the same keys on every run. */
export const testSecret = Redacted.make(new Uint8Array(32).fill(42))
export const sharedSecret = Redacted.make("test-shared-secret-0123456789abcdef-0123456789")

const fastTiming: Partial<Guardian.Timing> = {
  reservationMarginSeconds: 0,
  sweepIntervalMs: 200,
  reconcileIntervalMs: 0,
  reconcileRetryDelayMs: 100,
  chainPollIntervalMs: 200
}

const readFilesUnder = (dir: string): Array<Buffer> => {
  const out: Array<Buffer> = []
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) out.push(...readFilesUnder(full))
    else if (entry.isFile()) out.push(fs.readFileSync(full))
  }
  return out
}

const dump = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    const tables = yield* sql<{ readonly tablename: string }>`
      SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`
    const lines: Array<string> = []
    for (const { tablename } of tables) {
      const rows = yield* sql.unsafe<{ readonly line: string }>(`SELECT row_to_json(t)::text AS line FROM "${tablename}" t`)
      for (const row of rows) lines.push(`${tablename}: ${row.line}`)
    }
    return lines.join("\n")
  }).pipe(Effect.orDie)

export const makeTarget = (
  name: TargetName,
  options: {
    readonly chains?: ReadonlyArray<ChainReader.ChainEndpoint>
    /** An existing directory (kept afterwards): restart tests run a guardian on it twice. */
    readonly dataDir?: string
    readonly timing?: Partial<Guardian.Timing>
    readonly approvedRotations?: ReadonlyArray<`0x${string}`>
  } = {}
) =>
  Layer.effect(
    TestGuardian,
    Effect.gen(function*() {
      const logs: Array<string> = []
      const capture = Logger.make((entry) => {
        logs.push(JSON.stringify(Logger.formatStructured.log(entry)))
      })
      const loggerLayer = Layer.mergeAll(Logger.layer([capture]), Layer.succeed(References.MinimumLogLevel, "Debug"))
      const dataDir = options.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), "pps-guardian-test-"))
      if (options.dataDir === undefined) {
        yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true })))
      }
      const database: GuardianLive.DatabaseOptions = name === "in-process/pglite"
        ? { _tag: "pglite", dataDir, template: pgliteTemplate() }
        : { _tag: "postgres", url: Redacted.make(yield* freshPostgresDatabase), poolMax: 8 }
      const services = yield* Layer.build(
        GuardianLive.layerWithStorage({ database, secret: testSecret, timing: { ...fastTiming, ...options.timing }, chains: options.chains ?? [],
          approvedRotations: options.approvedRotations ?? [] }).pipe(
          Layer.provide(loggerLayer)
        )
      )
      const sql = Context.get(services, SqlClient.SqlClient)
      let client: GuardianClient.GuardianClientShape
      let httpRequests = 0
      if (name === "in-process/pglite") {
        const direct = Context.get(
          yield* Layer.build(GuardianClient.GuardianClient.fromGuardian.pipe(Layer.provide(Layer.succeedContext(services)))),
          GuardianClient.GuardianClient
        )
        // In process, the guardian logs from the caller's fiber: capture those lines too.
        const logged = <A, E>(effect: Effect.Effect<A, E>) => Effect.provide(effect, loggerLayer)
        client = {
          info: logged(direct.info),
          authorize: (request) => logged(direct.authorize(request)),
          authorizeMany: (requests) => logged(direct.authorizeMany(requests)),
          settle: (request) => logged(direct.settle(request)),
          credit: (request) => logged(direct.credit(request)),
          sync: (request) => logged(direct.sync(request)),
          nonZero: (request) => logged(direct.nonZero(request)),
          sealedBalance: (request) => logged(direct.sealedBalance(request)),
          sealedKeyTotals: (request) => logged(direct.sealedKeyTotals(request)),
          rotationVeto: (request) => logged(direct.rotationVeto(request)),
          keyRotation: (request) => logged(direct.keyRotation(request)),
          forgetKey: (request) => logged(direct.forgetKey(request)),
          reconcile: (request) => logged(direct.reconcile(request)),
          health: logged(direct.health)
        }
      } else {
        const countRequests = () => {
          const server = createServer()
          server.on("request", () => httpRequests++)
          return server
        }
        const server = yield* Layer.build(
          HttpRouter.serve(GuardianServer.routes(sharedSecret), { disableListenLog: true, disableLogger: true }).pipe(
            Layer.provideMerge(NodeHttpServer.layer(countRequests, { host: "127.0.0.1", port: 0 })),
            Layer.provide(Layer.succeedContext(services)),
            Layer.provide(loggerLayer)
          ) as Layer.Layer<HttpServer.HttpServer>
        )
        const address = Context.get(server, HttpServer.HttpServer).address
        if (address._tag === "UnixPathAddress") throw new Error("expected a TCP address")
        const url = `http://127.0.0.1:${address.port}`
        client = Context.get(yield* Layer.build(GuardianClient.GuardianClient.layerHttp(url, sharedSecret)), GuardianClient.GuardianClient)
      }
      const info = yield* client.info.pipe(Effect.orDie)
      return {
        name,
        client,
        encryptionKey: info.encryptionKey as `0x${string}`,
        signer: info.signer as `0x${string}`,
        dumpStorage: dump(sql),
        storageFiles: () => (name === "in-process/pglite" ? readFilesUnder(dataDir) : []),
        logs,
        sql,
        httpRequests: () => httpRequests
      }
    })
  )
