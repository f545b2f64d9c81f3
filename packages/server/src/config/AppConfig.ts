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
import { EmbeddedDatabase } from "@pps/guardian"
import { Config, Context, Effect, Layer, Option, Redacted } from "effect"

/**
 * Limits that are part of the contract (docs/decisions), not configuration.
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
  /**
   * Embedded mode: whether PGlite runs on the event loop's thread (`caller`, the default) or on
   * a worker thread of its own (`own`: +16 % webhook deliveries a second, -5 % transfers a
   * second on the 2-core VM; docs/benchmarks.md); see the guardian package's `DatabaseThread`.
   */
  readonly embeddedDatabaseThread: EmbeddedDatabase.DatabaseThreading
  /**
   * Embedded mode: a directory holding a freshly initialised PGlite cluster
   * (`EmbeddedDatabase.initialiseTemplate`), copied to `DATA_DIR/pglite` (and the embedded
   * guardian's) when that holds no database yet, instead of initialising one there. The test
   * suite sets it (one initialisation a run instead of one a server); unset, a first start
   * initialises its own.
   */
  readonly embeddedDatabaseTemplate: Option.Option<string>
  /**
   * Where a plain-form transfer's boxes are sealed: on the event loop (`caller`, the default) or
   * on a worker thread of their own (`own`: ~1.5 ms of pure computation a transfer off the event
   * loop, but on the 2-core VM it lost under overload, docs/benchmarks.md); see
   * `transfers/TransferSealer.ts`.
   */
  readonly sealingThread: SealingThread
  /** Secrets; absent values are generated once into `dataDir` in embedded mode. */
  readonly adminToken: Option.Option<Redacted.Redacted<string>>
  readonly apiKeyPepper: Option.Option<Redacted.Redacted<string>>
  readonly walletKek: Option.Option<Redacted.Redacted<string>>
  /** D54: KEKs that open sealed values but never seal, comma-separated base64 (a rotation in progress). */
  readonly walletKekAccepted: Option.Option<Redacted.Redacted<string>>
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
  /** External testnet node; absent means embedded anvil in `dataDir/chain`. */
  readonly rpcUrlTestnet: Option.Option<string>
  /**
   * Replace a recorded ConfidentialToken of an older version by a new deployment at start
   * (the embedded chain's migration to v2, D53); without it the start refuses such a record.
   */
  readonly migrateContracts: boolean
  /** External mainnet node; absent means live mode is unavailable (D9). */
  readonly rpcUrlMainnet: Option.Option<string>
  /** Embedded anvil's block time: the miner's round while transactions wait (D88; anvil's automine jams under load). */
  readonly chainBlockTimeMs: number
  /** Blocks a transaction must be buried under before it counts (1 = included). */
  readonly chainConfirmations: number
  /**
   * Which work this node does (distributed mode): `all` (default), `api` (the listeners and
   * settlement of its own transfers; none of the background workers) or `worker` (the
   * outbox relay, webhook fan-out and delivery, sweeps and the adoption of dead nodes'
   * submissions; no public listener). Optional in the shape so hand-made test configs
   * mean `all`.
   */
  readonly nodeRole?: NodeRole
  /**
   * The dashboard's origin as browsers reach it (D41): WebAuthn's relying party, the
   * Origin state changes must carry, `Secure` cookies when https. Unset: `http://localhost:<PORT>`.
   * Optional in the shape so hand-made test configs mean the default.
   */
  readonly dashboardOrigin?: string | undefined
  /**
   * Proxies (addresses or CIDRs) whose `X-Forwarded-For` names the client, for
   * per-client-address limits (the dashboard's sign-in). Empty: the socket address.
   * Optional in the shape so hand-made test configs mean none.
   */
  readonly trustedProxies?: ReadonlyArray<string> | undefined
  /**
   * The chain explorer's page of a transaction, per chain, as a URL template holding
   * `{tx_hash}`: the dashboard links transaction hashes to it. Unset or empty: no link.
   * Optional in the shape so hand-made test configs mean none.
   */
  readonly chainExplorerTxUrlTestnet?: string | undefined
  readonly chainExplorerTxUrlMainnet?: string | undefined
  /** Embedded mode: how many relayer accounts submit in parallel (one nonce sequence each). */
  readonly relayerCount: number
  /**
   * Batched settlement: the most confidential transfers one relayer transaction carries
   * (`confidentialTransferBatch`); batches form only from what queued while every relayer was
   * busy, never by waiting. 1 (the default: batching measured no faster on the benchmark
   * machine, docs/benchmarks.md) sends each transfer on its own.
   */
  readonly settlementBatchMax: number
  /** External chains: funded relayer private keys (comma-separated 0x hex) per mode. */
  readonly relayerKeysTestnet: Option.Option<Redacted.Redacted<string>>
  readonly relayerKeysMainnet: Option.Option<Redacted.Redacted<string>>
  /** The guardian as its own process; absent means the guardian runs in this process (embedded). */
  readonly guardianUrl: Option.Option<string>
  /** Bearer secret of the guardian's RPC (required with `guardianUrl`). */
  readonly guardianSharedSecret: Option.Option<Redacted.Redacted<string>>
  /** Embedded default: how long the guardian child process may take to answer before start fails. */
  readonly guardianStartTimeoutMs: number
  /**
   * TEST ONLY: without `guardianUrl`, run the guardian inside this process (it then reads its
   * secret here) instead of as a child process. Never read from the environment: only the test
   * harness sets it, for speed.
   */
  readonly guardianInProcess: boolean
  /**
   * Whether the embedded anvil runs in a process group of its own: always from the environment,
   * so an operator's signal to `npm start`'s group (Ctrl-C, `kill -TERM -<pgid>`) reaches this
   * process alone, which stops anvil after everything that reads the chain. TEST ONLY false: an
   * in-process test server leaves anvil in the test worker's group, which a test runner's Ctrl-C
   * then stops with the worker (a detached anvil would outlive a worker killed by a signal).
   */
  readonly embeddedChainOwnProcessGroup: boolean
  /**
   * How the embedded anvil mines (D88). `on-demand`: the server mines a block every
   * `chainBlockTimeMs` while transactions wait (and the blocks the confirmation depth needs on top),
   * and while idle one every 12 s for the chain's clock: 7,200 blocks a day, not 432,000 at 200 ms;
   * it also writes the chain's state, once the chain rests (D89). `interval`: a block every
   * interval, empty or not (anvil's `--block-time`), and anvil's own state writes every 5 s (D86);
   * tests that steer mining themselves (`evm_setIntervalMining`) ask for it.
   */
  readonly embeddedChainMining: EmbeddedChainMining
  /** D14: how long `POST /v1/transfers` waits for settlement before answering `pending`. */
  readonly transferCreateTimeoutMs: number
  /**
   * Load shedding (platform/Admission.ts): the average time a transfer's decision may take
   * before this node admits fewer at once (0: never shed), and the most it admits at once.
   */
  readonly transferAdmissionTargetMs: number
  readonly transferAdmissionMaxInFlight: number
  /** How long a guardian attestation stays valid for mining (its EIP-712 deadline). */
  readonly attestationLifetimeSeconds: number
  /** D26: how long a held agent transaction waits for its owner's decision. */
  readonly approvalWindowMs: number
  /**
   * D61: the most agents one account may have in each mode. Bounds what one owner can make the
   * service keep (a wallet, a policy and keys per agent) and keeps `GET /v1/accounts/me/agents`,
   * which SPEC lists whole, one bounded answer.
   */
  readonly agentsPerAccountMax: number
  /** How often held transactions past their window are marked expired (at most 60 s late, so at most 50 s). */
  readonly approvalSweepIntervalMs: number
  /**
   * How often the veto relay (guardian/VetoRelay.ts) reads each own contract's pending guardian
   * rotation and submits the guardian's veto of it: far inside any rotation delay (48 h on
   * mainnet), so at most 60 s.
   */
  readonly vetoRelayIntervalMs: number
  /**
   * An external test chain's faucet key: a test USDG minter (made one by the operator's
   * deploy step), which can touch no confidential balance. Without it the faucet answers 503.
   * The contracts' owner key is never configured on an api node: see admin/deploy.ts.
   */
  readonly faucetKeyTestnet: Option.Option<Redacted.Redacted<string>>
  /** NATS server with JetStream (distributed event bus); absent means the in-process bus. */
  readonly natsUrl: Option.Option<string>
  /** JetStream stream holding the events, and the prefix of its subjects (`<prefix>.<mode>.<account_id>`). */
  readonly natsStream: string
  readonly natsSubjectPrefix: string
  /** How often the outbox relay looks for unpublished events besides being woken by commits. */
  readonly eventRelayPollMs: number
  /**
   * D87: how long the outbox relay waits after a commit on this node wakes it before it reads,
   * so that the commits of that moment share one round (0: reads at once). Polls do not wait.
   */
  readonly eventRelayLingerMs: number
  /** Events (and their delivery logs) are deleted after this many days (D35: at least 30). */
  readonly eventRetentionDays: number
  /** The longest a live event stream stays open; its client then resumes with `Last-Event-ID`. */
  readonly eventStreamMaxLifetimeMs: number
  /** Lets subscriptions target http(s)://127.0.0.1, ::1 and localhost (development only). */
  readonly webhookAllowInsecureLoopback: boolean
  /** Private ranges (CIDR, comma-separated) deliveries may reach; metadata addresses stay refused. */
  readonly webhookAllowedPrivateCidrs: ReadonlyArray<string>
  /** Extra CA certificates (PEM file) trusted for deliveries, besides the system roots. */
  readonly webhookCaFile: Option.Option<string>
  /** How often the delivery worker looks for due deliveries besides being woken by fan-out. */
  readonly webhookDispatchPollMs: number
  /** Subscriptions one node serves at once (each one delivery at a time). */
  readonly webhookConcurrency: number
  /** How long the previous secret keeps signing after `rotate-secret`. */
  readonly webhookSecretOverlapSeconds: number
  /**
   * Where traces and metrics are exported over OTLP/HTTP (observability/Otlp.ts); undefined
   * exports nothing and records no span. Optional in the shape so hand-made test configs mean off.
   */
  readonly otlp?: OtlpSettings | undefined
}

