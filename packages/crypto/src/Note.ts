/**
 * The plaintexts sealed in boxes, and the boxes of one transfer.
 *
 * - Transfer note {amount, memo}, sealed to the sender (or an agent's owner) and to the
 *   recipient: 0x01 ‖ amount (u64) ‖ memo length (u16) ‖ memo UTF-8 padded with zeros to
 *   512 bytes. Always 523 bytes, so a box does not reveal the memo's length.
 * - Guardian note {amount, r}, sealed to the guardian: 0x02 ‖ amount (u64) ‖ r (32).
 * - Balance statement {amount, ciphertext version}, sealed by the guardian to an account:
 *   0x03 ‖ amount (u64) ‖ ciphertext version (u64).
 *
 * All integers big-endian. The guardian can open only its own box; it checks that its
 * (amount, r) produce exactly the on-chain commitment and all three handles. The other two
 * boxes it cannot check; their consistency is checked by their readers (sender and
 * recipient open their note and confirm its amount against the on-chain ciphertext with
 * `ElGamal.matches`), and the attestation binds all three boxes through `sealedDigest`, so
 * the server cannot swap them afterwards.
 *
 * @since 0.1.0
 */
import { bytesToHex } from "@noble/hashes/utils.js"
import { keccak_256 } from "@noble/hashes/sha3.js"
import type { Address, Hex } from "viem"
import { addressBytes, ByteReader, concatBytes, LengthPrefixedWriter, uintBE, utf8, utf8Decode } from "./internal/bytes.ts"
import { groupOrder } from "./internal/curve.ts"
import { parseScalar, scalarBytes } from "./internal/scalars.ts"
import { assertAmount, type Opening } from "./ElGamal.ts"
import type { KeyPair, PublicKey } from "./EncryptionKey.ts"
import { type RandomSource, secure } from "./Random.ts"
import { fail, type Result, succeed } from "./Result.ts"
import * as SealedBox from "./SealedBox.ts"

/**
 * A transfer's amount and memo, as sender and recipient read them.
 *
 * @since 0.1.0
 * @category models
 */
export interface TransferNote {
  readonly amount: bigint
  readonly memo: string
}

/**
 * The guardian's balance statement to an account: its balance at a ciphertext version.
 *
 * @since 0.1.0
 * @category models
 */
export interface BalanceStatement {
  readonly amount: bigint
  readonly ciphertextVersion: bigint
}

/**
 * The guardian's running total of what one API key sent (D40).
 *
 * @since 0.1.0
 * @category models
 */
export interface KeyTotal {
  /** Base units sent through the key and confirmed, summed (u128). */
  readonly amount: bigint
  /** How many confirmed transfers the sum counts. */
  readonly transfers: bigint
}

/**
 * The three boxes of a transfer, in the order `sealedDigest` hashes them.
 *
 * @since 0.1.0
 * @category models
 */
export interface TransferBoxes {
  readonly sender: Uint8Array
  readonly recipient: Uint8Array
  readonly guardian: Uint8Array
}

/**
 * What the boxes of a transfer are bound to.
 *
 * @since 0.1.0
 * @category models
 */
export interface TransferContext {
  readonly chainId: bigint
  /** The ConfidentialToken contract of the asset. */
  readonly contract: Address
  /** The server's 32-byte transfer id. */
  readonly transferId: Uint8Array
}

/**
 * Why an opened box did not hold a well-formed note.
 *
 * @since 0.1.0
 * @category errors
 */
export type NoteError = SealedBox.SealedBoxError | "note_malformed"

/**
 * Longest memo in UTF-8 bytes (D15).
 *
 * @since 0.1.0
 * @category constants
 */
export const memoBytesMax = 512

const transferNoteTag = 0x01
const guardianNoteTag = 0x02
const balanceStatementTag = 0x03
const keyTotalTag = 0x04
const heldAmountTag = 0x05
const transferNoteLength = 1 + 8 + 2 + memoBytesMax
const guardianNoteLength = 1 + 8 + 32

