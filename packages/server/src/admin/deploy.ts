/**
 * `npm run -s admin -- chain deploy --mode test|live`: the operator's administrative step that
 * deploys the contracts on an external chain and records their addresses for the api
 * nodes (the contracts' owner key is never on an api node, docs/security.md).
 *
 * It runs on the operator's machine, with the owner key in its own environment
 * (`OPERATOR_KEY_TESTNET` / `OPERATOR_KEY_MAINNET`), never an api node's. It reads the
 * guardian's public identity from the guardian (`GUARDIAN_URL`,
 * `GUARDIAN_SHARED_SECRET`), deploys what is not yet on chain (reusing recorded
 * addresses whose code is there), makes the faucet key a test USDG minter on a test
 * chain (`FAUCET_KEY_TESTNET`, or `--faucet-address`), and records the addresses in the
 * database (`DATABASE_URL`). Several runs at once are serialized by a PostgreSQL
 * advisory lock; api nodes wait for the record (Chains.ts). It prints one JSON document.
 *
 * The owner can afterwards only propose a guardian rotation, which waits out the
 * contract's timelock in public and can be cancelled (docs/contracts.md).
 *
 * @since 0.2.0
 */
import { PgClient } from "@effect/sql-pg"
import { GuardianClient } from "@pps/guardian"
import { Config, Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { type Address, getAddress, type Hex } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import type { Mode } from "@pps/api/ApiKeys"
import { migrate } from "../platform/Database.ts"
import { ChainError, connect, deployAndRecord } from "../settlement/Chains.ts"
import { GuardianIdentity } from "../settlement/GuardianIdentity.ts"

/** A key for the PostgreSQL advisory lock that serializes deploy steps. */
const deployLockKey = 46_630_001

const suffixOf = (mode: Mode) => (mode === "test" ? "TESTNET" : "MAINNET")

/**
 * Every variable the deploy step reads (checked against docker-compose.yml's deploy
 * service by test/deployment.test.ts).
 *
 * @since 0.3.0
 * @category config
 */
export const deployEnvironmentVariables = [
  "DATABASE_URL",
  "RPC_URL_TESTNET",
  "RPC_URL_MAINNET",
  "OPERATOR_KEY_TESTNET",
  "OPERATOR_KEY_MAINNET",
  "FAUCET_KEY_TESTNET",
  "GUARDIAN_URL",
  "GUARDIAN_SHARED_SECRET"
] as const

/**
 * The deploy step's own configuration, read from its environment.
 *
 * @since 0.2.0
 * @category config
 */
export const deployConfig = (mode: Mode) =>
  Config.all({
    databaseUrl: Config.Redacted("DATABASE_URL"),
    rpcUrl: Config.String(`RPC_URL_${suffixOf(mode)}`),
    operatorKey: Config.Redacted(`OPERATOR_KEY_${suffixOf(mode)}`),
    faucetKey: Config.option(Config.Redacted("FAUCET_KEY_TESTNET")),
    guardianUrl: Config.String("GUARDIAN_URL"),
    guardianSharedSecret: Config.Redacted("GUARDIAN_SHARED_SECRET")
  })

/**
 * Deploys and records the contracts of `mode`; the addresses and the owner's address.
 *
 * @since 0.2.0
 * @category constructors
 */
export const deployStep = (mode: Mode, faucetAddress: Option.Option<Address>, replaceOlderVersions = false) =>
  Effect.gen(function*() {
    const config = yield* deployConfig(mode)
    const owner = yield* Effect.try({
      try: () => privateKeyToAccount(Redacted.value(config.operatorKey) as Hex),
      catch: () => new ChainError({ message: `OPERATOR_KEY_${suffixOf(mode)} must be a 0x-prefixed private key` })
    })
    const faucet = mode === "live"
      ? Option.none<Address>()
      : Option.orElse(faucetAddress, () =>
        Option.map(config.faucetKey, (key) => privateKeyToAccount(Redacted.value(key) as Hex).address))
    const client = yield* connect(mode, config.rpcUrl)
    const sql = yield* SqlClient.SqlClient
    const run = Effect.gen(function*() {
      yield* migrate
      return yield* deployAndRecord(mode, client, config.rpcUrl, owner, Option.toArray(faucet), {
        replaceOlderVersions,
        howToMigrate: `To move to it, run \`npm run -s admin -- chain deploy --mode ${mode} --migrate\``
      })
    })
    // One connection holds the lock for the whole step (an advisory lock is per session).
    const contracts = yield* sql.withTransaction(
      sql`SELECT pg_advisory_xact_lock(${deployLockKey})`.pipe(Effect.andThen(run))
    )
    return {
      mode,
      owner: owner.address,
      faucet: Option.getOrNull(Option.map(faucet, getAddress)),
      contracts
    }
  }).pipe(
    Effect.provide(
      Layer.unwrap(Effect.gen(function*() {
        const config = yield* deployConfig(mode)
        return Layer.mergeAll(
          PgClient.layer({ url: config.databaseUrl, applicationName: "pps-deploy" }),
          GuardianIdentity.layer.pipe(
            Layer.provide(GuardianClient.GuardianClient.layerHttp(config.guardianUrl, config.guardianSharedSecret))
          )
        )
      }))
    )
  )
