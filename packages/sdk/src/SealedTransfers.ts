/**
 * Client-sealed transfers (docs/api.md "Client-sealed transfers"): the amount and memo
 * are encrypted in this process and never reach the API in clear.
 *
 * 1. `POST /v1/transfers/prepare` applies every amount-free rule and answers the transfer
 *    id the boxes are bound to, the chain, the contract, the recipient's address, the three
 *    public keys and a token.
 * 2. The answer is checked before anything is sealed to it. Always: the sender's key must
 *    be the one the caller expects (the holder's own public key; for an agent, its
 *    owner's), and a `to` that is a 0x address (or a pinned `recipientAddress`) must be the
 *    recipient address answered. With a pinned `deployment`: the chain id and the asset's
 *    contract must be the pinned ones. With an `rpcUrl` (which needs the pin): the chain id
 *    must be the RPC's, and the guardian's and the recipient's keys must be the ones the
 *    **pinned** contract holds. The api tier answers all of these, so whatever is not
 *    checked is trusted to it: an api tier that answered its own contract, chain, key or
 *    recipient address would be sent boxes it can open (docs/security.md). `trust: "chain"`
 *    refuses to send unless every check can be made; the default, `trust: "api"`, sends
 *    with the checks the options allow.
 *    A handle's address is resolved by the api tier: pin it (`recipientAddress`, or send
 *    to the 0x address) to take that trust away too.
 * 3. {amount, r} is sealed to the guardian and {amount, memo} to the sender and the
 *    recipient (`Note.sealTransfer`), bound to chain, contract and transfer id.
 * 4. `POST /v1/transfers` with `sealed`: answered as any create (D13/D14, or D26's 202).
 *
 * Internal: not exported from `@pps/sdk`; Promise users reach it through `Pps` (`transfers.create`).
 *
 * @example
 * ```ts
 * import { KeyFile, Pps } from "@pps/sdk"
 *
 * const pps = new Pps({
 *   apiKey: process.env.PPS_API_KEY!,
 *   keyPair: KeyFile.read(KeyFile.defaultPath("acct_...")).keyPair,
 *   // The operator's published deployment, known to this client, not learnt from the API.
 *   deployment: { chainId: 46630, contracts: { USDG: "0x..." } },
 *   rpcUrl: "http://127.0.0.1:8545",
 *   trust: "chain"
 * })
 * const created = await pps.transfers.create({ to: "@bob", amount: "12.5", memo: "lunch" })
 * ```
 *
 * @since 0.1.0
 * @internal
 */
import type { AgentTransactionRecord } from "@pps/api/Agents"
import type { PreparedTransfer, TransferRecord } from "@pps/api/Transfers"
import { ElGamal, EncryptionKey, Note, Random } from "@pps/crypto"
import { type Address, createPublicClient, getAddress, http, isAddress, sha256, stringToBytes } from "viem"
import * as Amount from "./Amount.ts"
import type { Client } from "./Client.ts"
import { SealedTransferError } from "./Errors.ts"
import { run } from "./internal/typedClient.ts"
import * as Wire from "./internal/wire.ts"

/**
 * Why a transfer was not sent (declared in `Errors`, where both surfaces' errors live).
 *
 * @since 0.1.0
 * @category errors
 */
export { SealedTransferError, type SealedTransferFailure } from "./Errors.ts"

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
   * An RPC URL of the transfer's chain: its chain id must be the one answered, and the
   * guardian's and the recipient's keys are read from the pinned contract's registry and
   * must be the ones answered. Needs `deployment` with the asset's contract (a contract
   * named by the API would be checked against itself).
   */
  readonly rpcUrl?: string
  /**
   * The deployment this client trusts, from the operator and not from the API: the
   * answered chain id and the asset's contract must be these.
   */
  readonly deployment?: Deployment
  /**
   * The address `to` must resolve to, for a handle (a 0x `to` is pinned by itself).
   * Without it, the api tier resolves the handle and is trusted to.
   */
  readonly recipientAddress?: string
  /**
   * `"api"` (default): send with the checks the options allow, trusting the api tier for
   * the rest. `"chain"`: refuse (`deployment_unpinned`, before any request) unless
   * `rpcUrl` and the asset's pinned contract are given, so every key is checked.
   */
  readonly trust?: Trust
}

/**
 * A deployment pinned by the caller: the chain id and each asset's confidential token
 * contract (docs/operations.md lists where an operator publishes them).
 *
 * @since 0.4.0
 * @category models
 */
export interface Deployment {
  readonly chainId: number | bigint
  readonly contracts: { readonly USDG?: string; readonly ETH?: string }
}

/**
 * Who vouches for the keys a transfer is sealed to (`SendOptions.trust`).
 *
 * @since 0.4.0
 * @category models
 */
export type Trust = "api" | "chain"

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

const prepareSuffix = "/prepare"

