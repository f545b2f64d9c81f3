/**
 * Builds what the api server sends the guardian: a transfer's boxes sealed with
 * @pps/crypto exactly as the server will, and the authorize request around them.
 */
import { randomBytes } from "node:crypto"
import { ElGamal, EncryptionKey, Note, SealedBox } from "@pps/crypto"
import { type Address, bytesToHex, getAddress, type Hex, hexToBytes } from "viem"
import { privateKeyToAddress } from "viem/accounts"
import type { Domain } from "../../src/index.ts"

export const chainId = 46630n
/** A ConfidentialToken address for tests that need no chain. */
export const contract: Address = "0x00000000000000000000000000000000c0ffee01"

export interface Party {
  readonly address: Address
  readonly keys: EncryptionKey.KeyPair
}

export const newParty = (): Party => ({
  address: privateKeyToAddress(bytesToHex(randomBytes(32))),
  keys: EncryptionKey.generate()
})

export const newTransferId = (): Hex => bytesToHex(randomBytes(32))

let nonceCounter = BigInt(Date.now()) * 1000n
export const nextNonce = (): bigint => ++nonceCounter

export const nowSeconds = (): bigint => BigInt(Math.floor(Date.now() / 1000))

export interface TransferSpec {
  readonly guardianKey: Hex
  readonly from: Party
  /** For an agent: the owner's party (its key encrypts the agent's balance). */
  readonly fromKeyOwner?: Party
  readonly to: Party
  readonly amount: bigint
  readonly transferId?: Hex
  readonly nonce?: bigint
  readonly deadline?: bigint
  readonly agent?: Domain.AuthorizeRequest["agent"]
  readonly chainId?: bigint
  readonly contract?: Address
}

/** A confidential transfer's authorize request, boxes sealed as the server seals them. */
export const confidentialRequest = (spec: TransferSpec): Domain.AuthorizeRequest => {
  const guardianKey = EncryptionKey.parsePublicKey(hexToBytes(spec.guardianKey))
  if (!guardianKey.ok) throw new Error("bad guardian key")
  const transferId = spec.transferId ?? newTransferId()
  const senderKey = (spec.fromKeyOwner ?? spec.from).keys.publicKey
  const token = spec.contract ?? contract
  const chain = spec.chainId ?? chainId
  const { opening } = ElGamal.encrypt(spec.amount, [])
  const boxes = Note.sealTransfer({
    context: { chainId: chain, contract: getAddress(token), transferId: hexToBytes(transferId) },
    note: { amount: spec.amount, memo: "test memo" },
    opening,
    senderKey,
    recipientKey: spec.to.keys.publicKey,
    guardianKey: guardianKey.value
  })
  return {
    transferId,
    chainId: chain,
    contract: token,
    kind: "confidential",
    from: spec.from.address,
    to: spec.to.address,
    fromKey: bytesToHex(senderKey),
    toKey: bytesToHex(spec.to.keys.publicKey),
    nonce: spec.nonce ?? nextNonce(),
    deadline: spec.deadline ?? nowSeconds() + 600n,
    guardianNote: bytesToHex(boxes.guardian),
    sealedDigest: Note.sealedDigest(boxes),
    ...(spec.agent === undefined ? {} : { agent: spec.agent })
  }
}

/** A public transfer (or unshield) request: only the guardian's note is sealed. */
export const publicRequest = (spec: TransferSpec & { readonly publicAmount?: bigint }): Domain.AuthorizeRequest => {
  const guardianKey = EncryptionKey.parsePublicKey(hexToBytes(spec.guardianKey))
  if (!guardianKey.ok) throw new Error("bad guardian key")
  const transferId = spec.transferId ?? newTransferId()
  const token = spec.contract ?? contract
  const chain = spec.chainId ?? chainId
  const { opening } = ElGamal.encrypt(spec.amount, [])
  const box = SealedBox.seal({
    publicKey: guardianKey.value,
    plaintext: Note.encodeGuardianNote(opening),
    binding: { purpose: "transfer-guardian", chainId: chain, contract: getAddress(token), subjectId: hexToBytes(transferId) }
  })
  return {
    transferId,
    chainId: chain,
    contract: token,
    kind: "public",
    from: spec.from.address,
    to: spec.to.address,
    fromKey: bytesToHex(spec.from.keys.publicKey),
    amount: spec.publicAmount ?? spec.amount,
    nonce: spec.nonce ?? nextNonce(),
    deadline: spec.deadline ?? nowSeconds() + 600n,
    guardianNote: bytesToHex(box)
  }
}
