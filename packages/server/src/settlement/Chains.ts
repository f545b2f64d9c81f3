/**
 * The chain of each mode (D9): its node, its contracts and the accounts the
 * server signs with.
 *
 * - testnet (`hc_test_` keys, chain id 46630): the node at `RPC_URL_TESTNET`, or
 *   else embedded anvil started from npm as a child process, its state in
 *   `DATA_DIR/chain` (written by the server once the chain rests and at a stop, D89,
 *   so even kill -9 keeps balances), mined on demand by the server (D88) and stopped
 *   with the server;
 * - mainnet (`hc_live_` keys, chain id 4663): the node at `RPC_URL_MAINNET`, or
 *   none, and then live keys get 403 `livemode_unavailable` wherever the chain
 *   is needed. No code path hands a test key the mainnet client: callers get
 *   the chain of the principal's mode only.
 *
 * A node whose chain id is not its mode's is refused at start. The contracts are
 * deployed once per mode, idempotently: the addresses are recorded and reused
 * while their code is on chain.
 *
 * Accounts: relayers submit transfers, each with its own nonce sequence so
 * throughput is not capped by one; on a test chain, the faucet key mints test USDG
 * (a minter of the test token, which can touch no confidential balance). The
 * contracts' owner key is not among them (the owner key kept off the api tier): embedded, a fresh owner key is
 * made in memory for a deployment and forgotten after it (nothing can rotate the
 * embedded chain's guardian afterwards); on an external chain, the operator deploys
 * with `npm run -s admin -- chain deploy` (admin/deploy.ts) on a machine of its own,
 * and api nodes wait for the recorded addresses. Embedded, relayer and faucet keys are
 * generated once (CSPRNG), sealed under WALLET_KEK and funded with anvil's
 * `anvil_setBalance`; external chains take funded keys from configuration.
 *
 * @since 0.1.0
 */
import { Deploy, RpcTransport, TestUsdgArtifact } from "@pps/contracts"
import { Context, Data, DateTime, Effect, Layer, Option, Redacted, Schedule, Schema } from "effect"
import { SqlClient } from "effect/sql"
import {
  type Address,
  bytesToHex,
  createPublicClient,
  createTestClient,
  createWalletClient,
  getAddress,
  type Hex,
  hexToBytes,
  type LocalAccount,
  type PublicClient
} from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { chainIdOfMode, type Mode } from "@pps/api/ApiKeys"
import { AppConfig } from "../config/AppConfig.ts"
import * as Invariant from "../platform/Invariant.ts"
import { SecretBox } from "../platform/SecretBox.ts"
import { deployContracts } from "./deployContracts.ts"
import { DevChain } from "./DevChain.ts"
import { GuardianIdentity } from "./GuardianIdentity.ts"
import { localAccount } from "./LocalAccounts.ts"

/**
 * A node could not be reached, answered with the wrong chain id, refused a call, or a start-up
 * step on it failed.
 *
 * `retryable` says whether the same call can succeed later (a node that did not answer, a
 * timeout) or not (a call the node refused, a wrong configuration); settlement sets it on every
 * failure it types, and an error made without it (a registry read elsewhere) counts as
 * retryable: a transport failure is what an unclassified node call meets.
 *
 * @since 0.1.0
 * @category errors
 */
export class ChainError extends Data.TaggedError("ChainError")<{
  readonly message: string
  readonly cause?: unknown
  readonly retryable?: boolean
}> {
  /** Whether trying the same call again can help. */
  get isRetryable(): boolean {
    return this.retryable ?? true
  }
}

/**
 * Everything the server needs of one mode's chain.
 *
 * @since 0.1.0
 * @category models
 */
export interface ChainContext {
  readonly mode: Mode
  readonly chainId: number
  readonly rpcUrl: string
  readonly client: PublicClient
  readonly contracts: Deploy.Addresses
  /** The test USDG minter of a test chain; None on mainnet or when none is configured. */
  readonly faucet: Option.Option<LocalAccount>
  readonly relayers: ReadonlyArray<LocalAccount>
  /** Whether this is the embedded anvil (test cheats such as anvil_setBalance are allowed). */
  readonly embedded: boolean
}