/**
 * The highest `AGENTS_PER_ACCOUNT_MAX` accepted: the unpaged SPEC list of an account's agents must
 * stay one answer well under the 64 KiB a body may have elsewhere (an agent record is ~200 bytes).
 *
 * @since 0.11.0
 * @category constants
 */
export const agentsPerAccountMaxCeiling = 1_000

/**
 * The values of `OTEL_EXPORTER_OTLP_PROTOCOL` the server speaks (OTLP over HTTP; not gRPC).
 *
 * @since 0.9.0
 * @category models
 */
export const otlpProtocols = ["http/protobuf", "http/json"] as const

/**
 * An OTLP/HTTP export: the collector's base URL (`/v1/traces` and `/v1/metrics` are added),
 * its body format, the headers it wants (`key=value,key=value`, e.g. a vendor's token) and the
 * `service.name` the data carries.
 *
 * @since 0.9.0
 * @category models
 */
export interface OtlpSettings {
  readonly endpoint: string
  readonly protocol: typeof otlpProtocols[number]
  readonly headers: Option.Option<Redacted.Redacted<string>>
  readonly serviceName: string
}

const logLevels = ["Trace", "Debug", "Info", "Warn", "Error"] as const

/**
 * The values of `SEALING_THREAD`.
 *
 * @since 0.9.0
 * @category models
 */
