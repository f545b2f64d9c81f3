/**
 * The server's configuration, read once at start through Effect Config.
 *
 * Every variable the server reads is declared here and documented in
 * docs/operations.md (a test checks that the two lists agree). Defaults give the
 * embedded mode: no variable set means PGlite in `DATA_DIR`, secrets generated
 * into `DATA_DIR`, testnet only.
 *
 * @since 0.1.0
 */
import { Config, Context, Effect, Layer, Option, Redacted } from "effect"

/**
 * Limits that are part of the contract (DECISIONS.md), not configuration.
 *
 * @since 0.1.0
 * @category constants
 */
export const Limits = {
  /** D2: a request body over 64 KiB answers 413. */
  bodyBytesMax: 64 * 1024,
  /** D6: an Idempotency-Key replays its first response for 24 hours. */
  idempotencyTtlMs: 24 * 60 * 60 * 1000,
  /** D6: Idempotency-Key is 1-255 characters. */
  idempotencyKeyLengthMax: 255,
  /** API key names are free text shown in the dashboard; bounded so a list page stays small. */
  apiKeyNameLengthMax: 100
} as const

/**
 * The resolved configuration.
 *
 * @since 0.1.0
 * @category models
 */
export interface AppConfigShape {
  /** Public listener. */
  readonly host: string
  readonly port: number
  /** Admin listener: loopback by default, never the public interface by accident. */
  readonly adminHost: string
  readonly adminPort: number
  /** Where the embedded mode keeps everything (PGlite, generated secrets, lock, admin file). */
  readonly dataDir: string
  /** PostgreSQL connection string; absent means embedded PGlite in `dataDir`. */
  readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
  readonly databasePoolMax: number
  /** Secrets; absent values are generated once into `dataDir` in embedded mode. */
  readonly adminToken: Option.Option<Redacted.Redacted<string>>
  readonly apiKeyPepper: Option.Option<Redacted.Redacted<string>>
  readonly walletKek: Option.Option<Redacted.Redacted<string>>
  /** D7 token bucket per API key: sustained requests per second and burst size. */
  readonly rateLimitPerSecond: number
  readonly rateLimitBurst: number
  /** How long a verified API key may be served from the in-process cache (embedded mode only). */
  readonly apiKeyCacheTtlMs: number
  /** How often API key usage counters are written to the database. */
  readonly apiKeyUsageFlushMs: number
  /** In-flight requests get this long to finish on SIGTERM before the server closes. */
  readonly shutdownTimeoutMs: number
  readonly logLevel: "Trace" | "Debug" | "Info" | "Warn" | "Error"
}

const logLevels = ["Trace", "Debug", "Info", "Warn", "Error"] as const

/**
 * The Config description of every variable (names are the environment variables).
 *
 * @since 0.1.0
 * @category config
 */
export const appConfig: Config.Config<AppConfigShape> = Config.all({
  host: Config.String("HOST").pipe(Config.withDefault("127.0.0.1")),
  port: Config.Port("PORT").pipe(Config.withDefault(8080)),
  adminHost: Config.String("ADMIN_HOST").pipe(Config.withDefault("127.0.0.1")),
  adminPort: Config.Port("ADMIN_PORT").pipe(Config.withDefault(8081)),
  dataDir: Config.String("DATA_DIR").pipe(Config.withDefault("./.data")),
  databaseUrl: Config.option(Config.Redacted("DATABASE_URL")),
  databasePoolMax: Config.Int("DATABASE_POOL_MAX").pipe(Config.withDefault(10)),
  adminToken: Config.option(Config.Redacted("ADMIN_TOKEN")),
  apiKeyPepper: Config.option(Config.Redacted("API_KEY_PEPPER")),
  walletKek: Config.option(Config.Redacted("WALLET_KEK")),
  rateLimitPerSecond: Config.Int("RATE_LIMIT_PER_SECOND").pipe(Config.withDefault(200)),
  rateLimitBurst: Config.Int("RATE_LIMIT_BURST").pipe(Config.withDefault(400)),
  apiKeyCacheTtlMs: Config.Int("API_KEY_CACHE_TTL_MS").pipe(Config.withDefault(30_000)),
  apiKeyUsageFlushMs: Config.Int("API_KEY_USAGE_FLUSH_MS").pipe(Config.withDefault(1_000)),
  shutdownTimeoutMs: Config.Int("SHUTDOWN_TIMEOUT_MS").pipe(Config.withDefault(10_000)),
  logLevel: Config.Literals(logLevels, "LOG_LEVEL").pipe(Config.withDefault("Info" as const))
})

/**
 * The names of every environment variable the server reads (checked against
 * docs/operations.md by a test).
 *
 * @since 0.1.0
 * @category config
 */
export const environmentVariables = [
  "HOST",
  "PORT",
  "ADMIN_HOST",
  "ADMIN_PORT",
  "DATA_DIR",
  "DATABASE_URL",
  "DATABASE_POOL_MAX",
  "ADMIN_TOKEN",
  "API_KEY_PEPPER",
  "WALLET_KEK",
  "RATE_LIMIT_PER_SECOND",
  "RATE_LIMIT_BURST",
  "API_KEY_CACHE_TTL_MS",
  "API_KEY_USAGE_FLUSH_MS",
  "SHUTDOWN_TIMEOUT_MS",
  "LOG_LEVEL"
] as const

/**
 * The configuration as a service.
 *
 * @since 0.1.0
 * @category services
 */
export class AppConfig extends Context.Service<AppConfig, AppConfigShape>()("server/config/AppConfig") {
  /** Reads the environment (or the current ConfigProvider). */
  static readonly layer = Layer.effect(
    AppConfig,
    Effect.gen(function*() {
      const config = yield* appConfig
      if (config.rateLimitBurst < config.rateLimitPerSecond) {
        return yield* Effect.die(new Error("RATE_LIMIT_BURST must be at least RATE_LIMIT_PER_SECOND"))
      }
      return config
    })
  )
}
