/**
 * The guardian signs attestations with libsecp256k1 (WebAssembly) for speed: its signatures
 * must be the very bytes the pure-TypeScript signer gives (RFC 6979, low-s), and recover to the
 * address the contract is configured with.
 */
import { randomBytes } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import { Attestation } from "@pps/crypto"
import { getAddress, type Hex } from "viem"
import * as GuardianKeys from "../src/GuardianKeys.ts"

describe("GuardianKeys: the attestation signer", () => {
  it("gives the same signature as the pure-TypeScript signer for 300 keys and digests, recovering to the guardian's address", () => {
    for (let round = 0; round < 300; round++) {
      const keys = GuardianKeys.fromSecret(new Uint8Array(randomBytes(32)))
      const digest = new Uint8Array(randomBytes(32))
      const fast = keys.signer(digest)
      const reference = Attestation.nobleDigestSigner(keys.signerPrivateKey)(digest)
      assert.deepStrictEqual(
        [Buffer.from(fast.signature).toString("hex"), fast.recoveryId],
        [Buffer.from(reference.signature).toString("hex"), reference.recoveryId]
      )
    }
    const keys = GuardianKeys.fromSecret(new Uint8Array(randomBytes(32)))
    const typedData = Attestation.publicTransfer(Attestation.domain(31_337n, getAddress(`0x${"ab".repeat(20)}`)), {
      from: getAddress(`0x${"01".repeat(20)}`),
      to: getAddress(`0x${"02".repeat(20)}`),
      transferId: `0x${"03".repeat(32)}` as Hex,
      nonce: 7n,
      amount: 1_000n,
      ciphertextDigest: `0x${"04".repeat(32)}` as Hex,
      deadline: BigInt(Math.floor(Date.now() / 1000) + 600)
    })
    const signature = Attestation.signWith(keys.signer, typedData)
    assert.strictEqual(signature, Attestation.sign(keys.signerPrivateKey, typedData))
    const recovered = Attestation.recoverSigner(typedData, signature)
    assert.deepStrictEqual(recovered.ok ? recovered.value : recovered, keys.info.signer)
  })
})
