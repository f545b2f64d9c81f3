// Goal: the attestation digest is exactly EIP-712 over the type strings of the shared
// interface (recomputed here by hand), signatures are low-s r ‖ s ‖ v that viem and
// ecrecover accept, and malleable or malformed signatures are refused.
import { secp256k1 } from "@noble/curves/secp256k1.js"
import { concat, encodeAbiParameters, getAddress, hashTypedData, type Hex, isAddress, keccak256, recoverTypedDataAddress, toHex } from "viem"
import { assert, expect, it } from "vitest"
import { Attestation } from "../src/index.ts"

const guardianKey = Uint8Array.from(Buffer.from("59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d", "hex"))
const token = "0x5FbDB2315678afecb367f032d93F642f64180aa3" as const
const domain = Attestation.domain(46630n, token)
const confidentialMessage: Attestation.ConfidentialTransfer = {
  from: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
  to: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
  transferId: `0x${"00".repeat(16)}${"11".repeat(16)}`,
  nonce: 7n,
  ciphertextDigest: `0x${"22".repeat(32)}`,
  sealedDigest: `0x${"33".repeat(32)}`,
  deadline: 1_795_000_000n
}
const publicMessage: Attestation.PublicTransfer = {
  from: confidentialMessage.from,
  to: confidentialMessage.from,
  transferId: confidentialMessage.transferId,
  nonce: 8n,
  amount: 12_500_000n,
  ciphertextDigest: `0x${"44".repeat(32)}`,
  deadline: 1_795_000_000n
}

const utf8Hash = (text: string) => keccak256(toHex(text))
const domainSeparator = keccak256(
  encodeAbiParameters(
    [{ type: "bytes32" }, { type: "bytes32" }, { type: "bytes32" }, { type: "uint256" }, { type: "address" }],
    [
      utf8Hash("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"),
      utf8Hash("PPS ConfidentialToken"),
      utf8Hash("2"),
      46630n,
      token
    ]
  )
)
const eip712 = (structHash: Hex) => keccak256(concat(["0x1901", domainSeparator, structHash]))

it("hashes ConfidentialTransfer exactly as the interface's type string says", () => {
  const structHash = keccak256(
    encodeAbiParameters(
      [{ type: "bytes32" }, { type: "address" }, { type: "address" }, { type: "bytes32" }, { type: "uint256" }, { type: "bytes32" }, { type: "bytes32" }, { type: "uint64" }],
      [
        utf8Hash("ConfidentialTransfer(address from,address to,bytes32 transferId,uint256 nonce,bytes32 ciphertextDigest,bytes32 sealedDigest,uint64 deadline)"),
        confidentialMessage.from,
        confidentialMessage.to,
        confidentialMessage.transferId,
        confidentialMessage.nonce,
        confidentialMessage.ciphertextDigest,
        confidentialMessage.sealedDigest,
        confidentialMessage.deadline
      ]
    )
  )
  expect(Attestation.digest(Attestation.confidentialTransfer(domain, confidentialMessage))).toBe(eip712(structHash))
})

it("hashes PublicTransfer exactly as the interface's type string says", () => {
  const structHash = keccak256(
    encodeAbiParameters(
      [{ type: "bytes32" }, { type: "address" }, { type: "address" }, { type: "bytes32" }, { type: "uint256" }, { type: "uint256" }, { type: "bytes32" }, { type: "uint64" }],
      [
        utf8Hash("PublicTransfer(address from,address to,bytes32 transferId,uint256 nonce,uint256 amount,bytes32 ciphertextDigest,uint64 deadline)"),
        publicMessage.from,
        publicMessage.to,
        publicMessage.transferId,
        publicMessage.nonce,
        publicMessage.amount,
        publicMessage.ciphertextDigest,
        publicMessage.deadline
      ]
    )
  )
  expect(Attestation.digest(Attestation.publicTransfer(domain, publicMessage))).toBe(eip712(structHash))
})

