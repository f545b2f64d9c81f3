// Goal: a sealed box opens only for its recipient and only under the exact binding it was
// sealed with; any changed byte, binding field or key is refused; notes parse strictly.
import fc from "fast-check"
import { assert, expect, it } from "vitest"
import { ElGamal, EncryptionKey, Note, Point, SealedBox } from "../src/index.ts"
import { describeEachBackend, flipBit } from "./backends.ts"

const binding: SealedBox.Binding = {
  purpose: "transfer-recipient",
  chainId: 46630n,
  contract: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
  subjectId: new Uint8Array(32).fill(0xab)
}

describeEachBackend("SealedBox", ({ propertyRuns }) => {
  const recipient = EncryptionKey.generate()
  const other = EncryptionKey.generate()

  it("round-trips any plaintext", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), (plaintext) => {
        const box = SealedBox.seal({ publicKey: recipient.publicKey, plaintext, binding })
        expect(box.length).toBe(plaintext.length + SealedBox.boxOverhead)
        expect(SealedBox.open(recipient, box, binding)).toEqual({ ok: true, value: plaintext })
      }),
      { numRuns: propertyRuns }
    )
  })

  it("refuses every flipped bit of the box", () => {
    const box = SealedBox.seal({ publicKey: recipient.publicKey, plaintext: new Uint8Array([1, 2, 3]), binding })
    fc.assert(
      fc.property(fc.integer({ min: 0, max: box.length * 8 - 1 }), (bit) => {
        expect(SealedBox.open(recipient, flipBit(box, bit), binding).ok).toBe(false)
      }),
      { numRuns: propertyRuns * 4 }
    )
    // The version byte and the ephemeral point are refused before any decryption.
    expect(SealedBox.open(recipient, flipBit(box, 0), binding)).toEqual({ ok: false, reason: "box_version_unsupported" })
    expect(SealedBox.open(recipient, box.subarray(0, SealedBox.boxOverhead - 1), binding)).toEqual({ ok: false, reason: "box_too_short" })
  })

  it("refuses a box under any other binding field or key", () => {
    const box = SealedBox.seal({ publicKey: recipient.publicKey, plaintext: new Uint8Array([9]), binding })
    const refused = (variant: SealedBox.Binding) =>
      expect(SealedBox.open(recipient, box, variant)).toEqual({ ok: false, reason: "box_authentication_failed" })
    refused({ ...binding, purpose: "transfer-sender" })
    refused({ ...binding, chainId: 4663n })
    refused({ ...binding, contract: "0x5FbDB2315678afecb367f032d93F642f64180aa4" })
    refused({ ...binding, subjectId: new Uint8Array(32).fill(0xac) })
    expect(SealedBox.open(other, box, binding)).toEqual({ ok: false, reason: "box_authentication_failed" })
  })

  it("refuses an identity or off-curve ephemeral point", () => {
    const box = SealedBox.seal({ publicKey: recipient.publicKey, plaintext: new Uint8Array([9]), binding })
    const identityEphemeral = Uint8Array.from(box)
    identityEphemeral.fill(0, 1, 65)
    expect(SealedBox.open(recipient, identityEphemeral, binding)).toEqual({ ok: false, reason: "box_ephemeral_invalid" })
    const offCurve = Uint8Array.from(box)
    offCurve[64] = (offCurve[64] ?? 0) ^ 1
    expect(SealedBox.open(recipient, offCurve, binding)).toEqual({ ok: false, reason: "box_ephemeral_invalid" })
  })

  it("gives each recipient of a group its own key although they share the ephemeral point", () => {
    const [first, second] = SealedBox.sealAll([
      { publicKey: recipient.publicKey, plaintext: new Uint8Array([1]), binding },
      { publicKey: other.publicKey, plaintext: new Uint8Array([2]), binding }
    ])
    assert.isDefined(first)
    assert.isDefined(second)
    if (first === undefined || second === undefined) return
    expect(first.subarray(1, 65)).toEqual(second.subarray(1, 65))
    expect(SealedBox.open(recipient, first, binding)).toEqual({ ok: true, value: new Uint8Array([1]) })
    expect(SealedBox.open(other, second, binding)).toEqual({ ok: true, value: new Uint8Array([2]) })
    expect(SealedBox.open(recipient, second, binding).ok).toBe(false)
    expect(SealedBox.open(other, first, binding).ok).toBe(false)
  })
})

