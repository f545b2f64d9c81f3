// Goal: the code reproduces the published vectors (test/vectors.json) byte for byte on both
// backends, and every vector also passes the verifying side of the API, so the file is
// both a regression pin and a set of valid examples for other implementations.
import { readFileSync } from "node:fs"
import { assert, expect, it } from "vitest"
import { Attestation, DecryptionProof, ElGamal, EncryptionKey, Note, Point } from "../src/index.ts"
import { buildVectors, type Vectors } from "../scripts/vectorData.ts"
import { describeEachBackend, hexToBytes } from "./backends.ts"

const published = JSON.parse(readFileSync(new URL("./vectors.json", import.meta.url), "utf8")) as Vectors

const keyPair = (secretKeyHex: string): EncryptionKey.KeyPair => {
  const result = EncryptionKey.fromSecretKey(hexToBytes(secretKeyHex))
  if (!result.ok) throw new Error("vector key invalid")
  return result.value
}
const point = (hex: string): Point.Point => {
  const result = Point.parse(hexToBytes(hex), { allowIdentity: true })
  if (!result.ok) throw new Error("vector point invalid")
  return result.value
}

describeEachBackend("published vectors", () => {
  it("are reproduced byte for byte", () => {
    expect(JSON.parse(JSON.stringify(buildVectors()))).toEqual(published)
  })

  it("verify with the API's checking functions", () => {
    const v = published
    expect(hexToBytes(v.curve.H)).toEqual(Point.deriveGeneratorH().point)
    const sender = keyPair(v.keys.sender.secretKey)
    const recipient = keyPair(v.keys.recipient.secretKey)
    const guardian = keyPair(v.keys.guardian.secretKey)
    expect(`0x${Buffer.from(recipient.publicKey).toString("hex")}`).toBe(v.keys.recipient.publicKey)

    assert.isTrue(
      EncryptionKey.verifyOwnership(hexToBytes(v.proofOfPossession.publicKey), hexToBytes(v.proofOfPossession.proof), {
        chainId: BigInt(v.proofOfPossession.chainId),
        contract: v.proofOfPossession.contract,
        account: v.proofOfPossession.account
      }).ok
    )

    const amount = BigInt(v.encryption.amount)
    const ciphertext: ElGamal.Ciphertext = {
      commitment: point(v.encryption.commitment),
      handles: [point(v.encryption.handleSender), point(v.encryption.handleRecipient), point(v.encryption.handleGuardian)]
    }
    const publicKeys = [sender.publicKey, recipient.publicKey, guardian.publicKey]
    assert.isTrue(ElGamal.verifyOpening(ciphertext, publicKeys, { amount, randomness: BigInt(v.encryption.randomness) }).ok)
    ;[sender, recipient, guardian].forEach((keys, index) => {
      assert.isTrue(ElGamal.matches(keys.secretKey, ciphertext.commitment, ciphertext.handles[index] ?? Point.identity, amount))
    })
    expect(ElGamal.digest(ciphertext)).toBe(v.encryption.ciphertextDigest)

    const context = { chainId: BigInt(v.sealedBoxes.chainId), contract: v.sealedBoxes.contract, transferId: hexToBytes(v.sealedBoxes.transferId) }
    expect(Note.openTransferNote(sender, hexToBytes(v.sealedBoxes.sender), context, "sender")).toEqual({ ok: true, value: { amount, memo: v.sealedBoxes.memo } })
    expect(Note.openTransferNote(recipient, hexToBytes(v.sealedBoxes.recipient), context, "recipient")).toEqual({ ok: true, value: { amount, memo: v.sealedBoxes.memo } })
    expect(Note.openGuardianNote(guardian, hexToBytes(v.sealedBoxes.guardian), context)).toEqual({ ok: true, value: { amount, randomness: BigInt(v.encryption.randomness) } })
    expect(
      Note.openBalanceStatement(recipient, hexToBytes(v.sealedBoxes.balanceStatement.box), {
        chainId: context.chainId,
        contract: context.contract,
        account: v.sealedBoxes.balanceStatement.account
      })
    ).toEqual({ ok: true, value: { amount, ciphertextVersion: 1n } })

    const balances = v.decryptionProof.balances
    const lookup = (asset: string): DecryptionProof.BalanceCiphertext | undefined => {
      const entry = asset === "USDG" ? balances.USDG : asset === "ETH" ? balances.ETH : undefined
      return entry === undefined
        ? undefined
        : { contract: entry.contract, commitment: point(entry.commitment), handle: point(entry.handle), ciphertextVersion: BigInt(entry.ciphertextVersion) }
    }
    expect(
      DecryptionProof.verify(v.decryptionProof.proof, {
        chainId: BigInt(v.decryptionProof.chainId),
        account: v.decryptionProof.account,
        publicKey: hexToBytes(v.decryptionProof.publicKey),
        nowSeconds: BigInt(v.decryptionProof.expiresAtSeconds) - 300n,
        lifetimeMaxSeconds: 300n,
        balanceOf: lookup
      })
    ).toEqual({ ok: true, value: [{ asset: "USDG", amount }, { asset: "ETH", amount: BigInt(balances.ETH.amount) }] })

    const message = v.attestation.confidentialTransfer.message
    const typedData = Attestation.confidentialTransfer(Attestation.domain(context.chainId, context.contract), {
      ...message,
      nonce: BigInt(message.nonce),
      deadline: BigInt(message.deadline)
    })
    expect(Attestation.recoverSigner(typedData, v.attestation.confidentialTransfer.signature)).toEqual({ ok: true, value: v.attestation.guardianAddress })
  })
})

it("quotes in docs/crypto.md only values that are in the published vectors", () => {
  // The document's section 11 copies a few vectors; they must not drift from the file.
  const document = readFileSync(new URL("../../../docs/crypto.md", import.meta.url), "utf8")
  const section = document.slice(document.indexOf("## 11. Test vectors"))
  const quoted = [...section.matchAll(/0x[0-9a-f]{64}(?:\n\s+[0-9a-f]{64})?/g)].map((match) => match[0].replace(/\s+/g, ""))
  expect(quoted.length).toBeGreaterThanOrEqual(6)
  const everything = JSON.stringify(published)
  for (const value of quoted) expect(everything).toContain(value)
  expect(section).toContain("12500000")
})