it("signs low-s r ‖ s ‖ v that viem recovers to the guardian's address", async () => {
  for (const typedData of [Attestation.confidentialTransfer(domain, confidentialMessage), Attestation.publicTransfer(domain, publicMessage)]) {
    const signature = Attestation.sign(guardianKey, typedData)
    expect(signature).toMatch(/^0x[0-9a-f]{130}$/)
    const v = Number.parseInt(signature.slice(130), 16)
    assert.include([27, 28], v)
    const s = BigInt(`0x${signature.slice(66, 130)}`)
    assert.isTrue(s <= secp256k1.Point.CURVE().n / 2n)
    const address = Attestation.signerAddress(guardianKey)
    expect(await recoverTypedDataAddress({ ...typedData, signature } as unknown as Parameters<typeof recoverTypedDataAddress>[0])).toBe(address)
    expect(Attestation.recoverSigner(typedData, signature)).toEqual({ ok: true, value: address })
  }
})

it("recovers another address when any signed field changes", () => {
  const typedData = Attestation.confidentialTransfer(domain, confidentialMessage)
  const signature = Attestation.sign(guardianKey, typedData)
  const address = Attestation.signerAddress(guardianKey)
  const variants = [
    Attestation.confidentialTransfer(Attestation.domain(4663n, token), confidentialMessage),
    Attestation.confidentialTransfer(Attestation.domain(46630n, "0x5FbDB2315678afecb367f032d93F642f64180aa4"), confidentialMessage),
    Attestation.confidentialTransfer(domain, { ...confidentialMessage, from: confidentialMessage.to }),
    Attestation.confidentialTransfer(domain, { ...confidentialMessage, to: confidentialMessage.from }),
    Attestation.confidentialTransfer(domain, { ...confidentialMessage, transferId: `0x${"00".repeat(32)}` }),
    Attestation.confidentialTransfer(domain, { ...confidentialMessage, nonce: 8n }),
    Attestation.confidentialTransfer(domain, { ...confidentialMessage, ciphertextDigest: `0x${"23".repeat(32)}` }),
    Attestation.confidentialTransfer(domain, { ...confidentialMessage, sealedDigest: `0x${"34".repeat(32)}` }),
    Attestation.confidentialTransfer(domain, { ...confidentialMessage, deadline: 1_795_000_001n })
  ]
  for (const variant of variants) {
    const recovered = Attestation.recoverSigner(variant, signature)
    expect(recovered.ok && recovered.value === address).toBe(false)
  }
})

it("refuses high-s, bad v and malformed signatures", () => {
  const typedData = Attestation.confidentialTransfer(domain, confidentialMessage)
  const signature = Attestation.sign(guardianKey, typedData)
  const n = secp256k1.Point.CURVE().n
  const s = BigInt(`0x${signature.slice(66, 130)}`)
  const v = Number.parseInt(signature.slice(130), 16)
  // (r, n − s, v flipped) is the same signature in its malleable twin: ecrecover would take it.
  const highS = `${signature.slice(0, 66)}${(n - s).toString(16).padStart(64, "0")}${(v === 27 ? 28 : 27).toString(16)}` as Hex
  expect(Attestation.recoverSigner(typedData, highS)).toEqual({ ok: false, reason: "signature_high_s" })
  expect(Attestation.recoverSigner(typedData, `${signature.slice(0, 130)}01` as Hex)).toEqual({ ok: false, reason: "signature_v_invalid" })
  expect(Attestation.recoverSigner(typedData, signature.slice(0, 128) as Hex)).toEqual({ ok: false, reason: "signature_length_invalid" })
  expect(Attestation.recoverSigner(typedData, `0x${"00".repeat(64)}1b`)).toEqual({ ok: false, reason: "signature_invalid" })
})

it("refuses deadlines beyond uint64", () => {
  expect(() => Attestation.confidentialTransfer(domain, { ...confidentialMessage, deadline: 1n << 64n })).toThrow(/uint64/)
})

// The digest is encoded directly (not through viem's generic `hashTypedData`): the same bytes
// on random inputs of both types, and the same refusals.
const randomHex = (bytes: number) => `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("hex")}` as Hex
const randomAddress = (index: number) => {
  const lower = randomHex(20)
  // Lower case, checksummed mixed case and (rarely valid) upper case all occur.
  return index % 3 === 0 ? lower : index % 3 === 1 ? getAddress(lower) : (`0x${lower.slice(2).toUpperCase()}` as Hex)
}
const randomUint = (bits: number) => {
  const edge = [0n, 1n, (1n << BigInt(bits)) - 1n]
  const pick = crypto.getRandomValues(new Uint8Array(1))[0]!
  return pick < 48 ? edge[pick % 3]! : BigInt(randomHex(bits / 8)) >> BigInt(pick % bits)
}
const viemDigest = (typedData: Attestation.TypedData) => hashTypedData(typedData as unknown as Parameters<typeof hashTypedData>[0])

