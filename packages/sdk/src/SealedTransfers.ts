/**
 * Client-sealed transfers (docs/api.md "Client-sealed transfers"): the amount and memo
 * are encrypted in this process and never reach the API in clear.
 *
 * 1. `POST /v1/transfers/prepare` applies every amount-free rule and answers the transfer
 *    id the boxes are bound to, the chain, the contract, the three public keys and a token.
 * 2. The keys are checked before anything is sealed to them: the sender's key must be the
 *    one the caller expects (the holder's own public key; for an agent, its owner's), and,
 *    given a chain RPC URL, the guardian's and the recipient's keys must be the ones the
 *    confidential token contract holds. Without that check a
 *    compromised api tier could answer its own key and read the amount (docs/security.md).
 * 3. {amount, r} is sealed to the guardian and {amount, memo} to the sender and the
 *    recipient (`Note.sealTransfer`), bound to chain, contract and transfer id.
 * 4. `POST /v1/transfers` with `sealed`: answered as any create (D13/D14, or D26's 202).
 *
 * @example
 * ```ts
 * import { Client, KeyFile, SealedTransfers } from "@pps/sdk"
 *
 * const client = Client.make({ apiKey: process.env.PPS_API_KEY! })
 * const { keyPair } = KeyFile.read(KeyFile.defaultPath("acct_..."))
 * const transfer = await SealedTransfers.send(client, { to: "@bob", amount: "12.5", memo: "lunch" }, {
 *   senderKey: keyPair.publicKey,
 *   rpcUrl: "http://127.0.0.1:8545"
 * })
 * ```
 *
 * @since 0.1.0
 */
import { ElGamal, EncryptionKey, Note, Random } from "@pps/crypto"
import { type Address, createPublicClient, http } from "viem"
import * as Amount from "./Amount.ts"
import type { Client } from "./Client.ts"
import { request } from "./internal/http.ts"
import * as Wire from "./internal/wire.ts"

/**
 * @since 0.1.0
 * @category models
 */
export type SealedTransferFailure =
  | "amount_invalid"
  | "memo_too_long"
  | "sender_key_mismatch"
  | "guardian_key_mismatch"
  | "recipient_key_mismatch"

/**
 * The transfer was not sent: its amount or memo is invalid, or a key the API answered is
 * not the one it must be. The message never contains the amount or the memo.
 *
 * @since 0.1.0
 * @category errors
 */
export class SealedTransferError extends Error {
  override readonly name = "SealedTransferError"
  readonly reason: SealedTransferFailure
  constructor(reason: SealedTransferFailure, message: string) {
    super(message)
    this.reason = reason
  }
}

/**
 * What to pay: `amount` is a decimal string in the asset's units (D4), `asset` USDG unless
 * given.
 *
 * @since 0.1.0
 * @category models
 */
