/**
 * The guardian's configuration, read through Effect Config (names are environment
 * variables). The same variables serve the in-process guardian and `pnpm guardian`;
 * docs/guardian.md lists them.
 *
 * @since 0.1.0
 */
import * as path from "node:path"
import { Deploy } from "@pps/contracts"
import { Config, Effect, Option, Redacted } from "effect"
import { type Address, getAddress, isAddress } from "viem"
import type { ChainEndpoint } from "./ChainReader.ts"
import { defaultTiming, type Timing } from "./Guardian.ts"
import { decodeSecret, type GuardianOptions, loadOrCreateSecret } from "./GuardianLive.ts"

/**
 * The shortest shared secret accepted for the RPC channel.
 *
 * @since 0.1.0
 * @category constants
 */
export const sharedSecretLengthMin = 32

/**
 * The guardian process's default port.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultPort = 8090

/**
 * Every variable the guardian reads.
 *
 * @since 0.1.0
 * @category config
 */
export const environmentVariables = [
  "DATA_DIR",
  "GUARDIAN_SECRET",
  "GUARDIAN_DATABASE_URL",
  "GUARDIAN_DATABASE_POOL_MAX",
  "GUARDIAN_RPC_URLS",
  "GUARDIAN_RESERVATION_MARGIN_SECONDS",
  "GUARDIAN_DEADLINE_HORIZON_SECONDS",
  "GUARDIAN_SWEEP_INTERVAL_MS",
  "GUARDIAN_RECONCILE_INTERVAL_MS",
  "GUARDIAN_RECONCILE_RETRY_DELAY_MS",
  "GUARDIAN_CHAIN_POLL_MS",
  "GUARDIAN_CONFIRMATIONS",
  "GUARDIAN_APPROVED_ROTATIONS",
  "GUARDIAN_HOST",
  "GUARDIAN_PORT",
  "GUARDIAN_SHARED_SECRET",
  "GUARDIAN_URL",
  "GUARDIAN_EXIT_WITH_PARENT",
  "LOG_LEVEL"
] as const

/**
 * GUARDIAN_EXIT_WITH_PARENT: set by the api server for the guardian it starts as its
 * child (the embedded default). The guardian then stops when its parent is gone (its
 * stdin pipe closes, or it is re-parented), so a server killed with SIGKILL leaves no
 * guardian behind.
 *
 * @since 0.1.0
 * @category config
 */
export const exitWithParent = Config.Boolean("GUARDIAN_EXIT_WITH_PARENT").pipe(Config.withDefault(false))

/**
 * Parses GUARDIAN_RPC_URLS: comma-separated `chainId=url` pairs.
 *
 * @since 0.1.0
 * @category constructors
 */
export const parseRpcUrls = (text: string): Array<ChainEndpoint> =>
  text.split(",").map((entry) => entry.trim()).filter((entry) => entry.length > 0).map((entry) => {
    const separator = entry.indexOf("=")
    const chainId = entry.slice(0, separator)
    const rpcUrl = entry.slice(separator + 1)
    if (separator <= 0 || !/^[1-9][0-9]*$/.test(chainId) || !/^https?:\/\//.test(rpcUrl)) {
      throw new Error("GUARDIAN_RPC_URLS must be comma-separated chainId=http(s)://url pairs")
    }
    return { chainId: BigInt(chainId), rpcUrl }
  })

/**
 * Parses GUARDIAN_APPROVED_ROTATIONS: comma-separated addresses of the signers the
 * guardian's operator agreed to hand over to (empty: every rotation is vetoed).
 *
 * @since 0.3.0
 * @category constructors
 */
export const parseApprovedRotations = (text: string): Array<Address> =>
  text.split(",").map((entry) => entry.trim()).filter((entry) => entry.length > 0).map((entry) => {
    if (!isAddress(entry, { strict: false })) {
      throw new Error("GUARDIAN_APPROVED_ROTATIONS must be comma-separated 0x addresses")
    }
    return getAddress(entry)
  })

