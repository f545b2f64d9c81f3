/**
 * What the guardian records a request under: keyed digests (HMAC-SHA256 under the at-rest key),
 * to tell a retry from a different request under a reused id. Keyed, because a public amount
 * inside a plain hash could be found by trying candidates in a storage dump.
 *
 * @since 0.5.0
 */
import { hmac } from "@noble/hashes/hmac.js"
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js"
import type { AuthorizeRequest } from "../Domain.ts"
import type { AccountRef } from "../internal/store.ts"

const keyedDigest = (key: Uint8Array, parts: ReadonlyArray<string>): string =>
  bytesToHex(hmac(sha256, key, utf8ToBytes(parts.join("|"))))

/**
 * What defines the transfer. The policy and the approval flag are left out: a retry must replay
 * the first decision even if the policy changed in between. A refund's original (D43) is in it,
 * appended only when present, so the digests of every other request stay what they were.
 *
 * @since 0.5.0
 * @category digests
 */
export const requestDigest = (key: Uint8Array, request: AuthorizeRequest): string =>
  keyedDigest(
    key,
    [
      "authorize/v1",
      request.transferId,
      request.chainId,
      request.contract,
      request.kind,
      request.from,
      request.to,
      request.fromKey,
      request.toKey ?? "",
      request.amount ?? "",
      request.nonce,
      request.deadline,
      request.guardianNote,
      request.sealedDigest ?? "",
      request.apiKey ?? "",
      ...(request.refundOf === undefined ? [] : ["refund_of", request.refundOf])
    ].map((part) => String(part).toLowerCase())
  )

/**
 * What a decision is recorded under: the request (its digest) and the agent context it was
 * decided in, which `requestDigest` leaves out (an approval replays its reservation whatever
 * the policy is by then). Keyed like it, so the store shows no policy either.
 *
 * @since 0.5.0
 * @category digests
 */
export const decisionDigest = (key: Uint8Array, request: AuthorizeRequest, digest: string): string =>
  keyedDigest(
    key,
    [
      "decision/v1",
      digest,
      request.agent === undefined ? "account" : "agent",
      request.agent?.policy.perTransactionLimit ?? "",
      request.agent?.policy.dailyLimit ?? "",
      request.agent?.policy.hitlThreshold ?? "",
      request.agent?.policy.timeZone ?? "",
      request.agent?.approved ?? ""
    ].map((part) => String(part))
  )

/**
 * What defines a reported credit: its account and amount.
 *
 * @since 0.5.0
 * @category digests
 */
export const creditDigest = (key: Uint8Array, account: AccountRef, amount: bigint): string =>
  keyedDigest(key, ["credit/v1", account.chainId, account.contract, account.account, String(amount)])
