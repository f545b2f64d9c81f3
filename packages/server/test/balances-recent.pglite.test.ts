/**
 * D63 over a real socket, on embedded anvil and PGlite: a balance proof made before a
 * confirmation changed the account's ciphertext is still accepted, and the answer says the
 * amount is as of the block before the change; a proof naming a version from beyond the
 * 32-block window, one never on chain, and one made with a key replaced since (D55) are still
 * refused 422 `decryption_proof_invalid`, each with its reason.
 *
 * Its own server with one-second blocks: the window is then 32 seconds long, wide enough for
 * the steps between making a proof and reading with it on a loaded machine, and the test mines
 * the blocks that take a proof out of it.
 */
import { assert, describe, expect, layer } from "@effect/vitest"
import { DecryptionProof, EncryptionKey } from "@pps/crypto"
import { Client, Confidential } from "@pps/sdk/internal"
import { Context, Effect, Option } from "effect"
import type { Hash } from "viem"
import { lookbackBlocksMax } from "../src/balances/RecentCiphertexts.ts"
import { Settlement } from "../src/settlement/Settlement.ts"
import { balanceProof, fundedPair } from "./support/confidentialClient.ts"
import { bearer, expectEnvelope, postJson, send } from "./support/http.ts"
import { makeTestServer, pglite, TestServer } from "./support/TestServer.ts"

/** A proof's bundle with one asset's ciphertext version replaced (its proof then names another ciphertext). */
const withVersion = (proof: string, asset: string, version: bigint): string => {
  const decoded = DecryptionProof.decode(proof)
  if (!decoded.ok) throw new Error(`the SDK's proof decodes: ${decoded.reason}`)
  return DecryptionProof.encode({
    ...decoded.value,
    entries: decoded.value.entries.map((entry) => (entry.asset === asset ? { ...entry, ciphertextVersion: version } : entry))
  })
}

describe("balances with a proof made from a recent block's ciphertext (D63)", () => {
  layer(makeTestServer({ database: pglite, config: { chainBlockTimeMs: 1_000 } }), { timeout: "180 seconds", excludeTestServices: true })(
    "pglite",
    (it) => {
      it.effect("an incoming confirmation after the proof: 200 as of the block before it; past the window, never on chain, or another key: 422", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const chain = Option.getOrThrow(Context.get(server.services, Settlement).chain("test"))
          const pair = yield* fundedPair(server, "100")
          const alice = pair.sender
          const read = (proof: string) =>
            send(`${server.baseUrl}/v1/accounts/me/balances`, { headers: { ...bearer(alice.api_key), "x-decryption-proof": proof } })
          const reasonOf = (proof: string) =>
            read(proof).pipe(Effect.map((answer) => expectEnvelope(answer, 422, "decryption_proof_invalid").reason))

          // Made from the ciphertext of 100; then a confirmed faucet grant replaces it.
          const before = yield* balanceProof(server.baseUrl, alice.api_key, pair.senderKey)
          const grant = yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(alice.api_key), { amount: "5" }))
          assert.strictEqual(grant.status, 200, grant.text)
          const receipt = yield* Effect.promise(() =>
            chain.client.getTransactionReceipt({ hash: (grant.json as { tx_hash: Hash }).tx_hash }))
          const changedAt = Number(receipt.blockNumber)

          // Accepted: USDG as of the block before the grant's, ETH (unchanged) as of the latest.
          const stale = yield* read(before)
          assert.strictEqual(stale.status, 200, stale.text)
          expect(stale.json).toEqual({
            balances: [
              { asset: "USDG", amount: "100", as_of_block: changedAt - 1 },
              { asset: "ETH", amount: "0", as_of_block: expect.any(Number) }
            ]
          })
          const latestRead = (stale.json as { balances: ReadonlyArray<{ as_of_block: number }> }).balances[1]!.as_of_block
          assert.isAtLeast(latestRead, changedAt)
          // A proof made now shows the new balance, as of a block at or after the grant's.
          const after = yield* read(yield* balanceProof(server.baseUrl, alice.api_key, pair.senderKey))
          assert.strictEqual(after.status, 200, after.text)
          const [usdgAfter] = (after.json as { balances: ReadonlyArray<{ asset: string; amount: string; as_of_block: number }> }).balances
          expect(usdgAfter).toMatchObject({ asset: "USDG", amount: "105" })
          assert.isAtLeast(usdgAfter!.as_of_block, changedAt)

          // A version no block of the window holds: refused as stale (and its proof would not verify anyway).
          assert.strictEqual(yield* reasonOf(withVersion(before, "USDG", 0x0123456789abcdefn)), "proof_ciphertext_stale")

          // Past the window: once more than 32 blocks have been mined since the change, the same proof is refused.
          const latest = yield* Effect.promise(() => chain.client.getBlockNumber({ cacheTime: 0 }))
          const toMine = Number(lookbackBlocksMax) + 1 - Number(latest - receipt.blockNumber)
          if (toMine > 0) {
            yield* Effect.promise(() =>
              chain.client.request({ method: "anvil_mine" as never, params: [`0x${toMine.toString(16)}`, "0x0"] as never }))
          }
          assert.strictEqual(yield* reasonOf(before), "proof_ciphertext_stale")

          // A key replaced inside the window (D55): the old ciphertext is found, but the proof
          // is checked against the key registered now, which did not make it.
          const withOldKey = yield* balanceProof(server.baseUrl, alice.api_key, pair.senderKey)
          yield* Effect.promise(() =>
            Confidential.rotateKey(Client.make({ baseUrl: server.baseUrl, apiKey: alice.api_key }), EncryptionKey.generate()))
          assert.strictEqual(yield* reasonOf(withOldKey), "proof_mismatch")
        }))
    }
  )
})
