/**
 * Benchmarks of @pps/crypto: `pnpm --filter @pps/crypto bench`.
 *
 * Prints the median time of each operation on both backends, and the composite "server
 * side of one transfer", as a Markdown table, and appends each figure to
 * docs/benchmarks/results.jsonl (scripts/benchRecord.ts; `--no-record` to skip). One core: the
 * process runs everything sequentially.
 */
import { cpus } from "node:os"
import { Attestation, Backend, DecryptionProof, ElGamal, EncryptionKey, Note, Point } from "../src/index.ts"
import { medianMs, transferCrypto } from "./transferFloor.ts"
import { type Metric, recordResults } from "../../../scripts/benchRecord.ts"

const token = "0x5FbDB2315678afecb367f032d93F642f64180aa3" as const
const account = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC" as const
const guardianSigningKey = Uint8Array.from(Buffer.from("59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d", "hex"))

const operations = () => {
  const sender = EncryptionKey.generate()
  const recipient = EncryptionKey.generate()
  const guardian = EncryptionKey.generate()
  const publicKeys = [sender.publicKey, recipient.publicKey, guardian.publicKey]
  const amount = 12_500_000n
  const context = { chainId: 46630n, contract: token, transferId: new Uint8Array(32).fill(5) }
  const { ciphertext, opening } = ElGamal.encrypt(amount, publicKeys)
  const boxes = Note.sealTransfer({ context, note: { amount, memo: "invoice 117" }, opening, senderKey: sender.publicKey, recipientKey: recipient.publicKey, guardianKey: guardian.publicKey })
  const binding = { chainId: 46630n, contract: token, account }
  const pop = EncryptionKey.proveOwnership(sender, binding)
  const balance = { contract: token, commitment: ciphertext.commitment, handle: ciphertext.handles[1] ?? Point.identity, ciphertextVersion: 1n }
  const proof = DecryptionProof.prove({ keyPair: recipient, chainId: 46630n, account, expiresAtSeconds: 2_000_000_000n, claims: [{ asset: "USDG", amount, ciphertext: balance }] })
  const verifyContext = { chainId: 46630n, account, publicKey: recipient.publicKey, nowSeconds: 1_999_999_900n, lifetimeMaxSeconds: 300n, balanceOf: () => balance }
  const attestation = (ciphertextValue: ElGamal.Ciphertext, boxesValue: Note.TransferBoxes) =>
    Attestation.confidentialTransfer(Attestation.domain(46630n, token), {
      from: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
      to: account,
      transferId: `0x${"05".repeat(32)}`,
      nonce: 1n,
      ciphertextDigest: ElGamal.digest(ciphertextValue),
      sealedDigest: Note.sealedDigest(boxesValue),
      deadline: 2_000_000_000n
    })
  const typedData = attestation(ciphertext, boxes)
  const signature = Attestation.sign(guardianSigningKey, typedData)

  // As the interface describes it: the server encrypts and seals, the guardian opens its
  // box, checks C and all three handles against (a, r), and signs.
  const serverEncrypts = () => {
    const encrypted = ElGamal.encrypt(amount, publicKeys)
    const sealed = Note.sealTransfer({ context, note: { amount, memo: "invoice 117" }, opening: encrypted.opening, senderKey: sender.publicKey, recipientKey: recipient.publicKey, guardianKey: guardian.publicKey })
    const guardianOpening = Note.openGuardianNote(guardian, sealed.guardian, context)
    if (!guardianOpening.ok || !ElGamal.verifyOpening(encrypted.ciphertext, publicKeys, guardianOpening.value).ok) throw new Error("check failed")
    return Attestation.sign(guardianSigningKey, attestation(encrypted.ciphertext, sealed))
  }
  return [
    ["key pair: generate", () => EncryptionKey.generate()],
    ["proof of possession: prove", () => EncryptionKey.proveOwnership(sender, binding)],
    ["proof of possession: verify", () => EncryptionKey.verifyOwnership(sender.publicKey, pop, binding)],
    ["encrypt, 3 handles", () => ElGamal.encrypt(amount, publicKeys)],
    ["seal a transfer's 3 boxes", () => Note.sealTransfer({ context, note: { amount, memo: "invoice 117" }, opening, senderKey: sender.publicKey, recipientKey: recipient.publicKey, guardianKey: guardian.publicKey })],
    ["open one box (guardian note)", () => Note.openGuardianNote(guardian, boxes.guardian, context)],
    ["open one box (transfer note)", () => Note.openTransferNote(recipient, boxes.recipient, context, "recipient")],
    ["guardian check: verifyOpening, 3 handles", () => ElGamal.verifyOpening(ciphertext, publicKeys, opening)],
    ["matches (balance check, one key)", () => ElGamal.matches(recipient.secretKey, ciphertext.commitment, ciphertext.handles[1] ?? Point.identity, amount)],
    ["decryptToPoint", () => ElGamal.decryptToPoint(recipient.secretKey, ciphertext.commitment, ciphertext.handles[1] ?? Point.identity)],
    ["homomorphic add, 3 handles", () => ElGamal.add(ciphertext, ciphertext)],
    ["decryption proof: prove, 1 asset", () => DecryptionProof.prove({ keyPair: recipient, chainId: 46630n, account, expiresAtSeconds: 2_000_000_000n, claims: [{ asset: "USDG", amount, ciphertext: balance }] })],
    ["decryption proof: verify, 1 asset", () => DecryptionProof.verify(proof, verifyContext)],
    ["ciphertext + sealed digests", () => [ElGamal.digest(ciphertext), Note.sealedDigest(boxes)]],
    ["attestation: EIP-712 digest", () => Attestation.digest(typedData)],
    ["attestation: sign (secp256k1)", () => Attestation.sign(guardianSigningKey, typedData)],
    ["attestation: recover signer", () => Attestation.recoverSigner(typedData, signature)],
    ["**one transfer, server side: server encrypts, guardian checks**", serverEncrypts],
    // The split the service runs (transferFloor.ts): the server seals {amount, r}, the
    // guardian computes the ciphertext from it (recomputing is the check) and signs, and a
    // relayer signs the transaction: the floor the throughput benchmark compares against.
    ["**one transfer, service side: guardian computes the ciphertext; + relayer signature**", transferCrypto().oneTransfer]
  ] as const
}