/**
 * @since 0.1.0
 * @category services
 */
export class Chains extends Context.Service<Chains, {
  /** The chain of a mode, or None when that mode has none configured. */
  readonly get: (mode: Mode) => Option.Option<ChainContext>
}>()("server/settlement/Chains") {
  static readonly layer = Layer.effect(
    Chains,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const devChain = yield* DevChain
      const testnet = yield* Option.match(devChain.rpcUrl, {
        onSome: (url) => embeddedTestnet(url),
        onNone: () =>
          Invariant.some("DevChain starts no embedded chain only when RPC_URL_TESTNET is set")(config.rpcUrlTestnet).pipe(
            Effect.flatMap((url) => externalChain("test", url, config.relayerKeysTestnet, config.faucetKeyTestnet))
          )
      })
      const mainnet = yield* Option.match(config.rpcUrlMainnet, {
        onNone: () => Effect.succeed(Option.none<ChainContext>()),
        onSome: (url) =>
          externalChain("live", url, config.relayerKeysMainnet, Option.none()).pipe(Effect.map(Option.some))
      })
      return Chains.of({ get: (mode) => (mode === "test" ? Option.some(testnet) : mainnet) })
    })
  )
}

/** What a chain key's sealed value is bound to (D54's re-seal opens it with the same). */
export const chainKeyBinding = (mode: Mode, role: string, position: number) => `pps/chain-key/v1/${mode}/${role}/${position}`

/** The embedded chain's generated keys: read them, or generate and store them the first time. */
const embeddedKeys = (mode: Mode, relayerCount: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const box = yield* SecretBox
    const find = (role: "operator" | "faucet" | "relayer", position: number) =>
      Effect.gen(function*() {
        const rows = yield* sql<{ key_sealed: Uint8Array }>`
          SELECT key_sealed FROM chain_keys WHERE mode = ${mode} AND role = ${role} AND position = ${position}`
        if (rows[0] === undefined) return Option.none<LocalAccount>()
        // A stored key that does not open: WALLET_KEK is not the one it was sealed under (or the
        // row was altered). No retry helps; the operator must restore the key.
        const key = yield* box.open(new Uint8Array(rows[0].key_sealed), chainKeyBinding(mode, role, position)).pipe(
          Effect.mapError((cause) =>
            new ChainError({ message: `the embedded ${mode} chain's ${role} key does not open with WALLET_KEK`, cause, retryable: false })
          )
        )
        return Option.some(localAccount(bytesToHex(key)))
      })
    const load = (role: "faucet" | "relayer", position: number) =>
      Effect.gen(function*() {
        const found = yield* find(role, position)
        if (Option.isSome(found)) return found.value
        const privateKey = generatePrivateKey()
        const account = localAccount(privateKey)
        const sealed = box.seal(hexToBytes(privateKey), chainKeyBinding(mode, role, position))
        yield* sql`
          INSERT INTO chain_keys (mode, role, position, address, key_sealed)
          VALUES (${mode}, ${role}, ${position}, ${account.address}, ${sealed})`
        return account
      })
    const faucet = yield* load("faucet", 0)
    const relayers = yield* Effect.forEach(Array.from({ length: relayerCount }, (_, i) => i), (i) => load("relayer", i))
    // A data directory from before the owner key left the api tier: its owner key is used
    // once more below (to make the faucet key a minter), then deleted.
    const legacyOwner = yield* find("operator", 0)
    const forgetLegacyOwner = sql`DELETE FROM chain_keys WHERE mode = ${mode} AND role = 'operator'`.pipe(Effect.asVoid)
    return { faucet, relayers, legacyOwner, forgetLegacyOwner }
  })

const parseKeys = (text: Redacted.Redacted<string>, name: string) =>
  Effect.try({
    try: () =>
      Redacted.value(text).split(",").map((k) => k.trim()).filter((k) => k !== "").map((k) => localAccount(k as Hex)),
    catch: () => new ChainError({ message: `${name} must be comma-separated 0x-prefixed private keys`, retryable: false })
  })