export interface SealedTransferRequest {
  readonly to: string
  readonly amount: string
  readonly memo?: string
  readonly asset?: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface SendOptions {
  /**
   * The public key the sender's copy is sealed to: the account's own key, or, for an
   * agent, its owner's (an agent's amounts are encrypted to its owner). The API's answer
   * must name this key, or nothing is sent.
   */
  readonly senderKey: EncryptionKey.PublicKey
  /** Sent with the create request; a retry with the same key is answered with the first outcome (D6, D36). */
  readonly idempotencyKey?: string
  /**
   * A secret only this client holds (the account's secret key; an agent: any secret it
   * keeps). With an idempotency key, the prepare step is replayed and the boxes are sealed
   * again byte for byte, so calling `send` again after a lost answer sends the very same
   * request and gets the first outcome. Without it, each call seals afresh, and a second
   * call with the same key is refused 409 `idempotency_key_reused` (nothing is paid twice).
   */
  readonly sealingSecret?: Uint8Array
  /**
   * An RPC URL of the transfer's chain: the guardian's and the recipient's keys are then
   * checked against the contract's registry before anything is sealed to them.
   */
  readonly rpcUrl?: string
}

const registryAbi = [
  {
    type: "function",
    name: "guardianEncryptionKey",
    stateMutability: "view",
    inputs: [],
    outputs: [{ type: "tuple", components: [{ name: "x", type: "uint256" }, { name: "y", type: "uint256" }] }]
  },
  {
    type: "function",
    name: "encryptionKeyOf",
    stateMutability: "view",
    inputs: [{ name: "account", type: "address" }],
    outputs: [{ type: "tuple", components: [{ name: "x", type: "uint256" }, { name: "y", type: "uint256" }] }]
  }
] as const

const pointHex = (point: { readonly x: bigint; readonly y: bigint }): string =>
  `0x${point.x.toString(16).padStart(64, "0")}${point.y.toString(16).padStart(64, "0")}`

const sameKey = (a: Uint8Array, b: string): boolean => Wire.hex(a).toLowerCase() === b.toLowerCase()

const parseAmount = (asset: string, text: string): bigint => {
  const decimals = Amount.decimalsOf(asset)
  const match = /^(\d{1,13})(?:\.(\d+))?$/.exec(text)
  const fraction = match?.[2] ?? ""
  if (match === null || fraction.length > decimals) {
    throw new SealedTransferError("amount_invalid", `the amount must be a decimal string with at most ${decimals} decimals`)
  }
  const units = BigInt(match[1]!) * 10n ** BigInt(decimals) + BigInt(fraction.padEnd(decimals, "0") || "0")
  // The sealed note carries the amount as a 64-bit integer of base units (docs/crypto.md).
  if (units === 0n || units >= 1n << 64n) {
    throw new SealedTransferError("amount_invalid", "the amount must be above 0 and below 2^64 base units")
  }
  return units
}

/**
 * Prepares, checks the keys, seals and creates a transfer; resolves with the API's answer
 * (the Transfer, or an agent's held transaction with status 202).
 *
 * @since 0.1.0
 * @category requests
 */
export const send = async (
  client: Client,
  transfer: SealedTransferRequest,
  options: SendOptions
): Promise<{ readonly status: number; readonly body: unknown }> => {
  const asset = transfer.asset ?? "USDG"
  const amount = parseAmount(asset, transfer.amount)
  const memo = transfer.memo ?? ""
  if (new TextEncoder().encode(memo).length > Note.memoBytesMax) {
    throw new SealedTransferError("memo_too_long", `the memo is at most ${Note.memoBytesMax} bytes of UTF-8`)
  }
  const path = "/v1/transfers/prepare"
  const replayable = options.idempotencyKey !== undefined && options.sealingSecret !== undefined
  const prepared = Wire.fieldsOf(
    (await request(client, "POST", path, {
      body: { to: transfer.to, asset },
      // The same preparation on a retry: the same transfer id, keys and token.
      ...(replayable ? { headers: { "idempotency-key": `${options.idempotencyKey}/prepare` } } : {})
    })).json,
    `POST ${path}`
  )
  const contract = Wire.address(prepared, "contract")
  const senderKey = Wire.string(prepared, "sender_key")
  const guardianKey = Wire.string(prepared, "guardian_key")
  const recipientKey = Wire.string(prepared, "recipient_key")
  if (!sameKey(options.senderKey, senderKey)) {
    throw new SealedTransferError(
      "sender_key_mismatch",
      "the API answered a sender key that is not the expected one: is it the key registered for this account (an agent's owner's, for an agent)?"
    )
  }
  if (options.rpcUrl !== undefined) {
    const chain = createPublicClient({ transport: http(options.rpcUrl) })
    const onChainGuardian = pointHex(await chain.readContract({ address: contract, abi: registryAbi, functionName: "guardianEncryptionKey" }))
    if (onChainGuardian !== guardianKey.toLowerCase()) {
      throw new SealedTransferError("guardian_key_mismatch", `the guardian key the API answered is not the one contract ${contract} holds`)
    }
    const recipientAddress = Wire.address(prepared, "recipient_address") as Address
    const onChainRecipient = pointHex(
      await chain.readContract({ address: contract, abi: registryAbi, functionName: "encryptionKeyOf", args: [recipientAddress] })
    )
    if (onChainRecipient !== recipientKey.toLowerCase()) {
      throw new SealedTransferError(
        "recipient_key_mismatch",
        `the recipient key the API answered is not the one contract ${contract} holds for ${recipientAddress}`
      )
    }
  }
  const publicKey = (name: string, hex: string): EncryptionKey.PublicKey => {
    const parsed = EncryptionKey.parsePublicKey(Wire.hexBytes(prepared, name, 64))
    if (!parsed.ok) throw new SealedTransferError(`${name === "guardian_key" ? "guardian" : "recipient"}_key_mismatch`, `${name} ${hex} is not a valid key`)
    return parsed.value
  }
  const transferId = Wire.string(prepared, "transfer_id")
  const random = replayable
    ? Random.deterministic(Random.sealingSeed(options.sealingSecret!, [
      "sealed-transfer",
      options.idempotencyKey!,
      transferId,
      transfer.to,
      asset,
      amount.toString(),
      memo
    ]))
    : Random.secure
  const boxes = Note.sealTransfer({
    context: {
      chainId: Wire.integer(prepared, "chain_id"),
      contract,
      transferId: Wire.hexBytes(prepared, "binding_id", 32)
    },
    note: { amount, memo },
    opening: ElGamal.newOpening(amount, random),
    senderKey: options.senderKey,
    recipientKey: publicKey("recipient_key", recipientKey),
    guardianKey: publicKey("guardian_key", guardianKey)
  }, random)
  const created = await request(client, "POST", "/v1/transfers", {
    body: {
      to: transfer.to,
      asset,
      sealed: {
        transfer_id: transferId,
        token: Wire.string(prepared, "token"),
        guardian: Wire.hex(boxes.guardian),
        sender: Wire.hex(boxes.sender),
        recipient: Wire.hex(boxes.recipient)
      }
    },
    ...(options.idempotencyKey === undefined ? {} : { headers: { "idempotency-key": options.idempotencyKey } })
  })
  return { status: created.status, body: created.json }
}