export const sealingThreads = ["own", "caller"] as const

/**
 * @since 0.9.0
 * @category models
 */
export type SealingThread = typeof sealingThreads[number]

/**
 * The values of `EMBEDDED_CHAIN_MINING` (D88).
 *
 * @since 0.15.0
 * @category models
 */
export const embeddedChainMinings = ["on-demand", "interval"] as const

/**
 * @since 0.15.0
 * @category models
 */
export type EmbeddedChainMining = typeof embeddedChainMinings[number]

/**
 * @since 0.4.0
 * @category models
 */
export const nodeRoles = ["all", "api", "worker"] as const

/**
 * @since 0.4.0
 * @category models
 */
export type NodeRole = typeof nodeRoles[number]

/**
 * Whether this node runs the background workers (relay, fan-out, delivery, sweeps, adoption).
 *
 * @since 0.4.0
 * @category predicates
 */
export const runsWorkers = (config: AppConfigShape): boolean => config.nodeRole !== "api"

/**
 * Whether this node serves the public API.
 *
 * @since 0.4.0
 * @category predicates
 */
export const servesApi = (config: AppConfigShape): boolean => config.nodeRole !== "worker"

/** A text setting for which empty (or only spaces) means unset, as if it were not given. */
const unsetWhenEmpty = (name: string) =>
  Config.String(name).pipe(Config.withDefault(""), Config.map((value) => value.trim() === "" ? undefined : value.trim()))

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
  embeddedDatabaseThread: Config.Literals(EmbeddedDatabase.databaseThreadings, "EMBEDDED_DATABASE_THREAD").pipe(
    Config.withDefault("caller" as const)
  ),
  embeddedDatabaseTemplate: Config.option(Config.String("EMBEDDED_DATABASE_TEMPLATE")),
  sealingThread: Config.Literals(sealingThreads, "SEALING_THREAD").pipe(Config.withDefault("caller" as const)),
  adminToken: Config.option(Config.Redacted("ADMIN_TOKEN")),
  apiKeyPepper: Config.option(Config.Redacted("API_KEY_PEPPER")),
  walletKek: Config.option(Config.Redacted("WALLET_KEK")),
  walletKekAccepted: Config.option(Config.Redacted("WALLET_KEK_ACCEPTED")),
  rateLimitPerSecond: Config.Int("RATE_LIMIT_PER_SECOND").pipe(Config.withDefault(200)),
  rateLimitBurst: Config.Int("RATE_LIMIT_BURST").pipe(Config.withDefault(400)),
  apiKeyCacheTtlMs: Config.Int("API_KEY_CACHE_TTL_MS").pipe(Config.withDefault(30_000)),
  apiKeyUsageFlushMs: Config.Int("API_KEY_USAGE_FLUSH_MS").pipe(Config.withDefault(1_000)),
  shutdownTimeoutMs: Config.Int("SHUTDOWN_TIMEOUT_MS").pipe(Config.withDefault(10_000)),
  logLevel: Config.Literals(logLevels, "LOG_LEVEL").pipe(Config.withDefault("Info" as const)),
  rpcUrlTestnet: Config.option(Config.String("RPC_URL_TESTNET")),
  migrateContracts: Config.Boolean("MIGRATE_CONTRACTS").pipe(Config.withDefault(false)),
  rpcUrlMainnet: Config.option(Config.String("RPC_URL_MAINNET")),
  chainBlockTimeMs: Config.Int("CHAIN_BLOCK_TIME_MS").pipe(Config.withDefault(200)),
  chainConfirmations: Config.Int("CHAIN_CONFIRMATIONS").pipe(Config.withDefault(1)),
  nodeRole: Config.Literals(nodeRoles, "NODE_ROLE").pipe(Config.withDefault("all" as const)),
  dashboardOrigin: Config.option(Config.String("DASHBOARD_ORIGIN")).pipe(Config.map(Option.getOrUndefined)),
  trustedProxies: Config.String("TRUSTED_PROXIES").pipe(
    Config.withDefault(""),
    Config.map((value) => value.split(",").map((entry) => entry.trim()).filter((entry) => entry !== ""))
  ),
  chainExplorerTxUrlTestnet: unsetWhenEmpty("CHAIN_EXPLORER_TX_URL_TESTNET"),
  chainExplorerTxUrlMainnet: unsetWhenEmpty("CHAIN_EXPLORER_TX_URL_MAINNET"),
  relayerCount: Config.Int("RELAYER_COUNT").pipe(Config.withDefault(8)),
  settlementBatchMax: Config.Int("SETTLEMENT_BATCH_MAX").pipe(Config.withDefault(32)),
  relayerKeysTestnet: Config.option(Config.Redacted("RELAYER_KEYS_TESTNET")),
  relayerKeysMainnet: Config.option(Config.Redacted("RELAYER_KEYS_MAINNET")),
  guardianUrl: Config.option(Config.String("GUARDIAN_URL")),
  guardianSharedSecret: Config.option(Config.Redacted("GUARDIAN_SHARED_SECRET")),
  guardianStartTimeoutMs: Config.Int("GUARDIAN_START_TIMEOUT_MS").pipe(Config.withDefault(60_000)),
  guardianInProcess: Config.succeed(false),
  embeddedChainOwnProcessGroup: Config.succeed(true),
  embeddedChainMining: Config.Literals(embeddedChainMinings, "EMBEDDED_CHAIN_MINING").pipe(
    Config.withDefault("on-demand" as const)
  ),
  transferCreateTimeoutMs: Config.Int("TRANSFER_CREATE_TIMEOUT_MS").pipe(Config.withDefault(5_000)),
  transferAdmissionTargetMs: Config.Int("TRANSFER_ADMISSION_TARGET_MS").pipe(Config.withDefault(250)),
  transferAdmissionMaxInFlight: Config.Int("TRANSFER_ADMISSION_MAX_IN_FLIGHT").pipe(Config.withDefault(1_024)),
  attestationLifetimeSeconds: Config.Int("ATTESTATION_LIFETIME_SECONDS").pipe(Config.withDefault(600)),
  approvalWindowMs: Config.Int("APPROVAL_WINDOW_MS").pipe(Config.withDefault(24 * 60 * 60 * 1000)),
  agentsPerAccountMax: Config.Int("AGENTS_PER_ACCOUNT_MAX").pipe(Config.withDefault(100)),
  approvalSweepIntervalMs: Config.Int("APPROVAL_SWEEP_INTERVAL_MS").pipe(Config.withDefault(10_000)),
  vetoRelayIntervalMs: Config.Int("VETO_RELAY_INTERVAL_MS").pipe(Config.withDefault(15_000)),
  faucetKeyTestnet: Config.option(Config.Redacted("FAUCET_KEY_TESTNET")),
  natsUrl: Config.option(Config.String("NATS_URL")),
  natsStream: Config.String("NATS_STREAM").pipe(Config.withDefault("PPS_EVENTS")),
  natsSubjectPrefix: Config.String("NATS_SUBJECT_PREFIX").pipe(Config.withDefault("events")),
  eventRelayPollMs: Config.Int("EVENT_RELAY_POLL_MS").pipe(Config.withDefault(200)),
  eventRelayLingerMs: Config.Int("EVENT_RELAY_LINGER_MS").pipe(Config.withDefault(50)),
  eventRetentionDays: Config.Int("EVENT_RETENTION_DAYS").pipe(Config.withDefault(30)),
  // One hour: a stream's resources (its SQL polling, a dead peer's socket) are never held
  // longer, and reconnecting once an hour with Last-Event-ID costs a client nothing.
  eventStreamMaxLifetimeMs: Config.Int("EVENT_STREAM_MAX_LIFETIME_MS").pipe(Config.withDefault(60 * 60 * 1000)),
  webhookAllowInsecureLoopback: Config.Boolean("WEBHOOK_ALLOW_INSECURE_LOOPBACK").pipe(Config.withDefault(false)),
  webhookAllowedPrivateCidrs: Config.String("WEBHOOK_ALLOWED_PRIVATE_CIDRS").pipe(
    Config.withDefault(""),
    Config.map((text) => text.split(",").map((entry) => entry.trim()).filter((entry) => entry !== ""))
  ),
  webhookCaFile: Config.option(Config.String("WEBHOOK_CA_FILE")),
  webhookDispatchPollMs: Config.Int("WEBHOOK_DISPATCH_POLL_MS").pipe(Config.withDefault(500)),
  webhookConcurrency: Config.Int("WEBHOOK_CONCURRENCY").pipe(Config.withDefault(64)),
  webhookSecretOverlapSeconds: Config.Int("WEBHOOK_SECRET_OVERLAP_SECONDS").pipe(Config.withDefault(86_400)),
  otlp: Config.all({
    endpoint: Config.option(Config.String("OTEL_EXPORTER_OTLP_ENDPOINT")),
    // JSON, not OpenTelemetry's usual protobuf: effect's protobuf encoder cost ~5x the CPU a span
    // (22.7 against 4.6 µs, `bench:spans -- --cost`), and collectors take both.
    protocol: Config.Literals(otlpProtocols, "OTEL_EXPORTER_OTLP_PROTOCOL").pipe(Config.withDefault("http/json" as const)),
    headers: Config.option(Config.Redacted("OTEL_EXPORTER_OTLP_HEADERS")),
    serviceName: Config.String("OTEL_SERVICE_NAME").pipe(Config.withDefault("pps-server"))
  }).pipe(Config.map(({ endpoint, ...rest }): OtlpSettings | undefined =>
    Option.isSome(endpoint) && endpoint.value.trim() !== "" ? { endpoint: endpoint.value.trim(), ...rest } : undefined
  ))
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
  "EMBEDDED_DATABASE_THREAD",
  "EMBEDDED_DATABASE_TEMPLATE",
  "SEALING_THREAD",
  "ADMIN_TOKEN",
  "API_KEY_PEPPER",
  "WALLET_KEK",
  "WALLET_KEK_ACCEPTED",
  "RATE_LIMIT_PER_SECOND",
  "RATE_LIMIT_BURST",
  "API_KEY_CACHE_TTL_MS",
  "API_KEY_USAGE_FLUSH_MS",
  "SHUTDOWN_TIMEOUT_MS",
  "LOG_LEVEL",
  "RPC_URL_TESTNET",
  "RPC_URL_MAINNET",
  "MIGRATE_CONTRACTS",
  "CHAIN_BLOCK_TIME_MS",
  "CHAIN_CONFIRMATIONS",
  "EMBEDDED_CHAIN_MINING",
  "NODE_ROLE",
  "DASHBOARD_ORIGIN",
  "TRUSTED_PROXIES",
  "CHAIN_EXPLORER_TX_URL_TESTNET",
  "CHAIN_EXPLORER_TX_URL_MAINNET",
  "RELAYER_COUNT",
  "SETTLEMENT_BATCH_MAX",
  "RELAYER_KEYS_TESTNET",
  "RELAYER_KEYS_MAINNET",
  "GUARDIAN_URL",
  "GUARDIAN_SHARED_SECRET",
  "GUARDIAN_START_TIMEOUT_MS",
  "TRANSFER_CREATE_TIMEOUT_MS",
  "TRANSFER_ADMISSION_TARGET_MS",
  "TRANSFER_ADMISSION_MAX_IN_FLIGHT",
  "ATTESTATION_LIFETIME_SECONDS",
  "APPROVAL_WINDOW_MS",
  "AGENTS_PER_ACCOUNT_MAX",
  "APPROVAL_SWEEP_INTERVAL_MS",
  "VETO_RELAY_INTERVAL_MS",
  "FAUCET_KEY_TESTNET",
  "NATS_URL",
  "NATS_STREAM",
  "NATS_SUBJECT_PREFIX",
  "EVENT_RELAY_POLL_MS",
  "EVENT_RELAY_LINGER_MS",
  "EVENT_RETENTION_DAYS",
  "EVENT_STREAM_MAX_LIFETIME_MS",
  "WEBHOOK_ALLOW_INSECURE_LOOPBACK",
  "WEBHOOK_ALLOWED_PRIVATE_CIDRS",
  "WEBHOOK_CA_FILE",
  "WEBHOOK_DISPATCH_POLL_MS",
  "WEBHOOK_CONCURRENCY",
  "WEBHOOK_SECRET_OVERLAP_SECONDS",
  "OTEL_EXPORTER_OTLP_ENDPOINT",
  "OTEL_EXPORTER_OTLP_PROTOCOL",
  "OTEL_EXPORTER_OTLP_HEADERS",
  "OTEL_SERVICE_NAME",
  // Read by effect's own OTLP resource (OtlpResource.fromConfig), when an endpoint is set.
  "OTEL_RESOURCE_ATTRIBUTES"
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
      // 64 items at 350k gas each stay under a 30M block gas limit.
      if (config.settlementBatchMax < 1 || config.settlementBatchMax > 64) {
        return yield* Effect.die(new Error("SETTLEMENT_BATCH_MAX must be within 1-64"))
      }
      if (config.chainConfirmations < 1 || config.relayerCount < 1 || config.chainBlockTimeMs < 10) {
        return yield* Effect.die(
          new Error("CHAIN_CONFIRMATIONS and RELAYER_COUNT must be >= 1, CHAIN_BLOCK_TIME_MS >= 10")
        )
      }
      // A role splits work between nodes that share a database; alone, a node must do all of it.
      if (config.nodeRole !== "all" && Option.isNone(config.databaseUrl)) {
        return yield* Effect.die(new Error("NODE_ROLE api or worker needs DATABASE_URL (the distributed mode)"))
      }
      if (config.eventRetentionDays < 30) {
        return yield* Effect.die(new Error("EVENT_RETENTION_DAYS must be at least 30 (D35)"))
      }
      // At most half of the first-attempt goal (webhooks out within 1 s of their commit).
      if (config.eventRelayLingerMs < 0 || config.eventRelayLingerMs > 500) {
        return yield* Effect.die(new Error("EVENT_RELAY_LINGER_MS must be between 0 and 500"))
      }
      if (config.eventStreamMaxLifetimeMs < 1_000) {
        return yield* Effect.die(new Error("EVENT_STREAM_MAX_LIFETIME_MS must be at least 1000"))
      }
      if (config.webhookConcurrency < 1 || config.eventRelayPollMs < 1 || config.webhookDispatchPollMs < 1) {
        return yield* Effect.die(
          new Error("WEBHOOK_CONCURRENCY, EVENT_RELAY_POLL_MS and WEBHOOK_DISPATCH_POLL_MS must be >= 1")
        )
      }
      // The sweep marks a held transaction expired within 60 s of its end (D27); a sweep
      // step itself takes well under 10 s.
      if (config.approvalWindowMs < 1 || config.approvalSweepIntervalMs < 1 || config.approvalSweepIntervalMs > 50_000) {
        return yield* Effect.die(new Error("APPROVAL_WINDOW_MS must be >= 1 and APPROVAL_SWEEP_INTERVAL_MS within 1-50000"))
      }
      if (config.vetoRelayIntervalMs < 100 || config.vetoRelayIntervalMs > 60_000) {
        return yield* Effect.die(new Error("VETO_RELAY_INTERVAL_MS must be within 100-60000"))
      }
      // The SPEC list (`GET /v1/accounts/me/agents`) answers every agent in one response.
      if (config.agentsPerAccountMax < 1 || config.agentsPerAccountMax > agentsPerAccountMaxCeiling) {
        return yield* Effect.die(new Error(`AGENTS_PER_ACCOUNT_MAX must be within 1-${agentsPerAccountMaxCeiling}`))
      }
      if (config.transferAdmissionTargetMs < 0 || config.transferAdmissionMaxInFlight < 1) {
        return yield* Effect.die(new Error("TRANSFER_ADMISSION_TARGET_MS must be >= 0 and TRANSFER_ADMISSION_MAX_IN_FLIGHT >= 1"))
      }
      return config
    })
  )
}