/** viem's default retries of a failed call, for the one-off clients (deployment, dev-chain cheats). */
const viemRetries = 3

/** A node that has not answered after this many polls (~30 s) is reported as down. */
const nodeAnswerAttemptsMax = 120
const nodeAnswerPollMs = 250

/** Polls the node until it answers, and checks its chain id. */
export const connect = (mode: Mode, rpcUrl: string) =>
  Effect.gen(function*() {
    // cacheTime 0: viem otherwise caches the block number for its polling interval
    // (4 s), which would hold every confirmation back by up to that long.
    const client = createPublicClient({
      // JSON-RPC batching: the calls of one turn (broadcasts above all) share one HTTP request.
      transport: RpcTransport.keepAliveHttp(rpcUrl, { retryCount: 0, timeoutMs: 10_000, batchMax: 200 }),
      cacheTime: 0
    })
    const chainId = yield* Effect.tryPromise({
      try: () => client.getChainId(),
      catch: (cause) => new ChainError({ message: `the ${mode} node at ${rpcUrl} does not answer`, cause, retryable: true })
    }).pipe(Effect.retry({ times: nodeAnswerAttemptsMax, schedule: Schedule.spaced(nodeAnswerPollMs) }))
    if (chainId !== chainIdOfMode[mode]) {
      return yield* Effect.fail(
        new ChainError({ message: `the ${mode} node at ${rpcUrl} has chain id ${chainId}; expected ${chainIdOfMode[mode]}`, retryable: false })
      )
    }
    return client as PublicClient
  })

const DeploymentRecord = Schema.fromJsonString(Schema.Struct({
  usdg: Schema.String,
  weth: Schema.String,
  confidentialUsdg: Schema.String,
  confidentialEth: Schema.String
}))

/** The contracts recorded for a mode, if any. */
export const recordedContracts = (mode: Mode) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ addresses: string }>`SELECT addresses FROM chain_deployments WHERE mode = ${mode}`
    if (rows[0] === undefined) return Option.none<Deploy.Addresses>()
    const recorded = yield* Schema.decodeUnknownEffect(DeploymentRecord)(rows[0].addresses).pipe(
      Invariant.orDie("chain_deployments.addresses holds the JSON that deployAndRecord wrote")
    )
    return Option.some<Deploy.Addresses>({
      usdg: getAddress(recorded.usdg),
      weth: getAddress(recorded.weth),
      confidentialUsdg: getAddress(recorded.confidentialUsdg),
      confidentialEth: getAddress(recorded.confidentialEth)
    })
  })

/**
 * Deploys what is missing (the owner deploys and owns), makes each of `minters` a test
 * USDG minter, and records the addresses. Used by the embedded chain at start and by
 * the operator's administrative deploy step; never by an api node of an external chain.
 */
export const deployAndRecord = (
  mode: Mode,
  client: PublicClient,
  rpcUrl: string,
  owner: LocalAccount,
  minters: ReadonlyArray<Address>,
  migration: { readonly replaceOlderVersions: boolean; readonly howToMigrate: string }
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const guardian = yield* GuardianIdentity
    const previous = yield* recordedContracts(mode)
    const contracts = yield* deployContracts({
      client,
      owner,
      guardian,
      previous: Option.getOrUndefined(previous),
      replaceOlderVersions: migration.replaceOlderVersions
    }).pipe(Effect.mapError((cause) => deploymentError(mode, cause, migration.howToMigrate)))
    yield* Effect.tryPromise({
      try: () => grantMinters(client, rpcUrl, owner, contracts.usdg, minters),
      catch: (cause) => new ChainError({ message: `making the faucet a test USDG minter on ${mode} failed`, cause, retryable: true })
    })
    const now = DateTime.formatIso(yield* DateTime.now)
    const encoded = JSON.stringify(contracts)
    // D53: a replaced ConfidentialToken's registry is not the new one's. Every key of the mode
    // counts as unregistered again, so `confidential_ready` says false until the holder registers
    // its key on the new contracts (the same request as a first registration; only the holder can
    // prove possession for the new address).
    const replaced = Option.isSome(previous) &&
      (previous.value.confidentialUsdg !== contracts.confidentialUsdg || previous.value.confidentialEth !== contracts.confidentialEth)
    yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`
        INSERT INTO chain_deployments (mode, chain_id, addresses, updated_at)
        VALUES (${mode}, ${chainIdOfMode[mode]}, ${encoded}, ${now}::timestamptz)
        ON CONFLICT (mode) DO UPDATE SET addresses = EXCLUDED.addresses, chain_id = EXCLUDED.chain_id, updated_at = EXCLUDED.updated_at`
      if (replaced) yield* sql`UPDATE encryption_keys SET registered_at = NULL WHERE mode = ${mode}`
    }))
    return contracts
  })