/**
 * The prepare step's Idempotency-Key, derived from the caller's. D6 caps a key at 255
 * characters, so a caller's key too long for the suffix is hashed instead (a shorter key
 * keeps the suffixed form, so replays of keys used before stay the same request).
 */
const prepareKeyOf = (key: string): string =>
  key.length + prepareSuffix.length <= 255 ? `${key}${prepareSuffix}` : `prepare-sha256-${sha256(stringToBytes(key)).slice(2)}`

const unpinned = (message: string) => new SealedTransferError("deployment_unpinned", message)

/** An address the caller gave, checksummed; a malformed one is the caller's mistake, refused before any request. */
const callerAddress = (name: string, value: string): Address => {
  if (!isAddress(value, { strict: false })) throw unpinned(`${name} is not a 20-byte 0x address`)
  return getAddress(value)
}

/**
 * What the caller pinned and what can be checked, worked out before any request: a check
 * that was asked for but cannot be made is refused here, never skipped.
 */
const pinsOf = (transfer: SealedTransferRequest, asset: string, options: SendOptions) => {
  const deployment = options.deployment
  const pinnedContract = deployment?.contracts[asset as keyof Deployment["contracts"]]
  const contract = pinnedContract === undefined ? undefined : callerAddress(`deployment.contracts.${asset}`, pinnedContract)
  if (options.rpcUrl !== undefined && contract === undefined) {
    throw unpinned(`rpcUrl checks the keys against the pinned ${asset} contract: give deployment.contracts.${asset} (not the contract the API names)`)
  }
  if (options.trust === "chain" && (options.rpcUrl === undefined || contract === undefined)) {
    throw unpinned(`trust "chain" needs rpcUrl and deployment.contracts.${asset}: without them the keys cannot be checked`)
  }
  const toAddress = isAddress(transfer.to, { strict: false }) ? getAddress(transfer.to) : undefined
  const pinnedRecipient = options.recipientAddress === undefined ? undefined : callerAddress("recipientAddress", options.recipientAddress)
  if (toAddress !== undefined && pinnedRecipient !== undefined && toAddress !== pinnedRecipient) {
    throw new SealedTransferError("recipient_address_mismatch", `to is ${toAddress} but recipientAddress is ${pinnedRecipient}`)
  }
  const chainId = deployment?.chainId
  if (chainId !== undefined && !(typeof chainId === "bigint" ? chainId > 0n : Number.isSafeInteger(chainId) && chainId > 0)) {
    throw unpinned("deployment.chainId is not a positive integer")
  }
  return {
    chainId: chainId === undefined ? undefined : BigInt(chainId),
    contract,
    recipient: toAddress ?? pinnedRecipient
  }
}

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
 * The create's answer: 201 with the Transfer (D13), or 202 with an agent's transfer held
 * for its owner (D26), as the contract decodes them.
 *
 * @since 0.4.0
 * @category models
 */
export interface SentTransfer {
  readonly status: number
  readonly body: TransferRecord | AgentTransactionRecord
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
): Promise<SentTransfer> => {
  const asset = transfer.asset ?? "USDG"
  const amount = parseAmount(asset, transfer.amount)
  const memo = transfer.memo ?? ""
  if (new TextEncoder().encode(memo).length > Note.memoBytesMax) {
    throw new SealedTransferError("memo_too_long", `the memo is at most ${Note.memoBytesMax} bytes of UTF-8`)
  }
  const pins = pinsOf(transfer, asset, options)
  const replayable = options.idempotencyKey !== undefined && options.sealingSecret !== undefined
  const prepared = await run(
    client,
    (api) => api.transfers.prepare({ payload: { to: transfer.to, asset } }),
    // The same preparation on a retry: the same transfer id, keys and token.
    replayable ? prepareKeyOf(options.idempotencyKey!) : undefined
  )
  const checked = checkPrepared(prepared, transfer.to, asset, pins, options)
  if (options.rpcUrl !== undefined && pins.contract !== undefined) {
    await checkAgainstChain(options.rpcUrl, pins.contract, checked)
  }
  const random = replayable
    ? Random.deterministic(Random.sealingSeed(options.sealingSecret!, [
      "sealed-transfer",
      options.idempotencyKey!,
      prepared.transfer_id,
      transfer.to,
      asset,
      amount.toString(),
      memo
    ]))
    : Random.secure
  const boxes = sealBoxes(prepared, checked, { amount, memo }, options.senderKey, random)
  const [body, response] = await run(
    client,
    (api) =>
      api.transfers.create({
        payload: {
          to: transfer.to,
          asset,
          sealed: {
            transfer_id: prepared.transfer_id,
            token: prepared.token,
            guardian: Wire.hex(boxes.guardian),
            sender: Wire.hex(boxes.sender),
            recipient: Wire.hex(boxes.recipient)
          }
        },
        responseMode: "decoded-and-response"
      }),
    options.idempotencyKey
  )
  return { status: response.status, body }
}

