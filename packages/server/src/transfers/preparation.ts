/**
 * Prepared transfers (ext, docs/api.md "Client-sealed transfers"): the token that lets a
 * client seal a transfer's boxes itself and the server recognise, at create, the
 * preparation it made, with no row to store and on any api node.
 *
 * A client must know the transfer's binding id and the three keys before it can seal
 * anything, so `POST /v1/transfers/prepare` mints the transfer id and answers it with the
 * keys and a token: a MAC over everything the boxes were sealed for (the transfer id, the
 * sender, the mode, the asset, the recipient's address and both parties' keys) and an
 * expiry. At create the server recomputes the MAC from what it resolves then, so a
 * recipient, asset or key that changed in between, a token made for another account or
 * mode, or an edited transfer id, is refused before anything reaches the guardian.
 *
 * @since 0.1.0
 */
import { createHmac, timingSafeEqual } from "node:crypto"

/**
 * How long a preparation can be used: long enough for a client to seal three boxes and
 * retry a lost request, short enough that keys and recipients rarely change within it.
 *
 * @since 0.1.0
 * @category constants
 */
export const preparedTransferLifetimeMs = 10 * 60_000

/**
 * What a preparation is bound to.
 *
 * @since 0.1.0
 * @category models
 */
export interface PreparationFacts {
  readonly transferId: string
  readonly senderAccountId: string
  readonly mode: string
  readonly asset: string
  readonly recipientAddress: string
  readonly senderKey: string
  readonly recipientKey: string
  readonly expiresAtMs: number
}

const version = "v1"

const mac = (key: Uint8Array, facts: PreparationFacts): Buffer =>
  createHmac("sha256", key)
    .update(`pps/prepared-transfer/${version}\n`)
    .update(
      [
        facts.transferId,
        facts.senderAccountId,
        facts.mode,
        facts.asset,
        facts.recipientAddress.toLowerCase(),
        facts.senderKey.toLowerCase(),
        facts.recipientKey.toLowerCase(),
        String(facts.expiresAtMs)
      ].join("\n")
    )
    .digest()

/**
 * Derives the preparation key from the server's pepper, so that no new secret has to be
 * provisioned and every api node computes the same tokens.
 *
 * @since 0.1.0
 * @category constructors
 */
export const preparationKey = (pepper: Uint8Array): Uint8Array =>
  new Uint8Array(createHmac("sha256", pepper).update("pps/prepared-transfer-key/v1").digest())

/**
 * The token of a preparation: `v1.<expiry in unix ms>.<MAC, base64url>`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeToken = (key: Uint8Array, facts: PreparationFacts): string =>
  `${version}.${facts.expiresAtMs}.${mac(key, facts).toString("base64url")}`

/**
 * Why a token does not stand for the transfer being created.
 *
 * @since 0.1.0
 * @category models
 */
export type TokenProblem = "malformed" | "expired" | "mismatch"

/**
 * Checks a token against the facts resolved at create (`expiresAtMs` is read from the
 * token itself); undefined when it stands for them.
 *
 * @since 0.1.0
 * @category validation
 */
export const checkToken = (
  key: Uint8Array,
  token: string,
  facts: Omit<PreparationFacts, "expiresAtMs">,
  nowMs: number
): TokenProblem | undefined => {
  const match = /^v1\.(\d{13})\.([A-Za-z0-9_-]{43})$/.exec(token)
  if (match === null) return "malformed"
  const expiresAtMs = Number(match[1])
  const expected = mac(key, { ...facts, expiresAtMs })
  const given = Buffer.from(match[2]!, "base64url")
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return "mismatch"
  // Checked after the MAC, so an expiry a client edited reads as a mismatch, not as expired.
  return expiresAtMs <= nowMs ? "expired" : undefined
}
