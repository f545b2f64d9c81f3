/**
 * A transfer as the chain knows it: the 32 bytes its id stands for, and its attested call as
 * settlement submits it. Pure: the authorize step builds the call, the submit and recovery steps
 * rebuild it from the row.
 *
 * @since 0.1.0
 */
import type { Address, Hex } from "viem"
import type { Mode } from "@pps/api/ApiKeys"
import { gasLimits, type SubmissionRequest } from "../settlement/domain.ts"

// The same alphabet as platform/Ids.ts, which mints the ids this reads (not exported there).
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

/**
 * The 32 bytes a transfer id stands for on chain and in the sealed boxes: its
 * ULID's 128 bits, left-padded.
 *
 * @since 0.1.0
 * @category constructors
 */
export const transferIdBytes32 = (transferId: string): Hex => {
  let value = 0n
  for (const char of transferId.slice(transferId.indexOf("_") + 1)) value = value * 32n + BigInt(crockford.indexOf(char))
  return `0x${value.toString(16).padStart(64, "0")}`
}

/**
 * A transfer's attested call as settlement submits it: the same at its record and at a
 * resubmission.
 *
 * @since 0.1.0
 * @category constructors
 */
export const transferSubmission = (transfer: {
  readonly transferId: string
  readonly mode: Mode
  readonly confidential: boolean
  readonly contract: Address
  readonly callData: Hex
  readonly deadlineSeconds: bigint
  readonly sender: Address
  readonly nonce: bigint
}): SubmissionRequest => ({
  submissionId: transfer.transferId,
  mode: transfer.mode,
  kind: transfer.confidential ? "confidential_transfer" : "public_transfer",
  target: transfer.contract,
  data: transfer.callData,
  gasLimit: transfer.confidential ? gasLimits.confidential_transfer : gasLimits.public_transfer,
  deadlineSeconds: transfer.deadlineSeconds,
  replayKey: { sender: transfer.sender, nonce: transfer.nonce, transferId: transferIdBytes32(transfer.transferId) }
})
