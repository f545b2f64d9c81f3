/**
 * Builds the published test vectors from fixed seeds. `scripts/vectors.ts` writes them to
 * test/vectors.json; test/vectors.test.ts rebuilds them and checks every byte, on both
 * backends, and also checks each vector with the verifying side of the API.
 */
import { bytesToHex } from "@noble/hashes/utils.js"
import type { Address } from "viem"
import { Attestation, DecryptionProof, ElGamal, EncryptionKey, Note, Point, SealedBox } from "../src/index.ts"
import { deterministicRandom } from "./deterministicRandom.ts"

const hex = (bytes: Uint8Array): `0x${string}` => `0x${bytesToHex(bytes)}`

const keyVector = (keyPair: EncryptionKey.KeyPair) => ({
  secretKey: hex(keyPair.secretKey),
  publicKey: hex(keyPair.publicKey),
  publicKeyCompressed: hex(Point.compress(keyPair.publicKey))
})

const keyPairFromSeed = (seed: string): EncryptionKey.KeyPair => EncryptionKey.generate(deterministicRandom(seed))

/** Fixed inputs shared by the script and the tests. */
export const inputs = {
  chainId: 46630n,
  tokenContract: "0x5FbDB2315678afecb367f032d93F642f64180aa3" as Address,
  registryContract: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512" as Address,
  senderAddress: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" as Address,
  recipientAddress: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC" as Address,
  transferId: "0x0000000000000000000000000000000001938f2a7c5e4b1d9a6f3e2c1b0a9d8e" as `0x${string}`,
  amount: 12_500_000n,
  memo: "invoice 2026-117 ✓",
  nonce: 7n,
  deadline: 1_795_000_000n,
  guardianSigningKey: "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318" as `0x${string}`,
  expiresAtSeconds: 1_795_000_300n
} as const

