/**
 * Transfers: assets and their decimals, money parsing (D4), the recipient forms
 * (D15), the one Transfer representation (D13) and the list query (D16).
 * Pure: no HTTP, no SQL.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { ChainId, TokenContract } from "./Chain.ts"
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
export const AssetName = Schema.Literals(["USDG", "ETH"]).annotate({ identifier: "Asset", description: "The asset (D4: USDG has 6 decimals, ETH 18)." })

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
export const TransferStatus = Schema.Literals(["pending", "confirmed", "failed"]).annotate({
  identifier: "TransferStatus",
  description: "pending: recorded, not yet final on chain; confirmed: settled; failed: refused on chain, nothing moved (D14)."
})
export type TransferStatus = typeof TransferStatus.Type

/**
 * D13: the one Transfer representation (create, read, list). Never an amount or memo.
 *
 * @since 0.1.0
 * @category models
 */
export const TransferRecord = Schema.Struct({
  transfer_id: Schema.String.annotate({ description: "The transfer's id (`tr_` + ULID, D3)." }),
  status: TransferStatus,
  from: Schema.String.annotate({ description: "The sender's handle (`@alice`, an agent's `@alice/bot`)." }),
  to: Schema.String.annotate({ description: "The recipient: a handle, or the 0x address it was sent to." }),
  confidential: Schema.Boolean.annotate({ description: "Whether the amount is encrypted on chain (false: a standard, public transfer)." }),
  asset: AssetName,
  direction: Schema.Literals(["sent", "received"]).annotate({ description: "The transfer as the caller sees it." }),
  tx_hash: Schema.NullOr(Schema.String).annotate({ description: "The settling chain transaction, once submitted." }),
  created_at: Schema.String.annotate({ description: "When it was recorded (ISO 8601 UTC, D5)." }),
  confirmed_at: Schema.NullOr(Schema.String).annotate({ description: "When it was confirmed on chain." }),
  refund_of: Schema.NullOr(Schema.String).annotate({
    description: "(ext, D43) For a refund, the transfer it refunds; null for any other transfer."
  }),
  refunds: Schema.Array(Schema.String).annotate({
    description: "(ext, D43) The refunds of this transfer (their ids, oldest first, whatever their status); empty when none."
  })
}).annotate({
  identifier: "Transfer",
  description: "D13: a transfer as the sender or the recipient sees it. Never an amount or a memo: those are sealed to each party's key (GET /v1/transfers/{transfer_id}/sealed).",
  examples: [{
    transfer_id: "tr_01JAZ3Y8X6Q4M2N7P5R9S0T1V2",
    status: "confirmed",
    from: "@alice",
    to: "@bob",
    confidential: true,
    asset: "USDG",
    direction: "sent",
    tx_hash: "0x5c504ed432cb51138bcf09aa5e8a410dd4a1e204ef84bfed1be16dfba1b22060",
    created_at: "2026-11-25T01:30:00.000Z",
    confirmed_at: "2026-11-25T01:30:01.200Z",
    refund_of: null,
    refunds: []
  }]
})
export type TransferRecord = typeof TransferRecord.Type

/**
 * The body of `POST /v1/transfers` as it arrives (checked further by the rules above).
 *
 * @since 0.1.0
 * @category models
 */
export const CreateTransferRequest = Schema.Struct({
  to: Schema.String.annotate({ description: "A handle (`@bob`, `@alice/bot`) or a 0x address (D15)." }),
  /** The plain form (SPEC): the server sees the amount for the length of this request. */
  amount: Schema.optionalKey(Schema.String.annotate({
    description: "A decimal string of the asset (D4: > 0, at most its decimals, at most 1e12 units). The plain form: omit it with `sealed`.",
    examples: ["12.5"]
  })),
  asset: Schema.optionalKey(Schema.String.annotate({ description: "`USDG` (default) or `ETH`." })),
  confidential: Schema.optionalKey(Schema.Boolean.annotate({ description: "Default true; false sends a standard transfer whose amount is public on chain." })),
  memo: Schema.optionalKey(Schema.String.annotate({ description: "At most 512 bytes of UTF-8, sealed to both parties; never stored in clear." })),
  /** The sealed form (ext): the client sealed amount and memo itself; see `SealedTransferInput`. */
  sealed: Schema.optionalKey(Schema.suspend(() => SealedTransferInput)),
  /** (ext, D57) The latest end of a hold's approval window, when an agent's transfer is held. */
  approval_expires_at: Schema.optionalKey(Schema.String.annotate({
    description: "(ext, D57) ISO 8601. When an agent's transfer is held for its owner (D26), its approval window ends at this time if that is earlier than the server's window: an approval later than it is refused 409 `transaction_expired` and never pays. An x402 payment sets it to the requirement's expiry. No effect on a transfer that is not held.",
    examples: ["2026-11-29T12:00:00.000Z"]
  }))
}).annotate({
  identifier: "CreateTransferRequest",
  description: "Either `amount` (and `memo`): the server seals them at once and keeps neither; or `sealed`: boxes the client sealed to a prepared transfer, so no request carries the amount in clear (the client should check the keys the prepare step answers: docs/security.md).",
  examples: [{ to: "@bob", amount: "12.5", memo: "lunch" }]
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
  transfer_id: Schema.String.annotate({ description: "The prepared transfer's id." }),
  token: Schema.String.annotate({ description: "The prepared transfer's token, as received." }),
  guardian: Schema.String.annotate({ description: "Hex: {amount, r} sealed to the guardian's key." }),
  sender: Schema.String.annotate({ description: "Hex: {amount, memo} sealed to the sender's key." }),
  recipient: Schema.String.annotate({ description: "Hex: {amount, memo} sealed to the recipient's key." })
}).annotate({ identifier: "SealedTransferInput", description: "(ext) The boxes of a client-sealed transfer." })
export type SealedTransferInput = typeof SealedTransferInput.Type