/**
 * The exact length of a transfer's sender or recipient box (the memo is padded, so every
 * note has one size and a box's length says nothing about its memo). A client that seals a
 * transfer itself sends boxes of exactly these lengths.
 *
 * @since 0.1.0
 * @category constants
 */
export const transferBoxLength = SealedBox.boxOverhead + transferNoteLength

/**
 * The exact length of a transfer's guardian box {amount, r}.
 *
 * @since 0.1.0
 * @category constants
 */
export const guardianBoxLength = SealedBox.boxOverhead + guardianNoteLength

/**
 * Serialises a transfer note; throws if the amount or memo is out of range (programmer
 * errors: the API validates both first).
 *
 * @since 0.1.0
 * @category encoding
 */
export const encodeTransferNote = (note: TransferNote): Uint8Array => {
  assertAmount(note.amount)
  const memo = utf8(note.memo)
  if (memo.length > memoBytesMax) throw new RangeError(`memo must be at most ${memoBytesMax} UTF-8 bytes`)
  const out = new Uint8Array(transferNoteLength)
  out[0] = transferNoteTag
  out.set(uintBE(note.amount, 8), 1)
  out.set(uintBE(BigInt(memo.length), 2), 9)
  out.set(memo, 11)
  return out
}

/**
 * Parses a transfer note, refusing wrong lengths, tags, non-zero padding and bad UTF-8.
 *
 * @since 0.1.0
 * @category encoding
 */
export const decodeTransferNote = (bytes: Uint8Array): Result<TransferNote, "note_malformed"> => {
  if (bytes.length !== transferNoteLength || bytes[0] !== transferNoteTag) return fail("note_malformed")
  const reader = new ByteReader(bytes.subarray(1))
  const amount = reader.uint(8)
  const memoLength = reader.uint(2)
  if (amount === undefined || memoLength === undefined || memoLength > BigInt(memoBytesMax)) return fail("note_malformed")
  const memoBytes = bytes.subarray(11, 11 + Number(memoLength))
  if (bytes.subarray(11 + Number(memoLength)).some((byte) => byte !== 0)) return fail("note_malformed")
  const memo = utf8Decode(memoBytes)
  return memo === undefined ? fail("note_malformed") : succeed({ amount, memo })
}

/**
 * Serialises the guardian's note {amount, r}.
 *
 * @since 0.1.0
 * @category encoding
 */
export const encodeGuardianNote = (opening: Opening): Uint8Array => {
  assertAmount(opening.amount)
  if (opening.randomness <= 0n || opening.randomness >= groupOrder) throw new RangeError("randomness must be in [1, n)")
  return concatBytes(Uint8Array.of(guardianNoteTag), uintBE(opening.amount, 8), scalarBytes(opening.randomness))
}

/**
 * Parses the guardian's note.
 *
 * @since 0.1.0
 * @category encoding
 */
export const decodeGuardianNote = (bytes: Uint8Array): Result<Opening, "note_malformed"> => {
  if (bytes.length !== guardianNoteLength || bytes[0] !== guardianNoteTag) return fail("note_malformed")
  const amount = new ByteReader(bytes.subarray(1, 9)).uint(8)
  const randomness = parseScalar(bytes.subarray(9))
  if (amount === undefined || randomness === undefined || randomness === 0n) return fail("note_malformed")
  return succeed({ amount, randomness })
}

/**
 * Serialises a balance statement.
 *
 * @since 0.1.0
 * @category encoding
 */
export const encodeBalanceStatement = (statement: BalanceStatement): Uint8Array => {
  assertAmount(statement.amount)
  return concatBytes(
    Uint8Array.of(balanceStatementTag),
    uintBE(statement.amount, 8),
    uintBE(statement.ciphertextVersion, 8)
  )
}

/**
 * Parses a balance statement.
 *
 * @since 0.1.0
 * @category encoding
 */
export const decodeBalanceStatement = (bytes: Uint8Array): Result<BalanceStatement, "note_malformed"> => {
  if (bytes.length !== 17 || bytes[0] !== balanceStatementTag) return fail("note_malformed")
  const reader = new ByteReader(bytes.subarray(1))
  const amount = reader.uint(8)
  const ciphertextVersion = reader.uint(8)
  if (amount === undefined || ciphertextVersion === undefined) return fail("note_malformed")
  return succeed({ amount, ciphertextVersion })
}

