/**
 * Goal (D55): after a holder's key rotation answers on one api node, every other api node seals
 * the holder's next transfer to the new key. The distributed topology in one test: a chain node
 * (anvil), the guardian as its own process, the operator's deploy step, and two api nodes on one
 * PostgreSQL database and the real NATS, each with its own relayers. Node B first seals a transfer
 * to Alice (so it remembers her key); Alice rotates through node A; B's very next transfer to her
 * opens with the new key and not with the old one (B heard the replacement on the control channel
 * before A answered).
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { TransferRecord } from "@pps/api/Transfers"
import { Anvil } from "@pps/contracts"
import { EncryptionKey } from "@pps/crypto"
import { Client, Confidential } from "@pps/sdk/internal"
import { ConfigProvider, Context, Effect, Layer, Option, Redacted } from "effect"
import { createTestClient, type Hex, http, parseEther } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { freePort } from "../../../scripts/freePort.ts"
import { deployStep } from "../src/admin/deploy.ts"
import { guardianMainPath } from "../src/guardian/EmbeddedGuardian.ts"
import { ulid } from "../src/platform/Ids.ts"
import { decryptTransfer, fundedPair, registerKey } from "./support/confidentialClient.ts"
import { bearer, createAccount, decodeAnswer, postJson, send } from "./support/http.ts"
import { deleteStream, natsAvailable, natsUrl } from "./support/requireNats.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { freshPostgresDatabase, makeTestServer, postgres, TestServer, type TestServerShape } from "./support/TestServer.ts"
import { eventually } from "./support/webhooks-receiver.ts"
import { childNodeFlags } from "../../../scripts/childEnvironment.ts"

const stream = `PPS_TEST_${ulid()}`
const sharedSecret = "key-rotation-nodes-shared-secret-0123456789"
const children: Array<ChildProcess> = []
afterAll(async () => {
  for (const child of children) child.kill("SIGKILL")
  await deleteStream(stream)
}, 60_000)

/** The chain node, for the scope's life. */
const chainNode = Effect.acquireRelease(
  Effect.promise(() => Anvil.start({ chainId: Anvil.testnetChainId, blockTimeSeconds: 0.1 })),
  (anvil) => Effect.promise(() => anvil.stop())
)

/** Fresh keys with ether on the chain (anvil's cheat), as an operator funds its relayers. */
const fundedKeys = (rpcUrl: string, count: number) =>
  Effect.promise(async () => {
    const cheats = createTestClient({ mode: "anvil", transport: http(rpcUrl) })
    const keys = Array.from({ length: count }, () => generatePrivateKey())
    for (const key of keys) await cheats.setBalance({ address: privateKeyToAccount(key).address, value: parseEther("100") })
    return keys
  })

/** The guardian as its own process, following the chain; its URL once it answers. */
const guardianProcess = (rpcUrl: string) =>
  Effect.promise(async () => {
    const port = await freePort()
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-rotation-guardian-"))
    const child = spawn(process.execPath, [...childNodeFlags(), guardianMainPath], {
      env: {
        ...process.env,
        DATA_DIR: dataDir,
        GUARDIAN_PORT: String(port),
        GUARDIAN_SHARED_SECRET: sharedSecret,
        GUARDIAN_RPC_URLS: `${Anvil.testnetChainId}=${rpcUrl}`,
        LOG_LEVEL: "Warn"
      },
      stdio: ["ignore", "inherit", "inherit"]
    })
    children.push(child)
    const url = `http://127.0.0.1:${port}`
    const deadline = Date.now() + 60_000
    while ((await fetch(`${url}/readyz`).then((r) => r.status, () => 0)) !== 200) {
      if (Date.now() > deadline) throw new Error("the guardian process did not become ready")
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    return url
  })

/** The operator's deploy step (`admin chain deploy --mode test`), with its own environment. */
const deploy = (env: Record<string, string>) =>
  deployStep("test", Option.none()).pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromUnknown(env))), Effect.orDie)

const node = (databaseUrl: string, shared: Record<string, unknown>, relayerKeys: ReadonlyArray<Hex>, faucetKey?: Hex) =>
  Layer.build(makeTestServer({
    database: postgres,
    databaseUrl,
    config: {
      ...shared,
      relayerKeysTestnet: Option.some(Redacted.make(relayerKeys.join(","))),
      faucetKeyTestnet: faucetKey === undefined ? Option.none() : Option.some(Redacted.make(faucetKey))
    }
  })).pipe(Effect.map((context) => Context.get(context, TestServer)))

