/**
 * D53 on a data directory made with a ConfidentialToken v1 recorded (what the release before
 * v2 leaves behind): the start refuses, naming the way to migrate; a start with
 * `MIGRATE_CONTRACTS=true` deploys v2 in its place and records it; the next plain start reuses
 * it. Real embedded anvil and PGlite; the v1 contract is the previous release's bytecode.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Deploy } from "@pps/contracts"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Option } from "effect"
import { SqlClient } from "effect/sql"
import { encodeDeployData, getAddress } from "viem"
import * as V1 from "../../contracts/test/fixtures/ConfidentialTokenV1.ts"
import { Chains } from "../src/settlement/Chains.ts"
import { makeTestGuardian, settlementDependencies } from "./support/chainFixtures.ts"

const guardian = makeTestGuardian("contracts-v2-migration")

/** The chains of one start on `dataDir`, as the server builds them; the node stops at the end. */
const start = <A, E>(
  dataDir: string,
  migrateContracts: boolean,
  body: (chains: typeof Chains.Service) => Effect.Effect<A, E, SqlClient.SqlClient>
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
          // The embedded node writes its state every second: let it write the deployment.
          yield* Effect.sleep(2_500)
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
          yield* Effect.sleep(2_500)
          return chain.contracts
        })
      )
      // The next plain start finds v2 recorded and reuses it.
      const again = yield* start(dataDir, false, (chains) => Effect.succeed(Option.getOrThrow(chains.get("test")).contracts))
      assert.deepStrictEqual(again, migrated)
    }), 240_000)
})