const transferBinding = (context: TransferContext, purpose: SealedBox.Purpose): SealedBox.Binding => ({
  purpose,
  chainId: context.chainId,
  contract: context.contract,
  subjectId: context.transferId
})

/**
 * Seals a transfer's three boxes in one pass (one shared ephemeral point): {amount, memo}
 * to the sender's key (an agent's owner key for agents) and to the recipient's key,
 * {amount, r} to the guardian's key.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sealTransfer = (
  input: {
    readonly context: TransferContext
    readonly note: TransferNote
    readonly opening: Opening
    readonly senderKey: PublicKey
    readonly recipientKey: PublicKey
    readonly guardianKey: PublicKey
  },
  random: RandomSource = secure
): TransferBoxes => {
  const transferNote = encodeTransferNote(input.note)
  const [sender, recipient, guardian] = SealedBox.sealAll(
    [
      { publicKey: input.senderKey, plaintext: transferNote, binding: transferBinding(input.context, "transfer-sender") },
      {
        publicKey: input.recipientKey,
        plaintext: transferNote,
        binding: transferBinding(input.context, "transfer-recipient")
      },
      {
        publicKey: input.guardianKey,
        plaintext: encodeGuardianNote(input.opening),
        binding: transferBinding(input.context, "transfer-guardian")
      }
    ],
    random
  )
  if (sender === undefined || recipient === undefined || guardian === undefined) {
    throw new Error("invariant violated: sealAll returned fewer boxes than recipients")
  }
  return { sender, recipient, guardian }
}

/**
 * Opens the sender's or the recipient's box of a transfer.
 *
 * @since 0.1.0
 * @category destructors
 */
export const openTransferNote = (
  keyPair: KeyPair,
  box: Uint8Array,
  context: TransferContext,
  role: "sender" | "recipient"
): Result<TransferNote, NoteError> => {
  const opened = SealedBox.open(keyPair, box, transferBinding(context, role === "sender" ? "transfer-sender" : "transfer-recipient"))
  return opened.ok ? decodeTransferNote(opened.value) : opened
}

/**
 * Opens the guardian's box of a transfer, giving the opening to check with
 * `ElGamal.verifyOpening`.
 *
 * @since 0.1.0
 * @category destructors
 */
export const openGuardianNote = (
  guardianKeyPair: KeyPair,
  box: Uint8Array,
  context: TransferContext
): Result<Opening, NoteError> => {
  const opened = SealedBox.open(guardianKeyPair, box, transferBinding(context, "transfer-guardian"))
  return opened.ok ? decodeGuardianNote(opened.value) : opened
}

const statementBinding = (chainId: bigint, contract: Address, account: Address): SealedBox.Binding => ({
  purpose: "balance-statement",
  chainId,
  contract,
  subjectId: concatBytes(new Uint8Array(12), addressBytes(account))
})

/**
 * Seals the guardian's statement of an account's balance to the account's key.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sealBalanceStatement = (
  input: {
    readonly chainId: bigint
    readonly contract: Address
    readonly account: Address
    readonly accountKey: PublicKey
    readonly statement: BalanceStatement
  },
  random: RandomSource = secure
): Uint8Array =>
  SealedBox.seal(
    {
      publicKey: input.accountKey,
      plaintext: encodeBalanceStatement(input.statement),
      binding: statementBinding(input.chainId, input.contract, input.account)
    },
    random
  )

/**
 * Opens a balance statement sealed to this account.
 *
 * @since 0.1.0
 * @category destructors
 */
export const openBalanceStatement = (
  keyPair: KeyPair,
  box: Uint8Array,
  input: { readonly chainId: bigint; readonly contract: Address; readonly account: Address }
): Result<BalanceStatement, NoteError> => {
  const opened = SealedBox.open(keyPair, box, statementBinding(input.chainId, input.contract, input.account))
  return opened.ok ? decodeBalanceStatement(opened.value) : opened
}

