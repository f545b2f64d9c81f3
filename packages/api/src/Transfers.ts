/**
 * Transfers: assets and their decimals, money parsing (D4), the recipient forms
 * (D15), the one Transfer representation (D13) and the list query (D16).
 * Pure: no HTTP, no SQL.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { canonicalAccountHandle } from "./Accounts.ts"
import { Page } from "./Page.ts"

/**
 * The supported assets and their decimals (D4).
 *
 * @since 0.1.0
 * @category constants
 */
export const assets = { USDG: 6, ETH: 18 } as const
export type Asset = keyof typeof assets

/**
 * @since 0.1.0
 * @category models
 */
export const AssetName = Schema.Literals(["USDG", "ETH"])

/**
 * D4: at most 1,000,000,000,000 whole units.
 *
 * @since 0.1.0
 * @category constants
 */
export const wholeUnitsMax = 1_000_000_000_000n

/**
 * Amounts are encrypted as unsigned 64-bit integers of base units.
 *
 * @since 0.1.0
 * @category constants
 */
export const encryptedAmountLimit = 1n << 64n

/**
 * D15: a memo is at most 512 bytes of UTF-8.
 *
 * @since 0.1.0
 * @category constants
 */
export const memoBytesMax = 512

/**
 * Parses a decimal string into base units of the asset, exactly (D4): digits,
 * optionally a point and at most the asset's decimals, at most 1e12 whole
 * units; zero only when `allowZero` (a policy limit may be 0, an amount not).
 * Undefined for anything else, including signs and exponents. Never uses
 * floating point.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseUnits = (text: string, asset: Asset, options: { readonly allowZero: boolean }): bigint | undefined => {
  const match = /^(\d{1,13})(?:\.(\d+))?$/.exec(text)
  if (match === null) return undefined
  const decimals = assets[asset]
  const fraction = match[2] ?? ""
  if (fraction.length > decimals) return undefined
  const whole = BigInt(match[1]!)
  const units = whole * 10n ** BigInt(decimals) + BigInt(fraction.padEnd(decimals, "0") || "0")
  if (units < 0n || (units === 0n && !options.allowZero)) return undefined
  if (units > wholeUnitsMax * 10n ** BigInt(decimals)) return undefined
  // Confidential amounts are encrypted as u64 (docs/crypto.md): for ETH's 18 decimals that caps
  // one amount at 18.446744073709551615 ETH, below D4's 1e12 units.
  if (units >= encryptedAmountLimit) return undefined
  return units
}

/**
 * Parses a decimal amount (D4) into base units: > 0, at most the asset's
 * decimals, at most 1e12 whole units. Undefined for anything else.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseAmount = (text: string, asset: Asset): bigint | undefined =>
  parseUnits(text, asset, { allowZero: false })

/**
 * Base units as the shortest exact decimal string (D4): "12.5", "0", "1000".
 *
 * @since 0.1.0
 * @category formatting
 */
export const formatAmount = (units: bigint, asset: Asset): string => {
  const decimals = BigInt(assets[asset])
  const scale = 10n ** decimals
  const whole = units / scale
  const fraction = (units % scale).toString().padStart(Number(decimals), "0").replace(/0+$/, "")
  return fraction === "" ? whole.toString() : `${whole}.${fraction}`
}

/**
 * What `to` names (D15): one of our handles (an agent's `@owner/name` too), or a
 * 0x address (40 hex digits, any case).
 *
 * @since 0.1.0
 * @category models
 */
export type RecipientRef =
  | { readonly _tag: "Handle"; readonly handle: string }
  | { readonly _tag: "Address"; readonly address: `0x${string}` }

/**
 * @since 0.1.0
 * @category parsing
 */
export const parseRecipient = (text: string): RecipientRef | undefined => {
  if (/^0x[0-9a-fA-F]{40}$/.test(text)) return { _tag: "Address", address: text as `0x${string}` }
  const handle = canonicalAccountHandle(text)
  return handle === undefined ? undefined : { _tag: "Handle", handle }
}

/**
 * @since 0.1.0
 * @category models
 */
export const TransferStatus = Schema.Literals(["pending", "confirmed", "failed"])
export type TransferStatus = typeof TransferStatus.Type

