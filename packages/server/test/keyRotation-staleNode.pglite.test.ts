/**
 * Goal (D55): a node that did not hear of a key rotation (it neither answered the broadcast in
 * time nor noticed its loss of NATS) seals one more transfer to the replaced key. The guardian
 * refuses it; the node answers a retryable 503, not 500, forgets the keys it remembers, and the
 * client's retry with the same Idempotency-Key creates the transfer, sealed to the new key.
 *
 * Embedded PGlite, embedded anvil and the real guardian. The stale node is the test server: its
 * key cache is live, and it remembers Alice's key once she has sent. The rotation runs on a
 * second "node" in the same process: the server's own KeyRotations and EncryptionKeys layers,
 * built afresh on the server's services (database, chain, guardian), with a key cache of their
 * own. It does everything a rotation does (guardian attestation, wallet co-signature, the chain,
 * the key row, the guardian's hold lifted) and forgets the old key in its own cache only: in
 * embedded mode there is no control channel, which is the lost broadcast this test needs.
 */
import { assert, describe, layer } from "@effect/vitest"
import { TransferRecord } from "@pps/api/Transfers"
import { EncryptionKey } from "@pps/crypto"
import { Client, Confidential } from "@pps/sdk/internal"
import { Context, Effect, Layer } from "effect"
import type { Address } from "viem"
import { EncryptionKeys } from "../src/accounts/EncryptionKeys.ts"
import { KeyRotations } from "../src/accounts/KeyRotations.ts"
import { ulid } from "../src/platform/Ids.ts"
import { decryptTransfer, fundedPair } from "./support/confidentialClient.ts"
import { bearer, decodeAnswer, expectEnvelope, postJson, send } from "./support/http.ts"
import { makeTestServer, pglite, TestServer, type TestServerShape } from "./support/TestServer.ts"

const clientOf = (server: TestServerShape, apiKey: string) => Client.make({ baseUrl: server.baseUrl, apiKey })

/** Alice's rotation to `keyPair` on another node: fresh KeyRotations and EncryptionKeys (its own key cache). */
const rotateElsewhere = (server: TestServerShape, alice: { readonly account_id: string; readonly key_id: string; readonly api_key: string }, keyPair: EncryptionKey.KeyPair) =>
  Effect.gen(function*() {
    const status = yield* Effect.promise(() => Confidential.encryptionKeyStatus(clientOf(server, alice.api_key)))
    const proofOf = (contract: string) =>
      EncryptionKey.proveOwnership(keyPair, { chainId: BigInt(status.chain_id), contract: contract as Address, account: status.account_address as Address })
    // Fresh: not the server's memoized instances (the stale node's own cache must not hear of it).
    const otherNode = yield* Layer.build(Layer.fresh(KeyRotations.layer).pipe(Layer.provide(Layer.fresh(EncryptionKeys.layer)))).pipe(
      Effect.provideContext(server.services)
    )
    const rotations = Context.get(otherNode, KeyRotations)
    return yield* rotations.rotate(
      { keyId: alice.key_id, accountId: alice.account_id, accountType: "personal", ownerAccountId: null, mode: "test" },
      { publicKey: keyPair.publicKey, proofs: { USDG: proofOf(status.contracts.USDG), ETH: proofOf(status.contracts.ETH) } }
    )
  }).pipe(Effect.scoped)

const transfer = (server: TestServerShape, apiKey: string, idempotencyKey: string, to: string, amount: string) =>
  send(`${server.baseUrl}/v1/transfers`, postJson({ ...bearer(apiKey), "idempotency-key": idempotencyKey }, { to, amount }))

describe("a node that missed a key rotation (D55)", () => {
  layer(makeTestServer({ database: pglite }), { timeout: "300 seconds", excludeTestServices: true })("pglite", (it) => {
    it.effect("answers 503 for a transfer sealed to the replaced key; the retry seals to the new key", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const pair = yield* fundedPair(server, "10")
        const alice = pair.sender
        // Alice sends through this node, which now remembers her key; Bob gets something to send.
        const first = yield* transfer(server, alice.api_key, `t-${ulid()}`, `@${pair.recipientHandle}`, "3")
        assert.strictEqual(decodeAnswer(TransferRecord, first, 201).status, "confirmed")

        const second = EncryptionKey.generate()
        const rotated = yield* rotateElsewhere(server, alice, second)
        assert.deepStrictEqual(rotated, second.publicKey)
        // The row and the chain hold the new key; this node still remembers the old one.
        const keyShown = Effect.promise(() => Confidential.encryptionKeyStatus(clientOf(server, alice.api_key))).pipe(Effect.map((status) => status.public_key))
        const hex = (key: Uint8Array) => `0x${Buffer.from(key).toString("hex")}`
        assert.strictEqual(yield* keyShown, hex(pair.senderKey.publicKey))

        // Bob pays Alice through this node: sealed to her old key, refused by the guardian.
        const idempotencyKey = `t-${ulid()}`
        const refused = yield* transfer(server, pair.recipient.api_key, idempotencyKey, alice.handle, "1.337")
        expectEnvelope(refused, 503, "service_unavailable")
        assert.isNotNull(refused.headers.get("retry-after"))
        assert.isTrue(server.logs.some((line) => line.includes("guardian refused a replaced encryption key")))
        assert.isFalse(server.logs.some((line) => line.includes("recipient_key_not_registered") && line.includes("InvariantViolation")))
        // It forgot what it remembered.
        assert.strictEqual(yield* keyShown, hex(second.publicKey))

        // The client's retry, same Idempotency-Key: created, and it opens with the new key only.
        const retried = decodeAnswer(TransferRecord, yield* transfer(server, pair.recipient.api_key, idempotencyKey, alice.handle, "1.337"), 201)
        assert.strictEqual(retried.status, "confirmed")
        assert.strictEqual((yield* decryptTransfer(server.baseUrl, alice.api_key, second, retried.transfer_id)).amount, 1_337_000n)
        const stale = yield* Effect.flip(Effect.tryPromise(() => Confidential.decryptTransfer(clientOf(server, alice.api_key), pair.senderKey, retried.transfer_id)))
        assert.isDefined(stale)
        // Exactly once: the same key again answers the same transfer.
        const replayed = decodeAnswer(TransferRecord, yield* transfer(server, pair.recipient.api_key, idempotencyKey, alice.handle, "1.337"), 201)
        assert.strictEqual(replayed.transfer_id, retried.transfer_id)
        for (const line of server.logs) assert.notInclude(line, "1337000")
      }))
  })
})