const transferConfirmed = (server: TestServerShape, apiKey: string, to: string, amount: string) =>
  send(`${server.baseUrl}/v1/transfers`, postJson({ ...bearer(apiKey), "idempotency-key": `t-${ulid()}` }, { to, amount })).pipe(
    Effect.map((response) => decodeAnswer(TransferRecord, response, 201)),
    Effect.tap((transfer) => Effect.sync(() => assert.strictEqual(transfer.status, "confirmed")))
  )

const cacheOn = (server: TestServerShape) => server.logs.some((line) => line.includes("encryption key cache on"))

describe.skipIf(!natsAvailable || !postgresAvailable)("key rotation seen by every api node (D55)", () => {
  it.live("after a rotation on node A, node B's next transfer to the holder seals to the new key", () =>
    Effect.scoped(Effect.gen(function*() {
      const anvil = yield* chainNode
      const databaseUrl = yield* freshPostgresDatabase
      const guardianUrl = yield* guardianProcess(anvil.rpcUrl)
      const [operatorKey, faucetKey, ...relayers] = yield* fundedKeys(anvil.rpcUrl, 6)
      yield* deploy({
        DATABASE_URL: databaseUrl,
        RPC_URL_TESTNET: anvil.rpcUrl,
        OPERATOR_KEY_TESTNET: operatorKey!,
        FAUCET_KEY_TESTNET: faucetKey!,
        GUARDIAN_URL: guardianUrl,
        GUARDIAN_SHARED_SECRET: sharedSecret
      })
      const shared = {
        natsUrl: Option.some(natsUrl),
        natsStream: stream,
        natsSubjectPrefix: `test.${stream.toLowerCase()}`,
        rpcUrlTestnet: Option.some(anvil.rpcUrl),
        guardianUrl: Option.some(guardianUrl),
        guardianSharedSecret: Option.some(Redacted.make(sharedSecret))
      }
      const a = yield* node(databaseUrl, shared, relayers.slice(0, 2), faucetKey)
      const b = yield* node(databaseUrl, shared, relayers.slice(2, 4))
      yield* eventually(Effect.sync(() => cacheOn(a) && cacheOn(b) ? true : undefined), "both nodes' key caches on")

      // Alice is the holder; Carol pays her through node B.
      const pair = yield* fundedPair(a, "10")
      const alice = pair.sender
      const suffix = ulid().toLowerCase().slice(-8)
      const carol = yield* createAccount(a, `carol-${suffix}`)
      yield* registerKey(a.baseUrl, carol.api_key)
      const grant = yield* send(`${a.baseUrl}/v1/test/faucet`, postJson(bearer(carol.api_key), { amount: "10" }))
      assert.strictEqual(grant.status, 200, grant.text)

      // B seals to Alice's first key, and remembers it.
      const before = yield* transferConfirmed(b, carol.api_key, alice.handle, "1.5")
      assert.strictEqual((yield* decryptTransfer(b.baseUrl, alice.api_key, pair.senderKey, before.transfer_id)).amount, 1_500_000n)

      // Alice rotates through A.
      const second = EncryptionKey.generate()
      yield* Effect.tryPromise(() => Confidential.rotateKey(Client.make({ baseUrl: a.baseUrl, apiKey: alice.api_key }), second)).pipe(Effect.orDie)

      // B's very next transfer to her opens with the new key only.
      const after = yield* transferConfirmed(b, carol.api_key, alice.handle, "2.25")
      assert.strictEqual((yield* decryptTransfer(b.baseUrl, alice.api_key, second, after.transfer_id)).amount, 2_250_000n)
      const stale = yield* Effect.flip(Effect.tryPromise(() =>
        Confidential.decryptTransfer(Client.make({ baseUrl: b.baseUrl, apiKey: alice.api_key }), pair.senderKey, after.transfer_id)
      ))
      assert.isDefined(stale)
      assert.isFalse(a.logs.some((line) => line.includes("encryption key replacement not acknowledged")), "B answered A's broadcast")
    })), 300_000)
})
