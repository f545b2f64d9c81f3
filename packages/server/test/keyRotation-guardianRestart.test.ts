/**
 * Goal (D55): a key rotation's hold on the holder's transfers outlives a guardian restart. The
 * guardian runs as the server's child process (the production default), on embedded anvil and
 * PGlite. The guardian attests Alice's rotation (the endpoint's first step); the child is killed
 * with SIGKILL inside the rotation's window and the server starts it again. A transfer to or from
 * Alice, which would be sealed to her old key, is still refused (503, retry) while an unrelated
 * pair's transfer goes through the restarted guardian; the rotation then completes through the
 * endpoint, and the next transfer to Alice opens with the new key only.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { assert, describe, layer } from "@effect/vitest"
import { TransferRecord } from "@pps/api/Transfers"
import { EncryptionKey } from "@pps/crypto"
import { GuardianClient } from "@pps/guardian"
import { Client, Confidential } from "@pps/sdk/internal"
import { Context, Effect } from "effect"
import { pidFileName } from "../src/guardian/EmbeddedGuardian.ts"
import { ulid } from "../src/platform/Ids.ts"
import { decryptTransfer, fundedPair } from "./support/confidentialClient.ts"
import { bearer, decodeAnswer, postJson, send } from "./support/http.ts"
import { makeTestServer, pglite, TestServer, type TestServerShape } from "./support/TestServer.ts"

const clientOf = (server: TestServerShape, apiKey: string) => Client.make({ baseUrl: server.baseUrl, apiKey })

const postTransfer = (server: TestServerShape, apiKey: string, to: string, amount: string) =>
  send(`${server.baseUrl}/v1/transfers`, postJson({ ...bearer(apiKey), "idempotency-key": `t-${ulid()}` }, { to, amount }))

/** A transfer tried until the guardian answers it (it is restarting): its confirmed record. */
const confirmedOnceServing = (server: TestServerShape, apiKey: string, to: string, amount: string) =>
  Effect.gen(function*() {
    const deadline = Date.now() + 90_000
    for (;;) {
      const response = yield* postTransfer(server, apiKey, to, amount)
      if (response.status === 201) {
        const transfer = decodeAnswer(TransferRecord, response, 201)
        assert.strictEqual(transfer.status, "confirmed")
        return transfer
      }
      assert.strictEqual(response.status, 503, response.text)
      if (Date.now() > deadline) return yield* Effect.die(new Error("the restarted guardian never answered"))
      yield* Effect.sleep("500 millis")
    }
  })

const guardianPid = (server: TestServerShape) => Number(fs.readFileSync(path.join(server.dataDir, pidFileName), "utf8"))

describe("key rotation hold across a guardian restart (D55)", () => {
  layer(makeTestServer({ database: pglite, config: { guardianInProcess: false } }), { timeout: "300 seconds", excludeTestServices: true })(
    "guardian child process",
    (it) => {
      it.effect("a transfer sealed to the old key is refused after a restart inside the window; after the rotation, the new key opens", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const pair = yield* fundedPair(server, "50")
          const alice = pair.sender
          const other = yield* fundedPair(server, "5")
          const status = yield* Effect.promise(() => Confidential.encryptionKeyStatus(clientOf(server, alice.api_key)))
          const me = (yield* send(`${server.baseUrl}/v1/accounts/me`, { headers: bearer(alice.api_key) })).json as { public_key: string }
          const second = EncryptionKey.generate()

          // The rotation's first step: the guardian attests it and holds Alice's transfers.
          const guardian = Context.get(server.services, GuardianClient.GuardianClient)
          yield* guardian.keyRotation({
            chainId: BigInt(status.chain_id),
            contract: status.contracts.USDG,
            account: me.public_key,
            newKey: `0x${Buffer.from(second.publicKey).toString("hex")}`,
            nonce: 1n << 200n,
            deadline: BigInt(Math.floor(Date.now() / 1000) + 600)
          }).pipe(Effect.orDie)
          assert.strictEqual((yield* postTransfer(server, other.sender.api_key, alice.handle, "1")).status, 503)

          // Killed inside the window; the server starts it again on the same directory.
          const killed = guardianPid(server)
          process.kill(killed, "SIGKILL")
          yield* confirmedOnceServing(server, other.sender.api_key, `@${other.recipientHandle}`, "0.5")
          assert.notStrictEqual(guardianPid(server), killed, "a new guardian process serves")

          // Still held: to Alice (sealed to her old key; the payer has the funds) and from her.
          const toAlice = yield* postTransfer(server, other.sender.api_key, alice.handle, "1")
          assert.strictEqual(toAlice.status, 503, toAlice.text)
          const fromAlice = yield* postTransfer(server, alice.api_key, `@${pair.recipientHandle}`, "1")
          assert.strictEqual(fromAlice.status, 503, fromAlice.text)

          // The rotation completes (the endpoint attests afresh, mines, and the hold is lifted).
          yield* Effect.tryPromise(() => Confidential.rotateKey(clientOf(server, alice.api_key), second)).pipe(Effect.orDie)
          const incoming = yield* confirmedOnceServing(server, other.sender.api_key, alice.handle, "1.25")
          const opened = yield* decryptTransfer(server.baseUrl, alice.api_key, second, incoming.transfer_id)
          assert.strictEqual(opened.amount, 1_250_000n)
          const stale = yield* Effect.flip(Effect.tryPromise(() => Confidential.decryptTransfer(clientOf(server, alice.api_key), pair.senderKey, incoming.transfer_id)))
          assert.isDefined(stale)
          const balance = yield* Effect.promise(() => Confidential.readBalances(clientOf(server, alice.api_key), second))
          assert.strictEqual(balance.balances.find((entry) => entry.asset === "USDG")?.amount, "51.25")
        }))
    }
  )
})