/**
 * A deployment that failed; a recorded ConfidentialToken of an older version is not retried but
 * named, with the way to migrate it (D53): replacing it leaves what it holds behind.
 */
const deploymentError = (mode: Mode, cause: unknown, howToMigrate: string) =>
  cause instanceof Deploy.OlderConfidentialTokenError
    ? new ChainError({
      message: `the ${mode} chain's recorded ConfidentialToken ${cause.token} is version ${cause.version}; ` +
        `this release needs version ${Deploy.confidentialTokenVersion} (a new deployment, D53). ${howToMigrate} ` +
        `(docs/operations.md, "Upgrading the contracts to version 2")`,
      cause,
      retryable: false
    })
    : new ChainError({ message: `deploying the ${mode} contracts failed`, cause, retryable: true })

/** `setMinter(m, true)` from the test USDG's owner for each minter that is not one yet. */
const grantMinters = async (
  client: PublicClient,
  rpcUrl: string,
  owner: LocalAccount,
  usdg: Address,
  minters: ReadonlyArray<Address>
) => {
  const wallet = createWalletClient({ account: owner, transport: RpcTransport.keepAliveHttp(rpcUrl, { retryCount: viemRetries }) })
  for (const minter of minters) {
    const already = await client.readContract({ address: usdg, abi: TestUsdgArtifact.abi, functionName: "isMinter", args: [minter] })
    if (already) continue
    const hash = await wallet.writeContract({
      address: usdg,
      abi: TestUsdgArtifact.abi,
      functionName: "setMinter",
      args: [minter, true],
      chain: null,
      gas: 100_000n
    })
    const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 50 })
    if (receipt.status !== "success") throw new Error(`setMinter reverted in ${hash}`)
  }
}

/** How long an api node of an external chain waits for the operator's deploy step. */
const recordedContractsWaitMs = 60_000

/** The contracts the operator's deploy step recorded, checked to be on chain; waits for them a while. */
const awaitRecordedContracts = (mode: Mode, client: PublicClient) =>
  Effect.gen(function*() {
    const found = yield* recordedContracts(mode).pipe(
      Effect.flatMap(Option.match({
        onNone: () => Effect.fail("absent" as const),
        onSome: Effect.succeed
      })),
      Effect.tapError(() => Effect.logInfo("waiting for the contracts: run `npm run -s admin -- chain deploy`").pipe(
        Effect.annotateLogs("mode", mode)
      )),
      Effect.retry(Schedule.spaced(2_000).pipe(Schedule.upTo({ duration: recordedContractsWaitMs }))),
      Effect.mapError(() =>
        new ChainError({
          message: `no ${mode} contracts are recorded: run \`npm run -s admin -- chain deploy --mode ${mode}\` first`,
          retryable: false
        })
      )
    )
    for (const address of Object.values(found)) {
      const code = yield* Effect.tryPromise({
        try: () => client.getCode({ address }),
        catch: (cause) => new ChainError({ message: `reading the ${mode} contracts failed`, cause, retryable: true })
      })
      if (code === undefined || code === "0x") {
        return yield* Effect.fail(new ChainError({ message: `the recorded ${mode} contract ${address} has no code on chain`, retryable: false }))
      }
    }
    // D53: an api node of this release never sends its calls to an older ConfidentialToken; the
    // operator's deploy step replaces it (the embedded chain's start checks the same in Deploy.deploy).
    for (const token of [found.confidentialUsdg, found.confidentialEth]) {
      const version = yield* Effect.tryPromise({
        try: () => Deploy.versionOf(client, token),
        catch: (cause) => new ChainError({ message: `reading the ${mode} contracts failed`, cause, retryable: true })
      })
      if (version !== Deploy.confidentialTokenVersion) {
        return yield* Effect.fail(deploymentError(
          mode,
          new Deploy.OlderConfidentialTokenError(token, version),
          `To move to it, the operator runs \`npm run -s admin -- chain deploy --mode ${mode} --migrate\``
        ))
      }
    }
    return found
  })

