// Goal: a decryption proof verifies only for the exact statement it was made for. Every
// transcript element is changed in turn (the 2025 Solana forgeries came from elements left
// out of the transcript), and malformed, expired, stale and out-of-range proofs are refused.
import fc from "fast-check"
import { assert, expect, it } from "vitest"
import { DecryptionProof, ElGamal, EncryptionKey, Point } from "../src/index.ts"
import { deterministicRandom } from "../scripts/deterministicRandom.ts"
import { describeEachBackend, flipBit } from "./backends.ts"

const account = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC" as const
const usdgContract = "0x5FbDB2315678afecb367f032d93F642f64180aa3" as const
const ethContract = "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0" as const

const base64UrlToBytes = (text: string) => Uint8Array.from(Buffer.from(text, "base64url"))
const bytesToBase64Url = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64url")

describeEachBackend("DecryptionProof", ({ propertyRuns }) => {
  const owner = EncryptionKey.generate()
  const guardian = EncryptionKey.generate()
  const stranger = EncryptionKey.generate()
  const amount = 12_500_000n
  const { ciphertext } = ElGamal.encrypt(amount, [owner.publicKey, guardian.publicKey])
  const usdg: DecryptionProof.BalanceCiphertext = {
    contract: usdgContract,
    commitment: ciphertext.commitment,
    handle: ciphertext.handles[0] ?? Point.identity,
    ciphertextVersion: 3n
  }
  const shielded = ElGamal.fromPublicAmount(700n, 2)
  const eth: DecryptionProof.BalanceCiphertext = {
    contract: ethContract,
    commitment: shielded.commitment,
    handle: shielded.handles[0] ?? Point.identity,
    ciphertextVersion: 1n
  }
  const nowSeconds = 1_795_000_000n
  const context: DecryptionProof.VerifyContext = {
    chainId: 46630n,
    account,
    publicKey: owner.publicKey,
    nowSeconds,
    lifetimeMaxSeconds: 300n,
    balanceOf: (asset) => (asset === "USDG" ? usdg : asset === "ETH" ? eth : undefined)
  }
  const prove = (claims: ReadonlyArray<DecryptionProof.Claim>, expiresAtSeconds = nowSeconds + 300n) =>
    DecryptionProof.prove({ keyPair: owner, chainId: 46630n, account, expiresAtSeconds, claims })

  it("verifies a bundle of several assets, including an empty-handle (shielded) balance", () => {
    const proof = prove([
      { asset: "USDG", amount, ciphertext: usdg },
      { asset: "ETH", amount: 700n, ciphertext: eth }
    ])
    expect(DecryptionProof.verify(proof, context)).toEqual({
      ok: true,
      value: [
        { asset: "USDG", amount },
        { asset: "ETH", amount: 700n }
      ]
    })
  })

  it("proves any true balance and refuses any false claim", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), fc.bigInt({ min: 1n, max: 1000n }), (balance, offset) => {
        const encrypted = ElGamal.encrypt(balance, [owner.publicKey, guardian.publicKey]).ciphertext
        const current = { contract: usdgContract, commitment: encrypted.commitment, handle: encrypted.handles[0] ?? Point.identity, ciphertextVersion: 1n }
        const statedContext = { ...context, balanceOf: () => current }
        assert.isTrue(DecryptionProof.verify(prove([{ asset: "USDG", amount: balance, ciphertext: current }]), statedContext).ok)
        const wrong = (balance + offset) % (1n << 64n)
        expect(DecryptionProof.verify(prove([{ asset: "USDG", amount: wrong, ciphertext: current }]), statedContext)).toEqual({ ok: false, reason: "proof_mismatch" })
      }),
      { numRuns: propertyRuns }
    )
  })

  it("breaks when any single transcript element changes", () => {
    const statement: DecryptionProof.Statement = {
      chainId: 46630n,
      account,
      asset: "USDG",
      publicKey: owner.publicKey,
      ciphertext: usdg,
      amount,
      expiresAtSeconds: nowSeconds + 300n
    }
    const entry = DecryptionProof.proveEntry(owner, statement)
    assert.isTrue(DecryptionProof.verifyEntry(statement, entry).ok)
    const otherCiphertext = ElGamal.encrypt(amount, [owner.publicKey, guardian.publicKey]).ciphertext
    const variants: Record<string, DecryptionProof.Statement> = {
      chainId: { ...statement, chainId: 4663n },
      account: { ...statement, account: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" },
      contract: { ...statement, ciphertext: { ...usdg, contract: ethContract } },
      asset: { ...statement, asset: "USDC" },
      publicKey: { ...statement, publicKey: stranger.publicKey },
      commitment: { ...statement, ciphertext: { ...usdg, commitment: otherCiphertext.commitment } },
      handle: { ...statement, ciphertext: { ...usdg, handle: otherCiphertext.handles[0] ?? Point.identity } },
      ciphertextVersion: { ...statement, ciphertext: { ...usdg, ciphertextVersion: 4n } },
      amount: { ...statement, amount: amount + 1n },
      expiresAtSeconds: { ...statement, expiresAtSeconds: statement.expiresAtSeconds + 1n }
    }
    for (const [field, variant] of Object.entries(variants)) {
      expect({ field, result: DecryptionProof.verifyEntry(variant, entry) }).toEqual({ field, result: { ok: false, reason: "proof_mismatch" } })
    }
    // The commitments A1, A2 are recomputed from (c, z); changing c or z changes them.
    expect(DecryptionProof.verifyEntry(statement, { ...entry, challenge: entry.challenge + 1n }).ok).toBe(false)
    expect(DecryptionProof.verifyEntry(statement, { ...entry, response: entry.response + 1n }).ok).toBe(false)
    // And each transcript element, commitments included, changes the transcript bytes.
    const a1 = Point.G
    const a2 = Point.H
    const reference = DecryptionProof.transcript(statement, a1, a2)
    for (const variant of Object.values(variants)) {
      expect(DecryptionProof.transcript(variant, a1, a2)).not.toEqual(reference)
    }
    expect(DecryptionProof.transcript(statement, a2, a1)).not.toEqual(reference)
  })

  it("refuses scalars >= n, including aliases of valid ones", () => {
    const statement: DecryptionProof.Statement = { chainId: 46630n, account, asset: "USDG", publicKey: owner.publicKey, ciphertext: usdg, amount, expiresAtSeconds: nowSeconds }
    const entry = DecryptionProof.proveEntry(owner, statement)
    expect(DecryptionProof.verifyEntry(statement, { ...entry, response: entry.response + Point.order })).toEqual({ ok: false, reason: "proof_scalar_out_of_range" })
    expect(DecryptionProof.verifyEntry(statement, { ...entry, challenge: entry.challenge + Point.order })).toEqual({ ok: false, reason: "proof_scalar_out_of_range" })
  })

  it("refuses identity or off-curve keys and off-curve ciphertext points", () => {
    const proof = prove([{ asset: "USDG", amount, ciphertext: usdg }])
    expect(DecryptionProof.verify(proof, { ...context, publicKey: Point.identity })).toEqual({ ok: false, reason: "proof_public_key_invalid" })
    expect(DecryptionProof.verify(proof, { ...context, publicKey: flipBit(owner.publicKey, 3) })).toEqual({ ok: false, reason: "proof_public_key_invalid" })
    const offCurve = flipBit(usdg.commitment, 5) as Point.Point
    expect(DecryptionProof.verify(proof, { ...context, balanceOf: () => ({ ...usdg, commitment: offCurve }) })).toEqual({ ok: false, reason: "proof_point_invalid" })
  })

  it("refuses expired proofs and proofs that live longer than allowed", () => {
    const expired = prove([{ asset: "USDG", amount, ciphertext: usdg }], nowSeconds - 1n)
    expect(DecryptionProof.verify(expired, context)).toEqual({ ok: false, reason: "proof_expired" })
    const tooLong = prove([{ asset: "USDG", amount, ciphertext: usdg }], nowSeconds + 301n)
    expect(DecryptionProof.verify(tooLong, context)).toEqual({ ok: false, reason: "proof_expiry_too_far" })
    const lastSecond = prove([{ asset: "USDG", amount, ciphertext: usdg }], nowSeconds)
    assert.isTrue(DecryptionProof.verify(lastSecond, context).ok)
    // The same bounds through checkExpiry alone (D63: checked before any chain read).
    const expiryOf = (text: string) => {
      const decoded = DecryptionProof.decode(text)
      if (!decoded.ok) throw new Error(decoded.reason)
      return DecryptionProof.checkExpiry(decoded.value, nowSeconds, 300n)
    }
    expect(expiryOf(expired)).toEqual({ ok: false, reason: "proof_expired" })
    expect(expiryOf(tooLong)).toEqual({ ok: false, reason: "proof_expiry_too_far" })
    assert.isTrue(expiryOf(lastSecond).ok)
    assert.isTrue(expiryOf(prove([{ asset: "USDG", amount, ciphertext: usdg }], nowSeconds + 300n)).ok)
  })

  it("refuses proofs for another account, chain, key, or a stale or unknown ciphertext", () => {
    const proof = prove([{ asset: "USDG", amount, ciphertext: usdg }])
    expect(DecryptionProof.verify(proof, { ...context, account: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" })).toEqual({ ok: false, reason: "proof_mismatch" })
    expect(DecryptionProof.verify(proof, { ...context, chainId: 4663n })).toEqual({ ok: false, reason: "proof_mismatch" })
    expect(DecryptionProof.verify(proof, { ...context, publicKey: stranger.publicKey })).toEqual({ ok: false, reason: "proof_mismatch" })
    expect(DecryptionProof.verify(proof, { ...context, balanceOf: () => ({ ...usdg, ciphertextVersion: 4n }) })).toEqual({ ok: false, reason: "proof_ciphertext_stale" })
    expect(DecryptionProof.verify(proof, { ...context, balanceOf: () => ({ ...usdg, contract: ethContract }) })).toEqual({ ok: false, reason: "proof_mismatch" })
    expect(DecryptionProof.verify(proof, { ...context, balanceOf: () => undefined })).toEqual({ ok: false, reason: "proof_asset_unknown" })
    // A balance that moved on (a new credit) at the same version number still fails.
    const moved = ElGamal.add(ElGamal.select(ciphertext, [0, 1]), ElGamal.fromPublicAmount(1n, 2))
    expect(DecryptionProof.verify(proof, { ...context, balanceOf: () => ({ ...usdg, commitment: moved.commitment }) })).toEqual({ ok: false, reason: "proof_mismatch" })
  })

  it("refuses every flipped bit of the wire form", () => {
    const proof = prove([{ asset: "USDG", amount, ciphertext: usdg }])
    const bytes = base64UrlToBytes(proof)
    fc.assert(
      fc.property(fc.integer({ min: 0, max: bytes.length * 8 - 1 }), (bit) => {
        expect(DecryptionProof.verify(bytesToBase64Url(flipBit(bytes, bit)), context).ok).toBe(false)
      }),
      { numRuns: propertyRuns * 4 }
    )
  })

  it("decodes strictly: version, counts, lengths, duplicates, trailing bytes, alphabet", () => {
    const proof = prove([{ asset: "USDG", amount, ciphertext: usdg }])
    const bytes = base64UrlToBytes(proof)
    expect(DecryptionProof.decode("not base64!")).toEqual({ ok: false, reason: "proof_encoding_invalid" })
    expect(DecryptionProof.decode("")).toEqual({ ok: false, reason: "proof_malformed" })
    const version2 = Uint8Array.from(bytes)
    version2[0] = 2
    expect(DecryptionProof.decode(bytesToBase64Url(version2))).toEqual({ ok: false, reason: "proof_version_unsupported" })
    expect(DecryptionProof.decode(bytesToBase64Url(new Uint8Array([...bytes, 0])))).toEqual({ ok: false, reason: "proof_malformed" })
    expect(DecryptionProof.decode(bytesToBase64Url(bytes.subarray(0, bytes.length - 1)))).toEqual({ ok: false, reason: "proof_malformed" })
    const zeroCount = Uint8Array.from(bytes)
    zeroCount[9] = 0
    expect(DecryptionProof.decode(bytesToBase64Url(zeroCount.subarray(0, 10)))).toEqual({ ok: false, reason: "proof_malformed" })
    const entry = bytes.subarray(10)
    const twice = new Uint8Array([...bytes.subarray(0, 9), 2, ...entry, ...entry])
    expect(DecryptionProof.decode(bytesToBase64Url(twice))).toEqual({ ok: false, reason: "proof_asset_duplicate" })
    // Standard base64 with padding decodes to the same bundle.
    expect(DecryptionProof.decode(Buffer.from(bytes).toString("base64"))).toEqual(DecryptionProof.decode(proof))
    expect(proof).toMatch(/^[A-Za-z0-9_-]+$/)
  })

  it("throws on programmer errors when proving", () => {
    expect(() => prove([])).toThrow(/1-16 assets/)
    expect(() => prove([{ asset: "USDG", amount, ciphertext: usdg }, { asset: "USDG", amount, ciphertext: usdg }])).toThrow(/once/)
    expect(() => prove([{ asset: "", amount, ciphertext: usdg }])).toThrow(/printable ASCII/)
    expect(() => prove([{ asset: "USDG", amount: 1n << 64n, ciphertext: usdg }])).toThrow(/2\^64/)
  })

  it("is deterministic for a given random source", () => {
    const make = () =>
      DecryptionProof.prove(
        { keyPair: owner, chainId: 46630n, account, expiresAtSeconds: nowSeconds, claims: [{ asset: "USDG", amount, ciphertext: usdg }] },
        deterministicRandom("seed")
      )
    expect(make()).toBe(make())
  })
})
