/**
 * Builders for ConfidentialToken requests and the guardian's attestations over them, plus an
 * off-chain ledger that sums the same ciphertexts the contract sums, to compare the two.
 */
import { type Address, encodeAbiParameters, type Hex, keccak256, type LocalAccount, numberToHex, toHex } from "viem"
import * as ConfidentialToken from "../../src/artifacts/ConfidentialToken.ts"
import * as TypedData from "../../src/typedData.ts"
import type { Chain } from "./chain.ts"
import { randomBytes } from "@noble/curves/utils.js"
import { bn254 } from "@noble/curves/bn254.js"
import { digestPoints, encrypt, type EvmPoint, fromEvm, type KeyPair, toEvm } from "./elgamal.ts"

type G1Point = InstanceType<typeof bn254.G1.Point>

export interface ConfidentialTransferRequest {
  readonly from: Address
  readonly to: Address
  readonly transferId: Hex
  readonly nonce: bigint
  readonly commitment: EvmPoint
  readonly fromHandle: EvmPoint
  readonly toHandle: EvmPoint
  readonly guardianHandle: EvmPoint
  readonly sealedDigest: Hex
  readonly deadline: bigint
}

export interface PublicTransferRequest {
  readonly from: Address
  readonly to: Address
  readonly transferId: Hex
  readonly nonce: bigint
  readonly amount: bigint
  readonly commitment: EvmPoint
  readonly fromHandle: EvmPoint
  readonly guardianHandle: EvmPoint
  readonly deadline: bigint
}

/** A server-style transfer id: 16 random bytes (a ULID's size) left-padded to 32. */
export const newTransferId = (): Hex => numberToHex(BigInt(toHex(randomBytes(16))), { size: 32 })

export const confidentialRequest = (parameters: {
  readonly from: Address
  readonly to: Address
  readonly amount: bigint
  readonly fromKey: KeyPair
  readonly toKey: KeyPair
  readonly guardianKey: KeyPair
  readonly nonce: bigint
  readonly deadline: bigint
}): ConfidentialTransferRequest => {
  const { commitment, handles } = encrypt(parameters.amount, [
    parameters.fromKey.publicKey,
    parameters.toKey.publicKey,
    parameters.guardianKey.publicKey
  ])
  const [fromHandle, toHandle, guardianHandle] = handles.map(toEvm)
  if (fromHandle === undefined || toHandle === undefined || guardianHandle === undefined) throw new Error("three handles")
  return {
    from: parameters.from,
    to: parameters.to,
    transferId: newTransferId(),
    nonce: parameters.nonce,
    commitment: toEvm(commitment),
    fromHandle,
    toHandle,
    guardianHandle,
    // The contract only sees this digest; its preimage (the sealed boxes) is the crypto package's.
    sealedDigest: toHex(randomBytes(32)),
    deadline: parameters.deadline
  }
}

export const publicRequest = (parameters: {
  readonly from: Address
  readonly to: Address
  readonly amount: bigint
  readonly fromKey: KeyPair
  readonly guardianKey: KeyPair
  readonly nonce: bigint
  readonly deadline: bigint
}): PublicTransferRequest => {
  const { commitment, handles } = encrypt(parameters.amount, [parameters.fromKey.publicKey, parameters.guardianKey.publicKey])
  const [fromHandle, guardianHandle] = handles.map(toEvm)
  if (fromHandle === undefined || guardianHandle === undefined) throw new Error("two handles")
  return {
    from: parameters.from,
    to: parameters.to,
    transferId: newTransferId(),
    nonce: parameters.nonce,
    amount: parameters.amount,
    commitment: toEvm(commitment),
    fromHandle,
    guardianHandle,
    deadline: parameters.deadline
  }
}

export interface Domain {
  readonly chainId: number
  readonly contract: Address
}

export const signConfidential = (signer: LocalAccount, domain: Domain, request: ConfidentialTransferRequest): Promise<Hex> =>
  signer.signTypedData({
    domain: TypedData.domain(domain.chainId, domain.contract),
    types: TypedData.confidentialTransferTypes,
    primaryType: "ConfidentialTransfer",
    message: {
      from: request.from,
      to: request.to,
      transferId: request.transferId,
      nonce: request.nonce,
      ciphertextDigest: digestPoints([request.commitment, request.fromHandle, request.toHandle, request.guardianHandle]),
      sealedDigest: request.sealedDigest,
      deadline: request.deadline
    }
  })

export const signPublic = (signer: LocalAccount, domain: Domain, request: PublicTransferRequest): Promise<Hex> =>
  signer.signTypedData({
    domain: TypedData.domain(domain.chainId, domain.contract),
    types: TypedData.publicTransferTypes,
    primaryType: "PublicTransfer",
    message: {
      from: request.from,
      to: request.to,
      transferId: request.transferId,
      nonce: request.nonce,
      amount: request.amount,
      ciphertextDigest: digestPoints([request.commitment, request.fromHandle, request.guardianHandle]),
      deadline: request.deadline
    }
  })

