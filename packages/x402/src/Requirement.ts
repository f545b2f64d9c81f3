/**
 * Reading what x402 hands the scheme (D57): a requirement's `extra` fields and a payment
 * payload's `payload`, which are open records on the wire. Anything that does not read is a
 * reason to refuse, never a guess.
 *
 * @since 0.1.0
 */
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types"
import type { Bound } from "./Binding.ts"

/**
 * The scheme's fields of a requirement's `extra`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Issued {
  readonly resource: string
  readonly nonce: string
  readonly expiresAt: string
  readonly tag: string
}

const stringField = (record: Record<string, unknown> | undefined, key: string): string | undefined => {
  const value = record?.[key]
  return typeof value === "string" && value.length > 0 ? value : undefined
}

/**
 * The issued fields of a requirement, or undefined when one is missing.
 *
 * @since 0.1.0
 * @category decoding
 */
export const issuedOf = (requirements: Pick<PaymentRequirements, "extra">): Issued | undefined => {
  const resource = stringField(requirements.extra, "resource")
  const nonce = stringField(requirements.extra, "nonce")
  const expiresAt = stringField(requirements.extra, "expiresAt")
  const tag = stringField(requirements.extra, "tag")
  return resource === undefined || nonce === undefined || expiresAt === undefined || tag === undefined
    ? undefined
    : { resource, nonce, expiresAt, tag }
}

/**
 * The binding a tag covers: the requirement's terms, and the issued resource, nonce and expiry.
 *
 * @since 0.1.0
 * @category constructors
 */
export const boundOf = (requirements: PaymentRequirements, issued: Omit<Issued, "tag">): Bound => ({
  scheme: requirements.scheme,
  network: requirements.network,
  asset: requirements.asset,
  amount: requirements.amount,
  payTo: requirements.payTo,
  resource: issued.resource,
  nonce: issued.nonce,
  expiresAt: issued.expiresAt
})

/** A transfer id as the API writes it (`tr_` + ULID, D3). */
const transferIdPattern = /^tr_[0-9A-HJKMNP-TV-Z]{26}$/

/**
 * The transfer a payment payload names, or undefined.
 *
 * @since 0.1.0
 * @category decoding
 */
export const transferIdOf = (payload: Pick<PaymentPayload, "payload">): string | undefined => {
  const value = payload.payload["transferId"]
  return typeof value === "string" && transferIdPattern.test(value) ? value : undefined
}

/**
 * An ISO 8601 expiry as milliseconds, or NaN when it does not read.
 *
 * @since 0.1.0
 * @category decoding
 */
export const expiryMsOf = (expiresAt: string): number => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/.test(expiresAt) ? Date.parse(expiresAt) : Number.NaN