const timingConfig: Config.Config<Timing> = Config.all({
  reservationMarginSeconds: Config.Int("GUARDIAN_RESERVATION_MARGIN_SECONDS").pipe(
    Config.withDefault(defaultTiming.reservationMarginSeconds)
  ),
  deadlineHorizonSeconds: Config.Int("GUARDIAN_DEADLINE_HORIZON_SECONDS").pipe(
    Config.withDefault(defaultTiming.deadlineHorizonSeconds)
  ),
  sweepIntervalMs: Config.Int("GUARDIAN_SWEEP_INTERVAL_MS").pipe(Config.withDefault(defaultTiming.sweepIntervalMs)),
  reconcileIntervalMs: Config.Int("GUARDIAN_RECONCILE_INTERVAL_MS").pipe(Config.withDefault(defaultTiming.reconcileIntervalMs)),
  reconcileRetryDelayMs: Config.Int("GUARDIAN_RECONCILE_RETRY_DELAY_MS").pipe(
    Config.withDefault(defaultTiming.reconcileRetryDelayMs)
  ),
  chainPollIntervalMs: Config.Int("GUARDIAN_CHAIN_POLL_MS").pipe(Config.withDefault(defaultTiming.chainPollIntervalMs)),
  chainConfirmations: Config.Int("GUARDIAN_CONFIRMATIONS").pipe(Config.withDefault(defaultTiming.chainConfirmations))
})

/**
 * The guardian's options from configuration. Embedded (no GUARDIAN_DATABASE_URL): PGlite
 * in `DATA_DIR/guardian`, the secret from GUARDIAN_SECRET or generated once into that
 * directory. Distributed: PostgreSQL at GUARDIAN_DATABASE_URL and GUARDIAN_SECRET
 * required (every guardian node must share it).
 *
 * @since 0.1.0
 * @category constructors
 */
export const options = Effect.gen(function*() {
  const dataDir = yield* Config.String("DATA_DIR").pipe(Config.withDefault("./.data"))
  const databaseUrl = yield* Config.option(Config.Redacted("GUARDIAN_DATABASE_URL"))
  const poolMax = yield* Config.Int("GUARDIAN_DATABASE_POOL_MAX").pipe(Config.withDefault(10))
  const configuredSecret = yield* Config.option(Config.Redacted("GUARDIAN_SECRET"))
  const rpcUrls = yield* Config.String("GUARDIAN_RPC_URLS").pipe(Config.withDefault(""))
  const timing = yield* timingConfig
  const approvedText = yield* Config.String("GUARDIAN_APPROVED_ROTATIONS").pipe(Config.withDefault(""))
  const template = yield* Config.option(Config.String("EMBEDDED_DATABASE_TEMPLATE"))
  const guardianDir = path.resolve(dataDir, "guardian")
  const secret = Option.isSome(configuredSecret)
    ? yield* Effect.try({ try: () => Redacted.make(decodeSecret(Redacted.value(configuredSecret.value))), catch: (cause) => cause as Error })
    : Option.isSome(databaseUrl)
    ? yield* Effect.fail(new Error("GUARDIAN_SECRET is required when GUARDIAN_DATABASE_URL is set (every node must share it)"))
    : yield* loadOrCreateSecret(guardianDir)
  const chains = yield* Effect.try({ try: () => parseRpcUrls(rpcUrls), catch: (cause) => cause as Error })
  // Depth 0 books a credit as soon as its block is the latest: right for anvil, which never
  // reorganises, wrong for a real chain, where a reorganisation would leave booked credit
  // with no tokens behind it.
  if (timing.chainConfirmations < 1 && chains.some((chain) => chain.chainId === BigInt(Deploy.mainnetChainId))) {
    return yield* Effect.fail(
      new Error(`GUARDIAN_CONFIRMATIONS must be at least 1 with a mainnet (chain ${Deploy.mainnetChainId}) endpoint`)
    )
  }
  const approvedRotations = yield* Effect.try({ try: () => parseApprovedRotations(approvedText), catch: (cause) => cause as Error })
  const result: GuardianOptions = {
    database: Option.isSome(databaseUrl)
      ? { _tag: "postgres", url: databaseUrl.value, poolMax }
      : { _tag: "pglite", dataDir: guardianDir, template: Option.getOrUndefined(template) },
    secret,
    chains,
    timing,
    approvedRotations
  }
  return result
})

/**
 * The guardian process's listener and channel secret.
 *
 * @since 0.1.0
 * @category constructors
 */
export const listener = Effect.gen(function*() {
  const host = yield* Config.String("GUARDIAN_HOST").pipe(Config.withDefault("127.0.0.1"))
  const port = yield* Config.Port("GUARDIAN_PORT").pipe(Config.withDefault(defaultPort))
  const sharedSecret = yield* Config.Redacted("GUARDIAN_SHARED_SECRET")
  if (Redacted.value(sharedSecret).length < sharedSecretLengthMin) {
    return yield* Effect.fail(new Error(`GUARDIAN_SHARED_SECRET must be at least ${sharedSecretLengthMin} characters`))
  }
  return { host, port, sharedSecret }
})