/** Enough ether for any number of test transactions; only anvil lets us mint it. */
const embeddedBalanceWei = 10n ** 24n

const embeddedTestnet = (rpcUrl: string) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const client = yield* connect("test", rpcUrl)
    const { faucet, forgetLegacyOwner, legacyOwner, relayers } = yield* embeddedKeys("test", config.relayerCount)
    // The owner of what this start deploys: made here, used for the deployment only, never stored.
    const owner = Option.getOrElse(legacyOwner, () => privateKeyToAccount(generatePrivateKey()))
    const cheats = createTestClient({ mode: "anvil", transport: RpcTransport.keepAliveHttp(rpcUrl, { retryCount: viemRetries }) })
    yield* Effect.forEach([owner, faucet, ...relayers], (account) =>
      Effect.tryPromise({
        try: () => cheats.setBalance({ address: account.address, value: embeddedBalanceWei }),
        catch: (cause) => new ChainError({ message: "funding the embedded accounts failed", cause, retryable: true })
      }), { discard: true })
    const contracts = yield* deployAndRecord("test", client, rpcUrl, owner, [faucet.address], {
      replaceOlderVersions: config.migrateContracts,
      howToMigrate: "To move to it, stop the server and start it once with `MIGRATE_CONTRACTS=true npm start`"
    })
    yield* forgetLegacyOwner
    yield* Effect.logInfo("embedded chain ready").pipe(Effect.annotateLogs({ rpc_url: rpcUrl, ...contracts }))
    return {
      mode: "test",
      chainId: chainIdOfMode.test,
      rpcUrl,
      client,
      contracts,
      faucet: Option.some(faucet),
      relayers,
      embedded: true
    } satisfies ChainContext
  })

const externalChain = (
  mode: Mode,
  rpcUrl: string,
  relayerKeys: Option.Option<Redacted.Redacted<string>>,
  faucetKey: Option.Option<Redacted.Redacted<string>>
) =>
  Effect.gen(function*() {
    const suffix = mode === "test" ? "TESTNET" : "MAINNET"
    if (Option.isNone(relayerKeys)) {
      return yield* Effect.fail(new ChainError({ message: `RELAYER_KEYS_${suffix} is required with RPC_URL_${suffix}`, retryable: false }))
    }
    const relayers = yield* parseKeys(relayerKeys.value, `RELAYER_KEYS_${suffix}`)
    if (relayers.length === 0) {
      return yield* Effect.fail(new ChainError({ message: `RELAYER_KEYS_${suffix} must not be empty`, retryable: false }))
    }
    const faucet = Option.isNone(faucetKey)
      ? Option.none<LocalAccount>()
      : Option.fromNullishOr((yield* parseKeys(faucetKey.value, `FAUCET_KEY_${suffix}`))[0])
    const client = yield* connect(mode, rpcUrl)
    const contracts = yield* awaitRecordedContracts(mode, client)
    return { mode, chainId: chainIdOfMode[mode], rpcUrl, client, contracts, faucet, relayers, embedded: false } satisfies ChainContext
  })

/**
 * The ConfidentialToken of an asset on a chain.
 *
 * @since 0.1.0
 * @category constructors
 */
export const confidentialTokenOf = (chain: ChainContext, asset: "USDG" | "ETH"): `0x${string}` =>
  asset === "USDG" ? chain.contracts.confidentialUsdg : chain.contracts.confidentialEth