export interface KeyRotationRequest {
  readonly account: Address
  readonly nonce: bigint
  readonly newKey: EvmPoint
  readonly commitment: EvmPoint
  readonly ownerHandle: EvmPoint
  readonly guardianHandle: EvmPoint
  readonly deadline: bigint
}

/** keccak256 of an encrypted balance's six words, as the contract's `previousBalanceDigest`. */
export const balanceDigest = (balance: { commitment: EvmPoint; ownerHandle: EvmPoint; guardianHandle: EvmPoint }): Hex =>
  keccak256(
    encodeAbiParameters(
      Array(6).fill({ type: "uint256" }),
      [balance.commitment, balance.ownerHandle, balance.guardianHandle].flatMap((point) => [point.x, point.y])
    )
  )

/**
 * A key rotation of `account` to `newKey` whose new balance encrypts `amount` (what the guardian
 * would compute from its books), and `sign`, which signs its KeyRotation typed data against the
 * balance stored on chain when it is called (the guardian's and the account's signatures alike).
 */
export const keyRotationRequest = async (
  chain: Chain,
  token: Address,
  account: Address,
  newKey: KeyPair,
  amount: bigint,
  deadline: bigint,
  nonce = 0n,
  guardianKey: KeyPair = chain.guardianKey
) => {
  const { commitment, handles } = encrypt(amount, [newKey.publicKey, guardianKey.publicKey])
  const [ownerHandle, guardianHandle] = handles.map(toEvm)
  if (ownerHandle === undefined || guardianHandle === undefined) throw new Error("two handles")
  const request: KeyRotationRequest = { account, nonce, newKey: newKey.evm, commitment: toEvm(commitment), ownerHandle, guardianHandle, deadline }
  const sign = async (signer: LocalAccount, previous?: Hex): Promise<Hex> => {
    const stored = await chain.client.readContract({ address: token, abi: ConfidentialToken.abi, functionName: "encryptedBalanceOf", args: [account] })
    return signer.signTypedData({
      domain: TypedData.domain(chain.chainId, token),
      types: TypedData.keyRotationTypes,
      primaryType: "KeyRotation",
      message: {
        account,
        nonce,
        keyX: request.newKey.x,
        keyY: request.newKey.y,
        previousBalanceDigest: previous ?? balanceDigest(stored),
        balanceDigest: digestPoints([request.commitment, request.ownerHandle, request.guardianHandle]),
        deadline
      }
    })
  }
  return { request, sign }
}

export interface Triple {
  commitment: G1Point
  ownerHandle: G1Point
  guardianHandle: G1Point
}

/** The off-chain mirror of the contract's balances: the same sums, computed with noble. */
export class Ledger {
  private readonly triples = new Map<Address, Triple>()

  get(account: Address): Triple {
    let triple = this.triples.get(account)
    if (triple === undefined) {
      triple = { commitment: bn254.G1.Point.ZERO, ownerHandle: bn254.G1.Point.ZERO, guardianHandle: bn254.G1.Point.ZERO }
      this.triples.set(account, triple)
    }
    return triple
  }

  shield(to: Address, amount: bigint): void {
    const triple = this.get(to)
    triple.commitment = triple.commitment.add(bn254.G1.Point.BASE.multiply(amount))
  }

  confidential(request: ConfidentialTransferRequest): void {
    const sender = this.get(request.from)
    sender.commitment = sender.commitment.subtract(fromEvm(request.commitment))
    sender.ownerHandle = sender.ownerHandle.subtract(fromEvm(request.fromHandle))
    sender.guardianHandle = sender.guardianHandle.subtract(fromEvm(request.guardianHandle))
    const recipient = this.get(request.to)
    recipient.commitment = recipient.commitment.add(fromEvm(request.commitment))
    recipient.ownerHandle = recipient.ownerHandle.add(fromEvm(request.toHandle))
    recipient.guardianHandle = recipient.guardianHandle.add(fromEvm(request.guardianHandle))
  }

  public(request: PublicTransferRequest): void {
    const sender = this.get(request.from)
    sender.commitment = sender.commitment.subtract(fromEvm(request.commitment))
    sender.ownerHandle = sender.ownerHandle.subtract(fromEvm(request.fromHandle))
    sender.guardianHandle = sender.guardianHandle.subtract(fromEvm(request.guardianHandle))
  }

  evm(account: Address): { commitment: EvmPoint; ownerHandle: EvmPoint; guardianHandle: EvmPoint } {
    const triple = this.get(account)
    return {
      commitment: toEvm(triple.commitment),
      ownerHandle: toEvm(triple.ownerHandle),
      guardianHandle: toEvm(triple.guardianHandle)
    }
  }
}
