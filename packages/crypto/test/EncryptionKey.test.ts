// Goal: keys are generated and validated strictly, and the proof of possession verifies
// only for the exact key, chain, contract and account it was made for.
import fc from "fast-check"
import { assert, expect, it } from "vitest"
import { EncryptionKey, Point } from "../src/index.ts"
import { describeEachBackend, flipBit, hexToBytes, toHex } from "./backends.ts"

const binding = {
  chainId: 46630n,
  contract: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
  account: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
} as const
const be32 = (value: bigint) => hexToBytes(value.toString(16).padStart(64, "0"))

describeEachBackend("EncryptionKey", ({ propertyRuns }) => {
  it("derives PK = s⁻¹·H, so that s·PK = H", () => {
    const keyPair = EncryptionKey.generate()
    expect(keyPair.secretKey.length).toBe(32)
    expect(keyPair.publicKey.length).toBe(64)
    const again = EncryptionKey.fromSecretKey(keyPair.secretKey)
    assert.isTrue(again.ok)
    if (again.ok) expect(toHex(again.value.publicKey)).toBe(toHex(keyPair.publicKey))
    // s = 1 gives PK = H.
    const one = EncryptionKey.fromSecretKey(be32(1n))
    assert.isTrue(one.ok)
    if (one.ok) expect(toHex(one.value.publicKey)).toBe(toHex(Point.H))
  })

  it("refuses secret keys that are 0, >= n or not 32 bytes", () => {
    expect(EncryptionKey.fromSecretKey(be32(0n))).toEqual({ ok: false, reason: "secret_key_invalid" })
    expect(EncryptionKey.fromSecretKey(be32(Point.order))).toEqual({ ok: false, reason: "secret_key_invalid" })
    expect(EncryptionKey.fromSecretKey(be32(Point.order + 1n))).toEqual({ ok: false, reason: "secret_key_invalid" })
    expect(EncryptionKey.fromSecretKey(new Uint8Array(31).fill(1))).toEqual({ ok: false, reason: "secret_key_invalid" })
    assert.isTrue(EncryptionKey.fromSecretKey(be32(Point.order - 1n)).ok)
  })

  it("accepts public keys in both encodings and refuses identity and off-curve keys", () => {
    const keyPair = EncryptionKey.generate()
    const compressed = EncryptionKey.parsePublicKey(Point.compress(keyPair.publicKey))
    assert.isTrue(compressed.ok)
    if (compressed.ok) expect(toHex(compressed.value)).toBe(toHex(keyPair.publicKey))
    expect(EncryptionKey.parsePublicKey(Point.identity)).toEqual({ ok: false, reason: "point_is_identity" })
    expect(EncryptionKey.parsePublicKey(new Uint8Array(33))).toEqual({ ok: false, reason: "point_is_identity" })
    expect(EncryptionKey.parsePublicKey(flipBit(keyPair.publicKey, 0)).ok).toBe(false)
  })

  it("verifies a proof of possession made for the same binding", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: (1n << 256n) - 1n }), (chainId) => {
        const keyPair = EncryptionKey.generate()
        const proof = EncryptionKey.proveOwnership(keyPair, { ...binding, chainId })
        expect(proof.length).toBe(EncryptionKey.possessionProofLength)
        assert.isTrue(EncryptionKey.verifyOwnership(keyPair.publicKey, proof, { ...binding, chainId }).ok)
      }),
      { numRuns: propertyRuns }
    )
  })

  it("refuses a proof when any bound field or any bit of the proof changes", () => {
    const keyPair = EncryptionKey.generate()
    const other = EncryptionKey.generate()
    const proof = EncryptionKey.proveOwnership(keyPair, binding)
    const refused = (result: { ok: boolean }) => expect(result.ok).toBe(false)
    refused(EncryptionKey.verifyOwnership(keyPair.publicKey, proof, { ...binding, chainId: binding.chainId + 1n }))
    refused(EncryptionKey.verifyOwnership(keyPair.publicKey, proof, { ...binding, contract: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0513" }))
    refused(EncryptionKey.verifyOwnership(keyPair.publicKey, proof, { ...binding, account: "0x70997970C51812dc3A010C7d01b50e0d17dc79C9" }))
    expect(EncryptionKey.verifyOwnership(other.publicKey, proof, binding)).toEqual({ ok: false, reason: "proof_mismatch" })
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 96 * 8 - 1 }), (bit) => {
        refused(EncryptionKey.verifyOwnership(keyPair.publicKey, flipBit(proof, bit), binding))
      }),
      { numRuns: propertyRuns * 3 }
    )
  })

  it("refuses z >= n, an off-curve R, a wrong length and an invalid key", () => {
    const keyPair = EncryptionKey.generate()
    const proof = EncryptionKey.proveOwnership(keyPair, binding)
    const highZ = new Uint8Array([...proof.subarray(0, 64), ...be32(Point.order)])
    expect(EncryptionKey.verifyOwnership(keyPair.publicKey, highZ, binding)).toEqual({ ok: false, reason: "proof_scalar_out_of_range" })
    // z + n is the same value mod n; only the range check refuses it.
    const z = BigInt(toHex(proof.subarray(64)))
    if (z + Point.order < 1n << 256n) {
      const aliased = new Uint8Array([...proof.subarray(0, 64), ...be32(z + Point.order)])
      expect(EncryptionKey.verifyOwnership(keyPair.publicKey, aliased, binding)).toEqual({ ok: false, reason: "proof_scalar_out_of_range" })
    }
    const offCurve = new Uint8Array([...be32(1n), ...be32(3n), ...proof.subarray(64)])
    expect(EncryptionKey.verifyOwnership(keyPair.publicKey, offCurve, binding)).toEqual({ ok: false, reason: "proof_commitment_invalid" })
    expect(EncryptionKey.verifyOwnership(keyPair.publicKey, proof.subarray(0, 95), binding)).toEqual({ ok: false, reason: "proof_length_invalid" })
    expect(EncryptionKey.verifyOwnership(Point.identity, proof, binding)).toEqual({ ok: false, reason: "point_is_identity" })
  })
})