export const buildVectors = () => {
  const sender = keyPairFromSeed("PPS vectors: sender key")
  const recipient = keyPairFromSeed("PPS vectors: recipient key")
  const guardian = keyPairFromSeed("PPS vectors: guardian key")
  const keys = { sender, recipient, guardian }

  const derivedH = Point.deriveGeneratorH()

  const possessionBinding = {
    chainId: inputs.chainId,
    contract: inputs.registryContract,
    account: inputs.senderAddress
  }
  const possessionProof = EncryptionKey.proveOwnership(sender, possessionBinding, deterministicRandom("PPS vectors: pop"))

  const publicKeys = [sender.publicKey, recipient.publicKey, guardian.publicKey]
  const { ciphertext, opening } = ElGamal.encrypt(inputs.amount, publicKeys, deterministicRandom("PPS vectors: encrypt"))
  const publicCiphertext = ElGamal.select(ciphertext, [0, 2])

  const transferId = Uint8Array.from(Buffer.from(inputs.transferId.slice(2), "hex"))
  const context = { chainId: inputs.chainId, contract: inputs.tokenContract, transferId }
  const boxes = Note.sealTransfer(
    {
      context,
      note: { amount: inputs.amount, memo: inputs.memo },
      opening,
      senderKey: sender.publicKey,
      recipientKey: recipient.publicKey,
      guardianKey: guardian.publicKey
    },
    deterministicRandom("PPS vectors: seal transfer")
  )
  const balanceStatementBox = Note.sealBalanceStatement(
    {
      chainId: inputs.chainId,
      contract: inputs.tokenContract,
      account: inputs.recipientAddress,
      accountKey: recipient.publicKey,
      statement: { amount: inputs.amount, ciphertextVersion: 1n }
    },
    deterministicRandom("PPS vectors: balance statement")
  )

  // The recipient's balance after this one credit: (C, D_to) at version 1; a second asset
  // holds a shielded amount (D = identity, as the contract credits shields).
  const usdgBalance = {
    contract: inputs.tokenContract,
    commitment: ciphertext.commitment,
    handle: ciphertext.handles[1] ?? Point.identity,
    ciphertextVersion: 1n
  }
  const shieldedAmount = 3_000_000n
  const shielded = ElGamal.fromPublicAmount(shieldedAmount, 2)
  const ethBalanceShielded = {
    contract: "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0" as Address,
    commitment: shielded.commitment,
    handle: shielded.handles[0] ?? Point.identity,
    ciphertextVersion: 4n
  }
  const decryptionProof = DecryptionProof.prove(
    {
      keyPair: recipient,
      chainId: inputs.chainId,
      account: inputs.recipientAddress,
      expiresAtSeconds: inputs.expiresAtSeconds,
      claims: [
        { asset: "USDG", amount: inputs.amount, ciphertext: usdgBalance },
        { asset: "ETH", amount: shieldedAmount, ciphertext: ethBalanceShielded }
      ]
    },
    deterministicRandom("PPS vectors: decryption proof")
  )

  const guardianSigningKey = Uint8Array.from(Buffer.from(inputs.guardianSigningKey.slice(2), "hex"))
  const domain = Attestation.domain(inputs.chainId, inputs.tokenContract)
  const confidential = Attestation.confidentialTransfer(domain, {
    from: inputs.senderAddress,
    to: inputs.recipientAddress,
    transferId: inputs.transferId,
    nonce: inputs.nonce,
    ciphertextDigest: ElGamal.digest(ciphertext),
    sealedDigest: Note.sealedDigest(boxes),
    deadline: inputs.deadline
  })
  const unshield = Attestation.publicTransfer(domain, {
    from: inputs.senderAddress,
    to: inputs.senderAddress,
    transferId: inputs.transferId,
    nonce: inputs.nonce,
    amount: inputs.amount,
    ciphertextDigest: ElGamal.digest(publicCiphertext),
    deadline: inputs.deadline
  })

  return {
    description:
      "Test vectors of @pps/crypto, produced by `pnpm --filter @pps/crypto vectors` from fixed seeds (scripts/vectorData.ts). Points are 64-byte EVM encodings (x || y), scalars 32-byte big-endian, integers decimal strings.",
    curve: {
      fieldModulus: Point.fieldModulus.toString(),
      order: Point.order.toString(),
      G: hex(Point.G),
      H: hex(Point.H),
      hTag: Point.generatorHTag,
      hCounter: derivedH.counter
    },
    keys: { sender: keyVector(keys.sender), recipient: keyVector(keys.recipient), guardian: keyVector(keys.guardian) },
    proofOfPossession: {
      chainId: inputs.chainId.toString(),
      contract: inputs.registryContract,
      account: inputs.senderAddress,
      publicKey: hex(sender.publicKey),
      proof: hex(possessionProof)
    },
    encryption: {
      amount: inputs.amount.toString(),
      randomness: `0x${opening.randomness.toString(16).padStart(64, "0")}`,
      commitment: hex(ciphertext.commitment),
      handleSender: hex(ciphertext.handles[0] ?? Point.identity),
      handleRecipient: hex(ciphertext.handles[1] ?? Point.identity),
      handleGuardian: hex(ciphertext.handles[2] ?? Point.identity),
      ciphertextDigest: ElGamal.digest(ciphertext),
      publicCiphertextDigest: ElGamal.digest(publicCiphertext),
      amountPoint: hex(ElGamal.decryptToPoint(recipient.secretKey, ciphertext.commitment, ciphertext.handles[1] ?? Point.identity))
    },
    sealedBoxes: {
      chainId: inputs.chainId.toString(),
      contract: inputs.tokenContract,
      transferId: inputs.transferId,
      amount: inputs.amount.toString(),
      memo: inputs.memo,
      senderBinding: hex(SealedBox.bindingBytes({ purpose: "transfer-sender", chainId: inputs.chainId, contract: inputs.tokenContract, subjectId: transferId })),
      sender: hex(boxes.sender),
      recipient: hex(boxes.recipient),
      guardian: hex(boxes.guardian),
      sealedDigest: Note.sealedDigest(boxes),
      balanceStatement: {
        account: inputs.recipientAddress,
        amount: inputs.amount.toString(),
        ciphertextVersion: "1",
        box: hex(balanceStatementBox)
      }
    },
    decryptionProof: {
      chainId: inputs.chainId.toString(),
      account: inputs.recipientAddress,
      publicKey: hex(recipient.publicKey),
      expiresAtSeconds: inputs.expiresAtSeconds.toString(),
      balances: {
        USDG: {
          contract: usdgBalance.contract,
          commitment: hex(usdgBalance.commitment),
          handle: hex(usdgBalance.handle),
          ciphertextVersion: usdgBalance.ciphertextVersion.toString(),
          amount: inputs.amount.toString()
        },
        ETH: {
          contract: ethBalanceShielded.contract,
          commitment: hex(ethBalanceShielded.commitment),
          handle: hex(ethBalanceShielded.handle),
          ciphertextVersion: ethBalanceShielded.ciphertextVersion.toString(),
          amount: shieldedAmount.toString()
        }
      },
      proof: decryptionProof
    },
    attestation: {
      guardianSigningKey: inputs.guardianSigningKey,
      guardianAddress: Attestation.signerAddress(guardianSigningKey),
      confidentialTransfer: {
        message: {
          ...confidential.message,
          nonce: inputs.nonce.toString(),
          deadline: inputs.deadline.toString()
        },
        digest: Attestation.digest(confidential),
        signature: Attestation.sign(guardianSigningKey, confidential)
      },
      unshield: {
        message: {
          ...unshield.message,
          nonce: inputs.nonce.toString(),
          amount: inputs.amount.toString(),
          deadline: inputs.deadline.toString()
        },
        digest: Attestation.digest(unshield),
        signature: Attestation.sign(guardianSigningKey, unshield)
      }
    }
  }
}

export type Vectors = ReturnType<typeof buildVectors>
