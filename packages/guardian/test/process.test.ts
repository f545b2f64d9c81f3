/**
 * The guardian as its own process (`pnpm guardian`), killed with SIGKILL between
 * authorize and settle and started again on the same data directory: a reservation
 * answered before the crash is neither lost nor doubled. Settled after the restart it
 * moves the funds once; never settled, it expires and frees them once.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Note } from "@pps/crypto"
import { Context, Effect, Layer, Redacted } from "effect"
import { getAddress, type Hex, hexToBytes } from "viem"
import { GuardianClient } from "../src/index.ts"
import { chainId, confidentialRequest, contract, newParty, nowSeconds, type Party } from "./support/transfers.ts"
import { freePort } from "./support/freePort.ts"
import { childNodeFlags } from "../../../scripts/childEnvironment.ts"

const main = fileURLToPath(new URL("../src/main.ts", import.meta.url))
const sharedSecret = "process-test-shared-secret-0123456789abcdef"
const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) child.kill("SIGKILL")
})

const start = async (dataDir: string, port: number) => {
  const child = spawn(process.execPath, [...childNodeFlags(), main], {
    env: {
      ...process.env,
      DATA_DIR: dataDir,
      GUARDIAN_PORT: String(port),
      GUARDIAN_SHARED_SECRET: sharedSecret,
      GUARDIAN_RESERVATION_MARGIN_SECONDS: "1",
      GUARDIAN_SWEEP_INTERVAL_MS: "200",
      LOG_LEVEL: "Warn"
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  children.push(child)
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  const deadline = Date.now() + 45_000
  for (;;) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200) break
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error("the guardian process did not become ready")
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  return { child, exited }
}

const withClient = <A, E>(
  port: number,
  use: (client: GuardianClient.GuardianClientShape) => Effect.Effect<A, E>,
  secret: string = sharedSecret
) =>
  Effect.runPromise(
    Effect.scoped(Effect.gen(function*() {
      const context = yield* Layer.build(GuardianClient.GuardianClient.layerHttp(`http://127.0.0.1:${port}`, Redacted.make(secret)))
      return yield* use(Context.get(context, GuardianClient.GuardianClient))
    }))
  )

const balanceOf = (client: GuardianClient.GuardianClientShape, party: Party) =>
  client.sealedBalance({ chainId, contract, account: party.address, publicKey: `0x${Buffer.from(party.keys.publicKey).toString("hex")}` }).pipe(
    Effect.map((sealed) => {
      const opened = Note.openBalanceStatement(party.keys, hexToBytes(sealed.sealedStatement as Hex), { chainId, contract: getAddress(contract), account: party.address })
      if (!opened.ok) throw new Error(opened.reason)
      return opened.value.amount
    })
  )

describe("guardian process", () => {
  it("kill -9 between authorize and settle: the reservation is settled or expired after restart, never lost or doubled", { timeout: 120_000 }, async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-guardian-proc-"))
    try {
      const port = await freePort()
      const alice = newParty()
      const bob = newParty()
      let guardian = await start(dataDir, port)
      const info = await withClient(port, (client) => client.info)
      // Unauthenticated calls are refused before any RPC is decoded.
      const anonymous = await fetch(`http://127.0.0.1:${port}/rpc`, { method: "POST", body: "[]" })
      assert.strictEqual(anonymous.status, 401)
      // A client with the wrong secret is told so: a misconfiguration, not an outage to retry.
      const refused = await withClient(port, (client) => Effect.flip(client.info), "not-the-shared-secret-0123456789abcdef")
      assert.strictEqual(refused.reason, "unauthorized")

      const settledLater = confidentialRequest({ guardianKey: info.encryptionKey as Hex, from: alice, to: bob, amount: 400n })
      // Its deadline must outlast the first restart even on a loaded machine (CI runs suites in
      // parallel): a reservation that expired before the check would free the balance early.
      const neverSettled = confidentialRequest({ guardianKey: info.encryptionKey as Hex, from: alice, to: bob, amount: 600n, deadline: nowSeconds() + 20n })
      await withClient(port, (client) =>
        Effect.gen(function*() {
          yield* client.credit({ chainId, contract, account: alice.address, amount: 1_000n, creditId: "process-test-shield" })
          assert.strictEqual((yield* client.authorize(settledLater))._tag, "Authorized")
          assert.strictEqual((yield* client.authorize(neverSettled))._tag, "Authorized")
        }))
      guardian.child.kill("SIGKILL")
      await guardian.exited

      guardian = await start(dataDir, port)
      await withClient(port, (client) =>
        Effect.gen(function*() {
          // Both reservations survived the crash: nothing is available.
          assert.strictEqual((yield* client.authorize(confidentialRequest({ guardianKey: info.encryptionKey as Hex, from: alice, to: bob, amount: 1n })))._tag, "InsufficientBalance")
          // The attestation is the one answered before the crash, not a second one.
          const replay = yield* client.authorize(settledLater)
          assert.strictEqual(replay._tag, "Authorized")
          assert.strictEqual((yield* client.settle({ transferId: settledLater.transferId, outcome: "confirmed" })).status, "confirmed")
          assert.strictEqual((yield* client.settle({ transferId: settledLater.transferId, outcome: "confirmed" })).status, "confirmed")
          assert.strictEqual(yield* balanceOf(client, alice), 600n)
          assert.strictEqual(yield* balanceOf(client, bob), 400n)
        }))
      guardian.child.kill("SIGKILL")
      await guardian.exited

      // Past the second reservation's deadline + margin (1 s), the restarted guardian expires it once.
      const expiredAtMs = Number(neverSettled.deadline) * 1000 + 1_000
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiredAtMs - Date.now() + 500)))
      guardian = await start(dataDir, port)
      await new Promise((resolve) => setTimeout(resolve, 1_500))
      await withClient(port, (client) =>
        Effect.gen(function*() {
          assert.strictEqual((yield* client.settle({ transferId: neverSettled.transferId, outcome: "failed" })).status, "expired")
          assert.strictEqual((yield* client.authorize(confidentialRequest({ guardianKey: info.encryptionKey as Hex, from: alice, to: bob, amount: 601n })))._tag, "InsufficientBalance")
          assert.strictEqual((yield* client.authorize(confidentialRequest({ guardianKey: info.encryptionKey as Hex, from: alice, to: bob, amount: 600n })))._tag, "Authorized")
          assert.strictEqual(yield* balanceOf(client, alice), 600n)
        }))
      guardian.child.kill("SIGTERM")
      await guardian.exited
      assert.isFalse(fs.existsSync(path.join(dataDir, "guardian", "guardian.lock")), "the lock is released on SIGTERM")
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  })
})