describeEachBackend("Note", ({ propertyRuns }) => {
  const sender = EncryptionKey.generate()
  const recipient = EncryptionKey.generate()
  const guardian = EncryptionKey.generate()
  const context = { chainId: 46630n, contract: "0x5FbDB2315678afecb367f032d93F642f64180aa3", transferId: new Uint8Array(32).fill(1) } as const

  it("seals a transfer so that each party opens its own box and the guardian's opening checks out", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), fc.string({ maxLength: 100 }), (amount, memo) => {
        const publicKeys = [sender.publicKey, recipient.publicKey, guardian.publicKey]
        const { ciphertext, opening } = ElGamal.encrypt(amount, publicKeys)
        const boxes = Note.sealTransfer({ context, note: { amount, memo }, opening, senderKey: sender.publicKey, recipientKey: recipient.publicKey, guardianKey: guardian.publicKey })
        expect(Note.openTransferNote(sender, boxes.sender, context, "sender")).toEqual({ ok: true, value: { amount, memo } })
        expect(Note.openTransferNote(recipient, boxes.recipient, context, "recipient")).toEqual({ ok: true, value: { amount, memo } })
        const guardianOpening = Note.openGuardianNote(guardian, boxes.guardian, context)
        assert.isTrue(guardianOpening.ok)
        if (guardianOpening.ok) assert.isTrue(ElGamal.verifyOpening(ciphertext, publicKeys, guardianOpening.value).ok)
        // Roles cannot be swapped, and the guardian cannot read the memo boxes.
        expect(Note.openTransferNote(recipient, boxes.recipient, context, "sender").ok).toBe(false)
        expect(Note.openTransferNote(guardian, boxes.sender, context, "sender").ok).toBe(false)
        expect(Note.openTransferNote(recipient, boxes.sender, context, "sender").ok).toBe(false)
        // Every box has the same length, whatever the memo.
        expect(boxes.sender.length).toBe(523 + SealedBox.boxOverhead)
      }),
      { numRuns: propertyRuns }
    )
  })

  it("binds the boxes to the transfer id, contract and chain", () => {
    const { opening } = ElGamal.encrypt(5n, [guardian.publicKey])
    const boxes = Note.sealTransfer({ context, note: { amount: 5n, memo: "" }, opening, senderKey: sender.publicKey, recipientKey: recipient.publicKey, guardianKey: guardian.publicKey })
    expect(Note.openGuardianNote(guardian, boxes.guardian, { ...context, transferId: new Uint8Array(32).fill(2) })).toEqual({ ok: false, reason: "box_authentication_failed" })
    expect(Note.openGuardianNote(guardian, boxes.guardian, { ...context, chainId: 4663n })).toEqual({ ok: false, reason: "box_authentication_failed" })
    expect(Note.openTransferNote(recipient, boxes.recipient, { ...context, contract: "0x0000000000000000000000000000000000000001" }, "recipient")).toEqual({ ok: false, reason: "box_authentication_failed" })
  })

  it("round-trips a balance statement bound to the account", () => {
    const input = { chainId: 46630n, contract: context.contract, account: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC" } as const
    const box = Note.sealBalanceStatement({ ...input, accountKey: recipient.publicKey, statement: { amount: 42n, ciphertextVersion: 9n } })
    expect(Note.openBalanceStatement(recipient, box, input)).toEqual({ ok: true, value: { amount: 42n, ciphertextVersion: 9n } })
    expect(Note.openBalanceStatement(recipient, box, { ...input, account: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" }).ok).toBe(false)
  })

  it("parses notes strictly", () => {
    const encoded = Note.encodeTransferNote({ amount: 3n, memo: "hi" })
    expect(Note.decodeTransferNote(encoded)).toEqual({ ok: true, value: { amount: 3n, memo: "hi" } })
    const dirtyPadding = Uint8Array.from(encoded)
    dirtyPadding[522] = 1
    expect(Note.decodeTransferNote(dirtyPadding)).toEqual({ ok: false, reason: "note_malformed" })
    const longLength = Uint8Array.from(encoded)
    longLength[9] = 0x02
    longLength[10] = 0x01
    expect(Note.decodeTransferNote(longLength)).toEqual({ ok: false, reason: "note_malformed" })
    const badUtf8 = Note.encodeTransferNote({ amount: 3n, memo: "ab" })
    badUtf8[11] = 0xff
    expect(Note.decodeTransferNote(badUtf8)).toEqual({ ok: false, reason: "note_malformed" })
    expect(Note.decodeTransferNote(encoded.subarray(1))).toEqual({ ok: false, reason: "note_malformed" })
    expect(Note.decodeGuardianNote(encoded.subarray(0, 41))).toEqual({ ok: false, reason: "note_malformed" })
    const guardianNote = Note.encodeGuardianNote({ amount: 1n, randomness: 5n })
    expect(Note.decodeGuardianNote(guardianNote)).toEqual({ ok: true, value: { amount: 1n, randomness: 5n } })
    const zeroRandomness = Uint8Array.from(guardianNote)
    zeroRandomness.fill(0, 9)
    expect(Note.decodeGuardianNote(zeroRandomness)).toEqual({ ok: false, reason: "note_malformed" })
    const highRandomness = Uint8Array.from(guardianNote)
    highRandomness.fill(0xff, 9)
    expect(Note.decodeGuardianNote(highRandomness)).toEqual({ ok: false, reason: "note_malformed" })
    expect(() => Note.encodeTransferNote({ amount: 1n, memo: "x".repeat(513) })).toThrow(/at most 512/)
    assert.isTrue(Note.decodeTransferNote(Note.encodeTransferNote({ amount: 1n, memo: "€".repeat(170) })).ok)
  })

  it("digests the three boxes length-prefixed, in order", () => {
    const boxes = { sender: new Uint8Array([1]), recipient: new Uint8Array([2, 3]), guardian: new Uint8Array([]) }
    const swapped = { ...boxes, sender: boxes.recipient, recipient: boxes.sender }
    const moved = { sender: new Uint8Array([1, 2]), recipient: new Uint8Array([3]), guardian: new Uint8Array([]) }
    const digest = Note.sealedDigest(boxes)
    expect(digest).toMatch(/^0x[0-9a-f]{64}$/)
    expect(Note.sealedDigest(swapped)).not.toBe(digest)
    // Same concatenated bytes, different boundaries: the length prefixes keep them apart.
    expect(Note.sealedDigest(moved)).not.toBe(digest)
    expect(Point.identity.length).toBe(64)
  })
})
