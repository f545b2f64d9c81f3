/**
 * Preparing an authorization: everything that needs no state (validation, opening the note,
 * the ciphertext, the signature) happens here, before the account is locked. Pure functions:
 * the sender's lock is held only for what needs it (Decide.ts).
 *
 * A transfer's ciphertext is computed here, not checked: the server draws the opening r and
 * seals {amount, r} to the guardian; the guardian opens it and computes C = a·G + r·H and the
 * handles itself (`ElGamal.encryptWith`), so every handle encodes the amount in its note by
 * construction, and signs exactly those points.
 *
 * @since 0.5.0
 */
import { Attestation, ElGamal, EncryptionKey, Note } from "@pps/crypto"
import { type Address, bytesToHex, getAddress, type Hex, hexToBytes } from "viem"
import { Authorized, type AuthorizeRequest, type RefusedReason } from "../Domain.ts"
import type { Timing } from "../Guardian.ts"
import type { GuardianKeys } from "../GuardianKeys.ts"
import { isValidTimeZone } from "../internal/dayWindow.ts"
import * as Invariant from "../internal/Invariant.ts"
import type { AccountRef } from "../internal/store.ts"
import { refFor } from "./GuardianContext.ts"

/**
 * An authorization ready to be decided: the amount, and the attestation the guardian gives if
 * the decision is to reserve it.
 *
 * @since 0.5.0
 * @category models
 */
export interface Prepared {
  readonly sender: AccountRef
  readonly recipient: Address
  readonly amount: bigint
  readonly authorized: Authorized
}

/** The parties' encryption keys, parsed (the recipient's only for a confidential transfer). */
interface PartyKeys {
  readonly fromKey: EncryptionKey.PublicKey
  readonly toKey: EncryptionKey.PublicKey | undefined
}

/** The refusals that depend on the request alone: its shape, deadline, time zone and keys. */
const checkRequest = (request: AuthorizeRequest, nowMs: number, timing: Timing): PartyKeys | RefusedReason => {
  const confidential = request.kind === "confidential"
  const shapeOk = confidential
    ? request.toKey !== undefined && request.sealedDigest !== undefined && request.amount === undefined
    : request.toKey === undefined && request.sealedDigest === undefined && request.amount !== undefined
  // A refund (D43) sends back a confidential transfer: it is confidential itself.
  if (!shapeOk || (request.refundOf !== undefined && !confidential)) return "inputs_inconsistent"
  if (confidential && request.from.toLowerCase() === request.to.toLowerCase()) return "self_transfer"
  const nowSeconds = BigInt(Math.floor(nowMs / 1000))
  if (request.deadline <= nowSeconds || request.deadline > nowSeconds + BigInt(timing.deadlineHorizonSeconds)) {
    return "deadline_out_of_range"
  }
  if (request.agent !== undefined && !isValidTimeZone(request.agent.policy.timeZone)) return "time_zone_invalid"
  const fromKey = EncryptionKey.parsePublicKey(hexToBytes(request.fromKey as Hex))
  if (!fromKey.ok) return "sender_key_invalid"
  if (request.toKey === undefined) return { fromKey: fromKey.value, toKey: undefined }
  const toKey = EncryptionKey.parsePublicKey(hexToBytes(request.toKey as Hex))
  if (!toKey.ok) return "recipient_key_invalid"
  return { fromKey: fromKey.value, toKey: toKey.value }
}

/** Opens the guardian's note (the amount and its opening r) and checks it against the request. */
const openNote = (request: AuthorizeRequest, keys: GuardianKeys, contract: Address): ElGamal.Opening | RefusedReason => {
  const opened = Note.openGuardianNote(keys.encryption, hexToBytes(request.guardianNote as Hex), {
    chainId: request.chainId,
    contract,
    transferId: hexToBytes(request.transferId as Hex)
  })
  if (!opened.ok) return "note_invalid"
  if (opened.value.amount === 0n) return "amount_zero"
  if (request.kind !== "confidential" && opened.value.amount !== request.amount) return "public_amount_mismatch"
  return opened.value
}

/**
 * The ciphertext of the amount (to the sender, the recipient of a confidential transfer, and
 * the guardian) and the EIP-712 attestation of exactly those points.
 */
const attest = (
  request: AuthorizeRequest,
  keys: GuardianKeys,
  contract: Address,
  to: Address,
  parties: PartyKeys,
  opening: ElGamal.Opening
): Authorized => {
  const confidential = request.kind === "confidential"
  const guardianKey = keys.encryption.publicKey
  const publicKeys = parties.toKey === undefined ? [parties.fromKey, guardianKey] : [parties.fromKey, parties.toKey, guardianKey]
  const ciphertext = ElGamal.encryptWith(opening, publicKeys)
  const ciphertextDigest = ElGamal.digest(ciphertext)
  const [fromHandle, second, third] = ciphertext.handles
  if (fromHandle === undefined || second === undefined) {
    // Thrown from plain code: the Effect that runs `prepare` turns it into a defect.
    throw new Invariant.InvariantViolation({ invariant: "a ciphertext has one handle per public key it was encrypted to" })
  }
  const domain = Attestation.domain(request.chainId, contract)
  const from = getAddress(request.from)
  const transferId = request.transferId.toLowerCase() as Hex
  const typedData = confidential
    ? Attestation.confidentialTransfer(domain, {
      from,
      to,
      transferId,
      nonce: request.nonce,
      ciphertextDigest,
      sealedDigest: request.sealedDigest as Hex,
      deadline: request.deadline
    })
    : Attestation.publicTransfer(domain, {
      from,
      to,
      transferId,
      nonce: request.nonce,
      amount: opening.amount,
      ciphertextDigest,
      deadline: request.deadline
    })
  const signature = Attestation.signWith(keys.signer, typedData)
  const ciphertextPoints = confidential && third !== undefined
    ? { commitment: bytesToHex(ciphertext.commitment), fromHandle: bytesToHex(fromHandle), toHandle: bytesToHex(second), guardianHandle: bytesToHex(third) }
    : { commitment: bytesToHex(ciphertext.commitment), fromHandle: bytesToHex(fromHandle), guardianHandle: bytesToHex(second) }
  return new Authorized({ transferId, ciphertext: ciphertextPoints, ciphertextDigest, signature, deadline: request.deadline })
}

/**
 * The stateless part of an authorization: a refusal, or the prepared attestation.
 *
 * @since 0.5.0
 * @category steps
 */
export const prepare = (request: AuthorizeRequest, keys: GuardianKeys, nowMs: number, timing: Timing): Prepared | RefusedReason => {
  const parties = checkRequest(request, nowMs, timing)
  if (typeof parties === "string") return parties
  const contract = getAddress(request.contract)
  const opening = openNote(request, keys, contract)
  if (typeof opening === "string") return opening
  const recipient = getAddress(request.to)
  return {
    sender: refFor(request.chainId, request.contract, request.from),
    recipient,
    amount: opening.amount,
    authorized: attest(request, keys, contract, recipient, parties, opening)
  }
}