const keyTotalBinding = (chainId: bigint, contract: Address, account: Address, apiKeyId: string): SealedBox.Binding => ({
  purpose: "key-total",
  chainId,
  contract,
  subjectId: keccak_256(concatBytes(addressBytes(account), utf8(apiKeyId)))
})

/**
 * Seals the guardian's per-key total (D40: the USDG, or any asset, transferred through one
 * API key) to the account's key, bound to chain, contract, account and key id, so a total
 * can pass neither as a balance nor as another key's.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sealKeyTotal = (
  input: {
    readonly chainId: bigint
    readonly contract: Address
    readonly account: Address
    readonly apiKeyId: string
    readonly accountKey: PublicKey
    readonly total: KeyTotal
  },
  random: RandomSource = secure
): Uint8Array => {
  if (input.total.amount < 0n || input.total.amount >= 1n << 128n) throw new RangeError("a key total is a u128")
  if (input.total.transfers < 0n || input.total.transfers >= 1n << 64n) throw new RangeError("a transfer count is a u64")
  return SealedBox.seal(
    {
      publicKey: input.accountKey,
      plaintext: concatBytes(Uint8Array.of(keyTotalTag), uintBE(input.total.amount, 16), uintBE(input.total.transfers, 8)),
      binding: keyTotalBinding(input.chainId, input.contract, input.account, input.apiKeyId)
    },
    random
  )
}

/**
 * Opens a per-key total sealed to this account.
 *
 * @since 0.1.0
 * @category destructors
 */
export const openKeyTotal = (
  keyPair: KeyPair,
  box: Uint8Array,
  input: { readonly chainId: bigint; readonly contract: Address; readonly account: Address; readonly apiKeyId: string }
): Result<KeyTotal, NoteError> => {
  const opened = SealedBox.open(keyPair, box, keyTotalBinding(input.chainId, input.contract, input.account, input.apiKeyId))
  if (!opened.ok) return opened
  const bytes = opened.value
  if (bytes.length !== 25 || bytes[0] !== keyTotalTag) return fail("note_malformed")
  const reader = new ByteReader(bytes.subarray(1))
  const amount = reader.uint(16)
  const transfers = reader.uint(8)
  return amount === undefined || transfers === undefined ? fail("note_malformed") : succeed({ amount, transfers })
}

/**
 * Seals, for a held agent transfer, the amount the guardian read in its own box to the key
 * the agent's amounts are encrypted to (its owner's). The owner decides on this amount: the
 * agent's note is the agent's word, which a client-sealed transfer could make differ.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sealHeldAmount = (
  input: { readonly context: TransferContext; readonly ownerKey: PublicKey; readonly amount: bigint },
  random: RandomSource = secure
): Uint8Array => {
  assertAmount(input.amount)
  return SealedBox.seal(
    {
      publicKey: input.ownerKey,
      plaintext: concatBytes(Uint8Array.of(heldAmountTag), uintBE(input.amount, 8)),
      binding: transferBinding(input.context, "held-amount")
    },
    random
  )
}

/**
 * Opens the guardian's statement of a held transfer's amount.
 *
 * @since 0.1.0
 * @category destructors
 */
export const openHeldAmount = (keyPair: KeyPair, box: Uint8Array, context: TransferContext): Result<bigint, NoteError> => {
  const opened = SealedBox.open(keyPair, box, transferBinding(context, "held-amount"))
  if (!opened.ok) return opened
  const amount = opened.value.length === 9 && opened.value[0] === heldAmountTag
    ? new ByteReader(opened.value.subarray(1)).uint(8)
    : undefined
  return amount === undefined ? fail("note_malformed") : succeed(amount)
}

/**
 * keccak256 over the three boxes, each preceded by its length as a 4-byte big-endian
 * integer, in the order sender, recipient, guardian. The attestation signs it; the
 * contract sees only this bytes32.
 *
 * @since 0.1.0
 * @category digests
 */
export const sealedDigest = (boxes: TransferBoxes): Hex =>
  `0x${bytesToHex(
    keccak_256(new LengthPrefixedWriter().append(boxes.sender).append(boxes.recipient).append(boxes.guardian).toBytes())
  )}`