/** What the prepare step answered, decoded and checked against what the caller pinned. */
interface CheckedPreparation {
  readonly chainId: bigint
  readonly contract: Address
  readonly recipientAddress: Address
  readonly recipientKey: string
  readonly guardianKey: string
}

const preparedWhat = "POST /v1/transfers/prepare"

/**
 * Checks the prepare step's answer against the caller's own key and pins: the boxes are bound to
 * chain and contract, and the keys are read from the contract, so both must be the caller's, not
 * whatever the API names.
 */
const checkPrepared = (
  prepared: PreparedTransfer,
  to: string,
  asset: string,
  pins: ReturnType<typeof pinsOf>,
  options: SendOptions
): CheckedPreparation => {
  const chainId = BigInt(prepared.chain_id)
  const contract = Wire.address(preparedWhat, "contract", prepared.contract)
  const recipientAddress = Wire.address(preparedWhat, "recipient_address", prepared.recipient_address)
  if (!sameKey(options.senderKey, prepared.sender_key)) {
    throw new SealedTransferError(
      "sender_key_mismatch",
      "the API answered a sender key that is not the expected one: is it the key registered for this account (an agent's owner's, for an agent)?"
    )
  }
  if (pins.chainId !== undefined && chainId !== pins.chainId) {
    throw new SealedTransferError("chain_mismatch", `the API answered chain id ${chainId}; the pinned deployment is on chain ${pins.chainId}`)
  }
  if (pins.contract !== undefined && contract !== pins.contract) {
    throw new SealedTransferError("contract_mismatch", `the API answered ${asset} contract ${contract}; the pinned one is ${pins.contract}`)
  }
  if (pins.recipient !== undefined && recipientAddress !== pins.recipient) {
    throw new SealedTransferError(
      "recipient_address_mismatch",
      `the API answered recipient address ${recipientAddress} for ${to}; the expected one is ${pins.recipient}`
    )
  }
  return { chainId, contract, recipientAddress, recipientKey: prepared.recipient_key, guardianKey: prepared.guardian_key }
}

/** Checks the chain id, the guardian's key and the recipient's key against the pinned contract, through the caller's RPC. */
const checkAgainstChain = async (rpcUrl: string, pinnedContract: Address, checked: CheckedPreparation): Promise<void> => {
  const chain = createPublicClient({ transport: http(rpcUrl) })
  // The RPC URL is not named in messages: a provider's URL often carries its API key.
  const rpcChainId = BigInt(await chain.getChainId())
  if (rpcChainId !== checked.chainId) {
    throw new SealedTransferError("chain_mismatch", `the API answered chain id ${checked.chainId}; the RPC's chain is ${rpcChainId}`)
  }
  const onChainGuardian = pointHex(await chain.readContract({ address: pinnedContract, abi: registryAbi, functionName: "guardianEncryptionKey" }))
  if (onChainGuardian !== checked.guardianKey.toLowerCase()) {
    throw new SealedTransferError("guardian_key_mismatch", `the guardian key the API answered is not the one contract ${pinnedContract} holds`)
  }
  const onChainRecipient = pointHex(
    await chain.readContract({ address: pinnedContract, abi: registryAbi, functionName: "encryptionKeyOf", args: [checked.recipientAddress] })
  )
  if (onChainRecipient !== checked.recipientKey.toLowerCase()) {
    throw new SealedTransferError(
      "recipient_key_mismatch",
      `the recipient key the API answered is not the one contract ${pinnedContract} holds for ${checked.recipientAddress}`
    )
  }
}

/** The three boxes of the transfer, bound to its chain, contract and id. */
const sealBoxes = (
  prepared: PreparedTransfer,
  checked: CheckedPreparation,
  note: { readonly amount: bigint; readonly memo: string },
  senderKey: EncryptionKey.PublicKey,
  random: Random.RandomSource
) => {
  const publicKey = (name: "recipient_key" | "guardian_key", hex: string): EncryptionKey.PublicKey => {
    const parsed = EncryptionKey.parsePublicKey(Wire.hexBytes(preparedWhat, name, hex, 64))
    if (!parsed.ok) throw new SealedTransferError(`${name === "guardian_key" ? "guardian" : "recipient"}_key_mismatch`, `${name} ${hex} is not a valid key`)
    return parsed.value
  }
  return Note.sealTransfer({
    context: {
      chainId: checked.chainId,
      contract: checked.contract,
      transferId: Wire.hexBytes(preparedWhat, "binding_id", prepared.binding_id, 32)
    },
    note,
    opening: ElGamal.newOpening(note.amount, random),
    senderKey,
    recipientKey: publicKey("recipient_key", checked.recipientKey),
    guardianKey: publicKey("guardian_key", checked.guardianKey)
  }, random)
}
