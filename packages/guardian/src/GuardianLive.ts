/**
 * The guardian with everything it runs on: its own database (embedded PGlite in a
 * directory, or PostgreSQL), its migrations, its keys, its chain endpoints and its
 * background sweepers. The in-process client and the guardian process both build it.
 *
 * The database is the guardian's alone: in the embedded mode `DATA_DIR/guardian`, never
 * the server's PGlite; in the distributed mode `GUARDIAN_DATABASE_URL`, a database (and
 * role) the api server has no access to.
 *
 * @since 0.1.0
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { PgClient } from "@effect/sql-pg"
import { PgliteClient } from "@effect/sql-pglite"
import { Backend } from "@pps/crypto"
import { Effect, Layer, Redacted } from "effect"
import type { SqlClient } from "effect/sql"
import { randomBytes } from "@noble/hashes/utils.js"
import type { Address } from "viem"
import { ChainReader, type ChainEndpoint } from "./ChainReader.ts"
import { makeEmbeddedClient } from "./EmbeddedDatabase.ts"
import { Guardian, type Timing } from "./Guardian.ts"
import * as GuardianKeys from "./GuardianKeys.ts"
import { lockDataDir } from "./internal/dataDirLock.ts"
import { migrate } from "./internal/migrations.ts"

/**
 * Where the guardian keeps its books.
 *
 * @since 0.1.0
 * @category models
 */
export type DatabaseOptions =
  | {
    readonly _tag: "pglite"
    readonly dataDir: string
    /** A freshly initialised cluster to copy when `dataDir` has no database yet (`EmbeddedDatabase.seedFromTemplate`). */
    readonly template?: string | undefined
  }
  | { readonly _tag: "postgres"; readonly url: Redacted.Redacted<string>; readonly poolMax?: number }

/**
 * @since 0.1.0
 * @category models
 */
export interface GuardianOptions {
  readonly database: DatabaseOptions
  /** GUARDIAN_SECRET: 32 bytes from which every guardian key derives. */
  readonly secret: Redacted.Redacted<Uint8Array>
  /** JSON-RPC endpoints of the chains the guardian reads (reconciliation, expiry checks, keys). */
  readonly chains?: ReadonlyArray<ChainEndpoint>
  readonly timing?: Partial<Timing>
  /** GUARDIAN_APPROVED_ROTATIONS: signers a rotation may go to without the guardian's veto. */
  readonly approvedRotations?: ReadonlyArray<Address>
}

/** How long closing PGlite may take before shutdown goes on without it. */
const pgliteCloseTimeoutMs = 5_000

/**
 * The name of the secret file of the embedded mode, inside the guardian's directory.
 *
 * @since 0.1.0
 * @category constants
 */
export const secretFileName = "guardian-secret.json"

/**
 * The embedded mode's secret: read from `dir/guardian-secret.json`, generated once
 * from the CSPRNG (file mode 0600) when missing, like the server's own secrets.
 *
 * @since 0.1.0
 * @category constructors
 */
export const loadOrCreateSecret = (dir: string): Effect.Effect<Redacted.Redacted<Uint8Array>, Error> =>
  Effect.try({
    try: () => {
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
      const file = path.join(dir, secretFileName)
      if (!fs.existsSync(file)) {
        const tmp = `${file}.${process.pid}.tmp`
        const body = { guardian_secret: Buffer.from(randomBytes(GuardianKeys.secretBytes)).toString("base64") }
        fs.writeFileSync(tmp, JSON.stringify(body, null, 2) + "\n", { mode: 0o600, flag: "wx" })
        fs.renameSync(tmp, file)
      }
      const parsed = JSON.parse(fs.readFileSync(file, "utf8")) as { readonly guardian_secret?: unknown }
      return Redacted.make(decodeSecret(String(parsed.guardian_secret ?? "")))
    },
    catch: (cause) => new Error(`cannot read or create the guardian secret: ${cause instanceof Error ? cause.message : String(cause)}`)
  })

/**
 * Decodes GUARDIAN_SECRET (base64 of exactly 32 bytes); throws otherwise.
 *
 * @since 0.1.0
 * @category constructors
 */
export const decodeSecret = (text: string): Uint8Array => {
  const bytes = new Uint8Array(Buffer.from(text, "base64"))
  if (bytes.length !== GuardianKeys.secretBytes) throw new Error("GUARDIAN_SECRET must be 32 bytes, base64-encoded")
  return bytes
}

const pgliteLayer = (dataDir: string, template: string | undefined) =>
  PgliteClient.layerFrom(
    lockDataDir(dataDir).pipe(
      Effect.andThen(makeEmbeddedClient(path.join(dataDir, "pglite"), pgliteCloseTimeoutMs, undefined, undefined, template))
    )
  )

const sqlLayer = (database: DatabaseOptions) =>
  database._tag === "pglite"
    ? pgliteLayer(database.dataDir, database.template)
    : PgClient.layer({ url: database.url, maxConnections: database.poolMax ?? 10, applicationName: "pps-guardian" })

/**
 * The guardian and its background work, over the configured database and chains.
 * Loads the mcl backend of @pps/crypto first (constant-time and ~12x faster).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: GuardianOptions): Layer.Layer<Guardian, unknown> => Layer.fresh(layerWithStorage(options))

/**
 * `layer`, also exposing the guardian's SqlClient: for tests that dump the storage and
 * for operators' tooling. The api server never gets this.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWithStorage = (options: GuardianOptions): Layer.Layer<Guardian | SqlClient.SqlClient, unknown> => {
  const keys = GuardianKeys.fromSecret(Redacted.value(options.secret))
  const migrated = Layer.effectDiscard(migrate)
  return Guardian.layer({
    keys,
    ...(options.timing === undefined ? {} : { timing: options.timing }),
    ...(options.approvedRotations === undefined ? {} : { approvedRotations: options.approvedRotations })
  }).pipe(
    Layer.provide(migrated),
    Layer.provide(ChainReader.layer(options.chains ?? [])),
    Layer.provideMerge(sqlLayer(options.database)),
    Layer.provide(Layer.effectDiscard(Effect.promise(() => Backend.init({ backend: "mcl" }))))
  )
}
