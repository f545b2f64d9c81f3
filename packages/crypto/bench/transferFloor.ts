/**
 * The cryptographic floor of one confidential transfer: every curve operation, box and
 * signature the service itself must compute for it, and nothing else. Shared by the crypto
 * benchmark (its "one transfer" rows) and the throughput benchmark of the server
 * (packages/server/bench/throughput.ts), which sets the server's measured CPU per transfer
 * beside this floor, measured in the same run.
 *
 * The split is the one the service runs: the api server seals `{amount, r}` to the guardian
 * and the parties' notes (plain form; in the sealed form the client does this part), the
 * guardian opens its box, computes the ciphertext from it (recomputing is the check) and
 * signs the EIP-712 attestation, and a relayer signs the chain transaction (one more
 * secp256k1 signature, measured as a second attestation signature, the same operation).
 */
import { Attestation, ElGamal, EncryptionKey, Note } from "../src/index.ts"

const token = "0x5FbDB2315678afecb367f032d93F642f64180aa3" as const
const recipientAddress = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC" as const
const senderAddress = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" as const
/** A well-known anvil development key: a benchmark signs nothing that matters. */
const signingKey = Uint8Array.from(Buffer.from("59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d", "hex"))

/**
 * The fixed inputs of one transfer and the work on them, as two closures: what the server
 * (or a sealing client) does, and what the guardian and a relayer do. The caller chooses the
 * backend (`Backend.init`) first.
 *
 * @since 0.4.0
 * @category benchmarks
 */
export const transferCrypto = (options: {
  /**
   * The secp256k1 signer the signatures are measured with: noble by default (this package's
   * own); the throughput benchmark passes libsecp256k1, which the guardian and the relayers use.
   */
  readonly signer?: (privateKey: Uint8Array) => Attestation.DigestSigner
} = {}) => {
  const signer = (options.signer ?? Attestation.nobleDigestSigner)(signingKey)
  const sender = EncryptionKey.generate()
  const recipient = EncryptionKey.generate()
  const guardian = EncryptionKey.generate()
  const publicKeys = [sender.publicKey, recipient.publicKey, guardian.publicKey]
  const amount = 12_500_000n
  const memo = "invoice 117"
  const context = { chainId: 46630n, contract: token, transferId: new Uint8Array(32).fill(5) }
  const attestation = (ciphertext: ElGamal.Ciphertext, boxes: Note.TransferBoxes) =>
    Attestation.confidentialTransfer(Attestation.domain(46630n, token), {
      from: senderAddress,
      to: recipientAddress,
      transferId: `0x${"05".repeat(32)}`,
      nonce: 1n,
      ciphertextDigest: ElGamal.digest(ciphertext),
      sealedDigest: Note.sealedDigest(boxes),
      deadline: 2_000_000_000n
    })

  /** The sealing side: a fresh `r`, and the three boxes. */
  const seal = () => {
    const randomness = ElGamal.encrypt(0n, []).opening.randomness
    return Note.sealTransfer({
      context,
      note: { amount, memo },
      opening: { amount, randomness },
      senderKey: sender.publicKey,
      recipientKey: recipient.publicKey,
      guardianKey: guardian.publicKey
    })
  }
  /** The guardian's side: open its box, compute the ciphertext, sign; then a relayer's signature. */
  const attest = (boxes: Note.TransferBoxes) => {
    const opening = Note.openGuardianNote(guardian, boxes.guardian, context)
    if (!opening.ok) throw new Error("the guardian's box did not open")
    const typedData = attestation(ElGamal.encryptWith(opening.value, publicKeys), boxes)
    Attestation.signWith(signer, typedData)
    return Attestation.signWith(signer, typedData)
  }
  return {
    seal,
    attest,
    /** Everything the service computes for one plain-form transfer. */
    oneTransfer: () => attest(seal())
  }
}

/** The median of `run`'s time in ms over at least `samplesMin` runs (after 5 warm-up runs). */
export const medianMs = (run: () => unknown, samplesMin = 30, budgetMs = 1_500): number => {
  for (let index = 0; index < 5; index++) run()
  const samples: Array<number> = []
  const started = performance.now()
  while (samples.length < samplesMin || (performance.now() - started < budgetMs && samples.length < 2000)) {
    const before = performance.now()
    run()
    samples.push(performance.now() - before)
  }
  samples.sort((a, b) => a - b)
  return samples[samples.length >> 1] ?? Number.NaN
}
