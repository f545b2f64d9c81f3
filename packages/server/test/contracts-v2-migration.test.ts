/**
 * D53 on a data directory made with a ConfidentialToken v1 recorded (what the release before
 * v2 leaves behind): the start refuses, naming the way to migrate, and so does an api node of an
 * external chain where v1 is recorded (naming the operator's deploy step); a start with
 * `MIGRATE_CONTRACTS=true` deploys v2 in its place and records it, and a key registered under v1
 * counts as unregistered again (the holder registers it on v2); the next plain start reuses it.
 * Real embedded anvil and PGlite; the v1 contract is the previous release's bytecode.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Deploy } from "@pps/contracts"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { encodeDeployData, getAddress } from "viem"
import { generatePrivateKey } from "viem/accounts"
import * as V1 from "../../contracts/test/fixtures/ConfidentialTokenV1.ts"
import { AppConfig } from "../src/config/AppConfig.ts"
import { Chains } from "../src/settlement/Chains.ts"
import { DevChain } from "../src/settlement/DevChain.ts"
import { makeTestGuardian, settlementDependencies } from "./support/chainFixtures.ts"
import { testConfig } from "./support/TestServer.ts"

const guardian = makeTestGuardian("contracts-v2-migration")

/** An api node of an external chain (`RPC_URL_TESTNET`) on the same database, as it starts. */
const externalNodeStart = (dataDir: string, rpcUrl: string) =>
  Effect.exit(Layer.build(Layer.fresh(Chains.layer).pipe(
    // Fresh: the start's own Chains and DevChain would otherwise be reused.
    Layer.provide(Layer.fresh(DevChain.layer)),
    Layer.provide(Layer.succeed(AppConfig, testConfig(dataDir, {
      rpcUrlTestnet: Option.some(rpcUrl),
      relayerKeysTestnet: Option.some(Redacted.make(generatePrivateKey()))
    })))
  )).pipe(Effect.scoped))

/** A holder whose key was registered under v1. */
const registeredHolder = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    yield* sql`
      INSERT INTO accounts (account_id, handle, type, wallet_address, wallet_key_sealed, kyc_status, created_at)
      VALUES ('acct_v1holder', 'v1holder', 'personal', '0x00000000000000000000000000000000000000a1', ${new Uint8Array(8)}, 'verified', now())`
    yield* sql`
      INSERT INTO encryption_keys (account_id, mode, public_key, registered_at, created_at)
      VALUES ('acct_v1holder', 'test', ${new Uint8Array(64)}, now(), now())`
  })

const holderRegistered = (sql: SqlClient.SqlClient) =>
  sql<{ readonly registered: boolean }>`
    SELECT registered_at IS NOT NULL AS registered FROM encryption_keys WHERE account_id = 'acct_v1holder'`.pipe(
    Effect.map((rows) => rows[0]?.registered)
  )

/** The chains of one start on `dataDir`, as the server builds them; the node stops at the end. */
const start = <A, E>(
  dataDir: string,
  migrateContracts: boolean,
  body: (chains: typeof Chains.Service) => Effect.Effect<A, E, Layer.Success<ReturnType<typeof settlementDependencies>>>
) =>
  Effect.gen(function*() {
    return yield* body(yield* Chains)
  }).pipe(Effect.provide(settlementDependencies(dataDir, guardian, { migrateContracts })))

describe("ConfidentialToken v2 migration (D53)", () => {
  it.live("a start over a recorded v1 refuses and names MIGRATE_CONTRACTS; a migrating start replaces it with v2", () =>
    Effect.gen(function*() {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-v2-migration-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true })))

      // The previous release's deployment: a v1 ConfidentialToken recorded for USDG.
      const v1 = yield* start(dataDir, false, (chains) =>
        Effect.gen(function*() {
          const chain = Option.getOrThrow(chains.get("test"))
          const relayer = chain.relayers[0]!
          const nonce = yield* Effect.promise(() => chain.client.getTransactionCount({ address: relayer.address, blockTag: "pending" }))
          const fees = yield* Effect.promise(() => chain.client.getBlock())
          const serialized = yield* Effect.promise(() =>
            relayer.signTransaction({
              type: "eip1559",
              chainId: chain.chainId,
              nonce,
              to: null,
              gas: 4_000_000n,
              maxPriorityFeePerGas: 1_000_000_000n,
              maxFeePerGas: (fees.baseFeePerGas ?? 0n) * 2n + 1_000_000_000n,
              data: encodeDeployData({
                abi: V1.abi,
                bytecode: V1.bytecode,
                args: [chain.contracts.usdg, relayer.address, guardian.signerAddress, { x: 1n, y: 2n }, 60n]
              })
            })
          )
          const hash = yield* Effect.promise(() => chain.client.sendRawTransaction({ serializedTransaction: serialized }))
          const receipt = yield* Effect.promise(() => chain.client.waitForTransactionReceipt({ hash, pollingInterval: 50 }))
          const address = getAddress(receipt.contractAddress!)
          assert.strictEqual(yield* Effect.promise(() => Deploy.versionOf(chain.client, address)), "1")
          const sql = yield* SqlClient.SqlClient
          yield* sql`UPDATE chain_deployments SET addresses = ${JSON.stringify({ ...chain.contracts, confidentialUsdg: address })} WHERE mode = 'test'`
          yield* registeredHolder(sql)
          // An api node of this release on an external chain where v1 is recorded refuses too.
          const external = yield* externalNodeStart(dataDir, chain.rpcUrl)
          assert.isTrue(external._tag === "Failure", "an external api node started over a recorded v1")
          const why = external._tag === "Failure" ? Cause.pretty(external.cause) : ""
          assert.include(why, `recorded ConfidentialToken ${address} is version 1`)
          assert.include(why, "chain deploy --mode test --migrate")
          // The stop that follows writes the embedded chain's state, the deployment in it (D89).
          return { address, others: chain.contracts }
        })
      )

      const refused = yield* Effect.exit(start(dataDir, false, () => Effect.void))
      assert.isTrue(refused._tag === "Failure")
      const message = refused._tag === "Failure" ? Cause.pretty(refused.cause) : ""
      assert.include(message, `recorded ConfidentialToken ${v1.address} is version 1`)
      assert.include(message, "MIGRATE_CONTRACTS=true npm start")

      const migrated = yield* start(dataDir, true, (chains) =>
        Effect.gen(function*() {
          const chain = Option.getOrThrow(chains.get("test"))
          assert.notStrictEqual(chain.contracts.confidentialUsdg, v1.address)
          assert.strictEqual(chain.contracts.confidentialEth, v1.others.confidentialEth)
          assert.strictEqual(chain.contracts.usdg, v1.others.usdg)
          assert.strictEqual(yield* Effect.promise(() => Deploy.versionOf(chain.client, chain.contracts.confidentialUsdg)), "2")
          // v2's registry is empty: the key counts as unregistered until its holder registers it there.
          assert.strictEqual(yield* holderRegistered(yield* SqlClient.SqlClient), false)
          return chain.contracts
        })
      )
      // The next plain start finds v2 recorded and reuses it.
      const again = yield* start(dataDir, false, (chains) => Effect.succeed(Option.getOrThrow(chains.get("test")).contracts))
      assert.deepStrictEqual(again, migrated)
    }), 240_000)
})