/**
 * D13: the one Transfer representation (create, read, list). Never an amount or memo.
 *
 * @since 0.1.0
 * @category models
 */
export const TransferRecord = Schema.Struct({
  transfer_id: Schema.String,
  status: TransferStatus,
  from: Schema.String,
  to: Schema.String,
  confidential: Schema.Boolean,
  asset: AssetName,
  direction: Schema.Literals(["sent", "received"]),
  tx_hash: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  confirmed_at: Schema.NullOr(Schema.String)
})
export type TransferRecord = typeof TransferRecord.Type

/**
 * The body of `POST /v1/transfers` as it arrives (checked further by the rules above).
 *
 * @since 0.1.0
 * @category models
 */
export const CreateTransferRequest = Schema.Struct({
  to: Schema.String,
  /** The plain form (SPEC): the server sees the amount for the length of this request. */
  amount: Schema.optionalKey(Schema.String),
  asset: Schema.optionalKey(Schema.String),
  confidential: Schema.optionalKey(Schema.Boolean),
  memo: Schema.optionalKey(Schema.String),
  /** The sealed form (ext): the client sealed amount and memo itself; see `SealedTransferInput`. */
  sealed: Schema.optionalKey(Schema.suspend(() => SealedTransferInput))
})
export type CreateTransferRequest = typeof CreateTransferRequest.Type

/**
 * The sealed form of `POST /v1/transfers` (ext, docs/api.md "Client-sealed transfers"):
 * what the client built from a prepared transfer, in place of `amount` and `memo`. The
 * boxes are hex, bound to the prepared transfer's chain, contract and binding id:
 * `guardian` holds {amount, r} for the guardian, `sender` and `recipient` hold
 * {amount, memo} for each party's key (`Note.sealTransfer` in @pps/crypto).
 *
 * @since 0.1.0
 * @category models
 */
export const SealedTransferInput = Schema.Struct({
  transfer_id: Schema.String,
  token: Schema.String,
  guardian: Schema.String,
  sender: Schema.String,
  recipient: Schema.String
})
export type SealedTransferInput = typeof SealedTransferInput.Type

/**
 * The body of `POST /v1/transfers/prepare` (ext): the amount-free part of a transfer.
 *
 * @since 0.1.0
 * @category models
 */
export const PrepareTransferRequest = Schema.Struct({
  to: Schema.String,
  asset: Schema.optionalKey(Schema.String)
})
export type PrepareTransferRequest = typeof PrepareTransferRequest.Type

/**
 * What a client needs to seal a transfer itself: the transfer id the boxes are bound to
 * (and its 32-byte on-chain form), the chain and contract, the three public keys, and a
 * token that lets the server recognise its own preparation until `expires_at`.
 *
 * @since 0.1.0
 * @category models
 */
export const PreparedTransfer = Schema.Struct({
  transfer_id: Schema.String,
  binding_id: Schema.String,
  chain_id: Schema.Number,
  contract: Schema.String,
  asset: AssetName,
  to: Schema.String,
  /** The recipient's wallet: a client checks `recipient_key` against the chain's key registry there. */
  recipient_address: Schema.String,
  sender_key: Schema.String,
  recipient_key: Schema.String,
  guardian_key: Schema.String,
  token: Schema.String,
  expires_at: Schema.String
})
export type PreparedTransfer = typeof PreparedTransfer.Type

/**
 * D16: the list envelope.
 *
 * @since 0.1.0
 * @category models
 */
export const TransferPage = Page(TransferRecord)

/**
 * D18: the boxes sealed to the caller's own key, for client-side decryption.
 *
 * @since 0.1.0
 * @category models
 */
export const SealedTransfer = Schema.Struct({
  transfer_id: Schema.String,
  role: Schema.Literals(["sender", "recipient"]),
  asset: AssetName,
  chain_id: Schema.Number,
  contract: Schema.String,
  /** The 32-byte transfer id the boxes are bound to. */
  binding_id: Schema.String,
  sealed_note: Schema.String,
  /**
   * The on-chain ciphertext: C and this party's handle, to check the note against
   * with one scalar multiplication. A standard transfer's recipient has no handle
   * (null): its amount is public in the transaction.
   */
  commitment: Schema.String,
  handle: Schema.NullOr(Schema.String)
})