it("gives viem's hashTypedData bytes for random typed data of both types", () => {
  for (let index = 0; index < 300; index++) {
    const contract = randomAddress(index + 1)
    const valid = (address: string) => isAddress(address)
    const typedDomain = Attestation.domain(randomUint(64) + 1n, valid(contract) ? contract as Hex : getAddress(contract))
    const from = randomAddress(index)
    const to = randomAddress(index + 2)
    const typedData = index % 2 === 0
      ? Attestation.confidentialTransfer(typedDomain, {
        from: from as Hex,
        to: to as Hex,
        transferId: randomHex(32),
        nonce: randomUint(256),
        ciphertextDigest: randomHex(32),
        sealedDigest: randomHex(32),
        deadline: randomUint(64)
      })
      : Attestation.publicTransfer(typedDomain, {
        from: from as Hex,
        to: to as Hex,
        transferId: randomHex(32),
        nonce: randomUint(256),
        amount: randomUint(256),
        ciphertextDigest: randomHex(32),
        deadline: randomUint(64)
      })
    const ours = (() => {
      try {
        return Attestation.digest(typedData)
      } catch {
        return "refused"
      }
    })()
    const theirs = (() => {
      try {
        return viemDigest(typedData)
      } catch {
        return "refused"
      }
    })()
    expect(ours, JSON.stringify(typedData, (_key, value) => typeof value === "bigint" ? value.toString() : value)).toBe(theirs)
    // Upper-case addresses are refused by both unless they happen to be checksums; the rest sign.
    if (valid(from) && valid(to)) expect(ours).not.toBe("refused")
  }
})

it("refuses what viem refuses: a bad checksum, a short bytes32, integers out of range", () => {
  const good = Attestation.confidentialTransfer(domain, confidentialMessage)
  // A checksummed address with one letter's case flipped.
  const flipped = (address: Hex) => {
    const index = address.slice(2).search(/[a-fA-F]/) + 2
    const letter = address[index]!
    return `${address.slice(0, index)}${letter === letter.toLowerCase() ? letter.toUpperCase() : letter.toLowerCase()}${address.slice(index + 1)}` as Hex
  }
  const badChecksum = flipped(confidentialMessage.to)
  const variants: ReadonlyArray<Attestation.TypedData> = [
    { ...good, message: { ...confidentialMessage, from: flipped(confidentialMessage.from) } },
    { ...good, message: { ...confidentialMessage, to: badChecksum } },
    { ...good, message: { ...confidentialMessage, transferId: `0x${"11".repeat(31)}` } },
    { ...good, message: { ...confidentialMessage, nonce: 1n << 256n } },
    { ...good, message: { ...confidentialMessage, nonce: -1n } },
    { ...good, message: { ...confidentialMessage, deadline: 1n << 64n } },
    { ...good, domain: { ...domain, chainId: 1n << 256n } },
    { ...good, domain: { ...domain, verifyingContract: `0x${"ab".repeat(19)}` as Hex } }
  ]
  for (const variant of variants) {
    expect(() => viemDigest(variant), JSON.stringify(variant, (_key, value) => typeof value === "bigint" ? value.toString() : value)).toThrow()
    expect(() => Attestation.digest(variant)).toThrow()
  }
  // The domain separator is kept per domain: a refused domain is refused again, not served from a cache,
  // and a chain id that is not a bigint is refused even when the same value's separator is kept.
  Attestation.digest(good)
  expect(() => Attestation.digest({ ...good, domain: { ...domain, chainId: 46630 as unknown as bigint } })).toThrow(/bigint/)
  expect(() => Attestation.digest({ ...good, domain: { ...domain, verifyingContract: badChecksum } })).toThrow()
  expect(() => Attestation.digest({ ...good, domain: { ...domain, verifyingContract: badChecksum } })).toThrow()
})
