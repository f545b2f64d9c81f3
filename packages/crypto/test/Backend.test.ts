// Goal: the two backends are interchangeable: the same inputs give byte-identical outputs,
// so switching backends can never change a ciphertext, a box or a proof.
import fc from "fast-check"
import { afterAll, expect, it } from "vitest"
import { Backend, DecryptionProof, ElGamal, EncryptionKey, Note, Point } from "../src/index.ts"
import { deterministicRandom } from "../scripts/deterministicRandom.ts"
import { current, multiplyAmount } from "../src/internal/backend.ts"
import { encode } from "../src/internal/points.ts"
import { toHex } from "./backends.ts"

const everything = (seed: string, amount: bigint) => {
  const random = deterministicRandom(seed)
  const sender = EncryptionKey.generate(random)
  const recipient = EncryptionKey.generate(random)
  const guardian = EncryptionKey.generate(random)
  const { ciphertext, opening } = ElGamal.encrypt(amount, [sender.publicKey, recipient.publicKey, guardian.publicKey], random)
  const context = { chainId: 1n, contract: "0x0000000000000000000000000000000000000001" as const, transferId: new Uint8Array(32) }
  const boxes = Note.sealTransfer(
    { context, note: { amount, memo: "m" }, opening, senderKey: sender.publicKey, recipientKey: recipient.publicKey, guardianKey: guardian.publicKey },
    random
  )
  const pop = EncryptionKey.proveOwnership(sender, { chainId: 1n, contract: context.contract, account: context.contract }, random)
  const proof = DecryptionProof.prove(
    {
      keyPair: recipient,
      chainId: 1n,
      account: context.contract,
      expiresAtSeconds: 10n,
      claims: [{ asset: "USDG", amount, ciphertext: { contract: context.contract, commitment: ciphertext.commitment, handle: ciphertext.handles[1] ?? Point.identity, ciphertextVersion: 0n } }]
    },
    random
  )
  const sum = ElGamal.add(ciphertext, ElGamal.fromPublicAmount(amount, 3))
  return [
    recipient.publicKey,
    ciphertext.commitment,
    ...ciphertext.handles,
    boxes.sender,
    boxes.guardian,
    pop,
    ElGamal.decryptToPoint(recipient.secretKey, sum.commitment, sum.handles[1] ?? Point.identity),
    Point.negate(sum.commitment)
  ].map(toHex).concat([proof])
}

afterAll(async () => {
  await Backend.init({ backend: "noble" })
})

it("noble and mcl-wasm produce byte-identical results", async () => {
  await fc.assert(
    fc.asyncProperty(fc.string({ minLength: 1, maxLength: 16 }), fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), async (seed, amount) => {
      await Backend.init({ backend: "noble" })
      const viaNoble = everything(seed, amount)
      await Backend.init({ backend: "mcl" })
      const viaMcl = everything(seed, amount)
      expect(viaMcl).toEqual(viaNoble)
    }),
    { numRuns: 6 }
  )
})

it("reports the active backend and loads mcl-wasm only once", async () => {
  expect(await Backend.init({ backend: "noble" })).toBe("noble")
  expect(Backend.active()).toBe("noble")
  expect(await Backend.init()).toBe("mcl")
  expect(await Backend.init({ backend: "mcl" })).toBe("mcl")
  expect(Backend.active()).toBe("mcl")
})

it("multiplies every amount in the same time on mcl (amounts are offset to 254-bit scalars)", async () => {
  // Without the offset, amount 1 multiplied ~4x faster than 2^64 − 1 (23 µs vs 88 µs).
  // With it, the smallest and the largest amount take about the same time. Samples
  // alternate so that load from parallel test files hits both sides alike.
  await Backend.init({ backend: "mcl" })
  const backend = current()
  const time = (amount: bigint) => {
    const started = performance.now()
    multiplyAmount(backend, amount)
    return performance.now() - started
  }
  const small: Array<number> = []
  const large: Array<number> = []
  for (let index = 0; index < 400; index++) {
    small.push(time(1n))
    large.push(time((1n << 64n) - 1n))
  }
  const median = (samples: Array<number>) => samples.sort((a, b) => a - b)[samples.length >> 1] ?? 0
  const smallMedian = median(small.slice(50))
  const largeMedian = median(large.slice(50))
  expect(Math.abs(smallMedian - largeMedian) / largeMedian).toBeLessThan(0.2)
  // And the offset is removed again: the result is a·G.
  expect(toHex(encode(multiplyAmount(backend, 5n)))).toBe(toHex(ElGamal.fromPublicAmount(5n, 0).commitment))
})