const results = new Map<string, Record<string, number>>()
for (const backend of ["noble", "mcl"] as const) {
  await Backend.init({ backend })
  for (const [name, run] of operations()) {
    const row = results.get(name) ?? {}
    row[backend] = medianMs(run)
    results.set(name, row)
  }
}

const format = (milliseconds: number | undefined) => (milliseconds === undefined ? "" : milliseconds < 1 ? `${(milliseconds * 1000).toFixed(0)} µs` : `${milliseconds.toFixed(2)} ms`)
console.log(`machine: ${cpus()[0]?.model ?? "unknown"} (${cpus().length} vCPU), Node ${process.version}, ${new Date().toISOString().slice(0, 10)}`)
console.log("")
console.log("| operation | noble | mcl-wasm |")
console.log("|---|---:|---:|")
for (const [name, row] of results) console.log(`| ${name} | ${format(row.noble)} | ${format(row.mcl)} |`)

/** The composite rows were held to ≤ 2 ms on the backend the service runs (mcl-wasm). */
const compositeGoalMs = "<= 2"
recordResults("crypto", [...results].flatMap(([name, row]) =>
  (["mcl", "noble"] as const).flatMap((backend): Array<Metric> => {
    const value = row[backend]
    if (value === undefined) return []
    const composite = name.startsWith("**")
    return [{
      metric: `${name.replaceAll("**", "")} (${backend === "mcl" ? "mcl-wasm" : "noble"})`,
      value,
      unit: "ms",
      ...(composite && backend === "mcl" ? { goal: compositeGoalMs, headline: true } : {})
    }]
  })
))