/**
 * The body of `POST /v1/transfers/{transfer_id}/refund` (ext, D43): the money of a refund in
 * either of create's forms. The recipient (the original's sender), the asset (the original's)
 * and confidentiality (always) are the original transfer's, so the body names none of them.
 *
 * @since 0.10.0
 * @category models
 */
export const RefundTransferRequest = Schema.Struct({
  /** The plain form: the server sees the amount for the length of this request. */
  amount: Schema.optionalKey(Schema.String.annotate({
    description: "The plain form: how much to send back, a decimal string of the original's asset (D4). Required in the plain form: the service cannot read the original's amount to default it (D43); clients that seal (SDK, CLI, dashboard) default to the whole amount by opening their own copy.",
    examples: ["12.5"]
  })),
  memo: Schema.optionalKey(Schema.String.annotate({ description: "At most 512 bytes of UTF-8, sealed to both parties; never stored in clear." })),
  /** The sealed form: boxes sealed to a transfer prepared to the original's sender (`POST /v1/transfers/prepare`). */
  sealed: Schema.optionalKey(Schema.suspend(() => SealedTransferInput))
}).annotate({
  identifier: "RefundTransferRequest",
  description: "(ext, D43) Either `amount` (and `memo`), sealed by the server at once; or `sealed`: boxes the client sealed to a transfer it prepared to the original's sender, so no request carries the amount in clear.",
  examples: [{ amount: "12.5", memo: "order cancelled" }]
})
export type RefundTransferRequest = typeof RefundTransferRequest.Type

/**
 * The body of `POST /v1/transfers/prepare` (ext): the amount-free part of a transfer.
 *
 * @since 0.1.0
 * @category models
 */
export const PrepareTransferRequest = Schema.Struct({
  to: Schema.String.annotate({ description: "A handle or a 0x address, as for create." }),
  asset: Schema.optionalKey(Schema.String.annotate({ description: "`USDG` (default) or `ETH`." }))
}).annotate({ identifier: "PrepareTransferRequest", examples: [{ to: "@bob" }] })
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
  transfer_id: Schema.String.annotate({ description: "The id the transfer will have." }),
  binding_id: Schema.String.annotate({ description: "Its 32-byte on-chain form (0x hex), the boxes' associated data." }),
  chain_id: ChainId,
  contract: TokenContract,
  asset: AssetName,
  to: Schema.String.annotate({ description: "The recipient's handle (or address)." }),
  /** The recipient's wallet: a client checks `recipient_key` against the chain's key registry there. */
  recipient_address: Schema.String.annotate({ description: "The recipient's wallet, where a client checks `recipient_key` in the chain's key registry." }),
  sender_key: Schema.String.annotate({ description: "The sender's registered encryption key (an agent's: its owner's)." }),
  recipient_key: Schema.String.annotate({ description: "The recipient's registered encryption key." }),
  guardian_key: Schema.String.annotate({ description: "The guardian's encryption key." }),
  token: Schema.String.annotate({ description: "Proof that the server prepared this; send it back with the boxes." }),
  expires_at: Schema.String.annotate({ description: "Until when the preparation can be used." })
}).annotate({ identifier: "PreparedTransfer", description: "(ext) What a client needs to seal a transfer itself." })
export type PreparedTransfer = typeof PreparedTransfer.Type

/**
 * D16: the list envelope.
 *
 * @since 0.1.0
 * @category models
 */
export const TransferPage = Page(TransferRecord).annotate({ identifier: "TransferPage", description: "D16: a page of transfers, newest first." })

/**
 * D18: the boxes sealed to the caller's own key, for client-side decryption.
 *
 * @since 0.1.0
 * @category models
 */
export const SealedTransfer = Schema.Struct({
  transfer_id: Schema.String.annotate({ description: "The transfer." }),
  role: Schema.Literals(["sender", "recipient"]).annotate({ description: "Which party's copy this is." }),
  asset: AssetName,
  chain_id: ChainId,
  contract: TokenContract,
  /** The 32-byte transfer id the boxes are bound to. */
  binding_id: Schema.String.annotate({ description: "The 32-byte transfer id the box is bound to." }),
  sealed_note: Schema.String.annotate({ description: "Hex: {amount, memo} sealed to the caller's key (open it client-side)." }),
  /**
   * The on-chain ciphertext: C and this party's handle, to check the note against
   * with one scalar multiplication. A standard transfer's recipient has no handle
   * (null): its amount is public in the transaction.
   */
  commitment: Schema.String.annotate({ description: "The on-chain amount commitment C, to check the note against." }),
  handle: Schema.NullOr(Schema.String).annotate({ description: "This party's decryption handle; null for a standard transfer's recipient." }),
  /**
   * D62: a standard (`confidential: false`) transfer pays its amount in clear on chain; once it
   * is confirmed, that public amount as the transaction's `PublicTransfer` event shows it (read
   * back from the chain, never stored), to check the sealed copy against. Null for a
   * confidential transfer, and until a standard one is confirmed.
   */
  public_amount: Schema.NullOr(Schema.String).annotate({
    description: "(D62) A confirmed standard transfer's amount as its transaction shows it publicly (D4's decimal form); null for a confidential transfer or one not yet confirmed."
  })
}).annotate({ identifier: "SealedTransfer", description: "(ext, D18) The caller's own copy of a transfer's amount and memo, sealed to its key." })
