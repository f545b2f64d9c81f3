// Goal: twisted ElGamal with grouped handles decrypts for every key it was made for, is
// homomorphic, and the guardian's opening check notices any inconsistent component.
import fc from "fast-check"
import { assert, expect, it } from "vitest"
import { ElGamal, EncryptionKey, Point } from "../src/index.ts"
import { describeEachBackend, toHex } from "./backends.ts"

const amountArbitrary = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n })
// Sums of two amounts must stay below 2^64 for `matches`.
const halfAmountArbitrary = fc.bigInt({ min: 0n, max: (1n << 63n) - 1n })

describeEachBackend("ElGamal", ({ propertyRuns }) => {
  const sender = EncryptionKey.generate()
  const recipient = EncryptionKey.generate()
  const guardian = EncryptionKey.generate()
  const keyPairs = [sender, recipient, guardian]
  const publicKeys = keyPairs.map((keyPair) => keyPair.publicKey)

  it("decrypts to a·G for every handle, and matches only the true amount", () => {
    fc.assert(
      fc.property(amountArbitrary, (amount) => {
        const { ciphertext } = ElGamal.encrypt(amount, publicKeys)
        const amountPoint = toHex(ElGamal.fromPublicAmount(amount, 0).commitment)
        keyPairs.forEach((keyPair, index) => {
          const handle = ciphertext.handles[index] ?? Point.identity
          expect(toHex(ElGamal.decryptToPoint(keyPair.secretKey, ciphertext.commitment, handle))).toBe(amountPoint)
          assert.isTrue(ElGamal.matches(keyPair.secretKey, ciphertext.commitment, handle, amount))
          assert.isFalse(ElGamal.matches(keyPair.secretKey, ciphertext.commitment, handle, amount ^ 1n))
        })
        // A key it was not encrypted to learns nothing: its "decryption" is not a·G.
        const stranger = EncryptionKey.generate()
        assert.isFalse(ElGamal.matches(stranger.secretKey, ciphertext.commitment, ciphertext.handles[1] ?? Point.identity, amount))
      }),
      { numRuns: propertyRuns }
    )
  })

  it("is additively homomorphic (credit) and subtractive (debit)", () => {
    fc.assert(
      fc.property(halfAmountArbitrary, halfAmountArbitrary, (first, second) => {
        const a = ElGamal.encrypt(first, publicKeys).ciphertext
        const b = ElGamal.encrypt(second, publicKeys).ciphertext
        const sum = ElGamal.add(a, b)
        assert.isTrue(ElGamal.matches(recipient.secretKey, sum.commitment, sum.handles[1] ?? Point.identity, first + second))
        const back = ElGamal.subtract(sum, b)
        expect(back.commitment).toEqual(a.commitment)
        expect(back.handles).toEqual(a.handles)
        // A balance (C, D_owner, D_guardian) debited by a transfer's (C, D_from, D_guardian).
        const balance = ElGamal.select(sum, [0, 2])
        const debit = ElGamal.select(b, [0, 2])
        const after = ElGamal.subtract(balance, debit)
        assert.isTrue(ElGamal.matches(sender.secretKey, after.commitment, after.handles[0] ?? Point.identity, first))
        assert.isTrue(ElGamal.matches(guardian.secretKey, after.commitment, after.handles[1] ?? Point.identity, first))
      }),
      { numRuns: propertyRuns }
    )
  })

  it("treats a shield credit (a·G, identity, identity) like any other ciphertext", () => {
    const shield = ElGamal.fromPublicAmount(500n, 2)
    const transfer = ElGamal.select(ElGamal.encrypt(250n, publicKeys).ciphertext, [1, 2])
    const balance = ElGamal.add(shield, transfer)
    assert.isTrue(ElGamal.matches(recipient.secretKey, balance.commitment, balance.handles[0] ?? Point.identity, 750n))
    assert.isTrue(ElGamal.matches(guardian.secretKey, balance.commitment, balance.handles[1] ?? Point.identity, 750n))
    // An empty balance is all identity and decrypts to 0.
    assert.isTrue(ElGamal.matches(recipient.secretKey, Point.identity, Point.identity, 0n))
  })

  it("accepts its own opening and refuses any changed component", () => {
    fc.assert(
      fc.property(amountArbitrary, fc.integer({ min: 0, max: 4 }), (amount, tampered) => {
        const { ciphertext, opening } = ElGamal.encrypt(amount, publicKeys)
        assert.isTrue(ElGamal.verifyOpening(ciphertext, publicKeys, opening).ok)
        const other = ElGamal.encrypt(amount, publicKeys).ciphertext
        const changed: ElGamal.Ciphertext =
          tampered === 0
            ? { commitment: other.commitment, handles: ciphertext.handles }
            : tampered <= 3
              ? { commitment: ciphertext.commitment, handles: ciphertext.handles.map((handle, index) => (index === tampered - 1 ? (other.handles[index] ?? handle) : handle)) }
              : ciphertext
        if (tampered === 4) {
          expect(ElGamal.verifyOpening(ciphertext, publicKeys, { ...opening, amount: (amount + 1n) % (1n << 64n) })).toEqual({ ok: false, reason: "commitment_mismatch" })
          // Keys in another order: the handles no longer belong to them.
          expect(ElGamal.verifyOpening(ciphertext, [recipient.publicKey, sender.publicKey, guardian.publicKey], opening)).toEqual({ ok: false, reason: "handle_mismatch" })
        } else {
          expect(ElGamal.verifyOpening(changed, publicKeys, opening)).toEqual({
            ok: false,
            reason: tampered === 0 ? "commitment_mismatch" : "handle_mismatch"
          })
        }
      }),
      { numRuns: propertyRuns * 2 }
    )
    const { ciphertext, opening } = ElGamal.encrypt(1n, publicKeys)
    expect(ElGamal.verifyOpening(ciphertext, publicKeys.slice(0, 2), opening)).toEqual({ ok: false, reason: "handle_count_mismatch" })
  })

  it("throws on amounts outside [0, 2^64) without naming the amount", () => {
    expect(() => ElGamal.encrypt(-1n, publicKeys)).toThrow("amount must be a bigint in [0, 2^64)")
    expect(() => ElGamal.encrypt(1n << 64n, publicKeys)).toThrow("amount must be a bigint in [0, 2^64)")
    expect(() => ElGamal.matches(recipient.secretKey, Point.G, Point.G, 1n << 64n)).toThrow(/\[0, 2\^64\)/)
  })

  it("parses ciphertexts from outside and refuses off-curve components", () => {
    const { ciphertext } = ElGamal.encrypt(7n, publicKeys)
    const parsed = ElGamal.parse(ciphertext.commitment, ciphertext.handles)
    assert.isTrue(parsed.ok)
    const broken = Uint8Array.from(ciphertext.handles[2] ?? Point.identity)
    broken[63] = (broken[63] ?? 0) ^ 1
    expect(ElGamal.parse(ciphertext.commitment, [ciphertext.handles[0] ?? Point.identity, broken]).ok).toBe(false)
    assert.isTrue(ElGamal.parse(Point.identity, [Point.identity]).ok)
  })

  it("digests C ‖ handles with keccak256", () => {
    const { ciphertext } = ElGamal.encrypt(7n, publicKeys)
    const digest = ElGamal.digest(ciphertext)
    expect(digest).toMatch(/^0x[0-9a-f]{64}$/)
    expect(ElGamal.digest(ElGamal.select(ciphertext, [0, 2]))).not.toBe(digest)
    // keccak256 of 64 zero bytes, a value any EVM tool reproduces.
    expect(ElGamal.digest({ commitment: Point.identity, handles: [] })).toBe(
      "0xad3228b676f7d3cd4284a5443f17f1962b36e491b30a40b2405849e597ba5fb5"
    )
  })
})
