/**
 * Client-sealed transfers (docs/api.md "Client-sealed transfers"): the amount and memo
 * are encrypted in this process and never reach the API in clear.
 *
 * 1. `POST /v1/transfers/prepare` applies every amount-free rule and answers the transfer
 *    id the boxes are bound to, the chain, the contract, the recipient's address, the three
 *    public keys and a token.
 * 2. The answer is checked before anything is sealed to it. Always: with a `senderKey`
 *    (the holder's own public key) the sender key answered must be it, and a `to` that is a
 *    0x address (or a pinned `recipientAddress`) must be the recipient address answered.
 *    With a pinned `deployment`: the chain id and the asset's contract must be the pinned
 *    ones. With an `rpcUrl` (which needs the pin): the chain id must be the RPC's, and the
 *    guardian's and the recipient's keys must be the ones the **pinned** contract holds,
 *    and with an `ownerWallet` the sender key must be the one it holds for that wallet.
 *    The api tier answers all of these, so whatever is not checked is trusted to it: an api
 *    tier that answered its own contract, chain, key or recipient address would be sent
 *    boxes it can open (docs/security.md). `trust: "chain"` refuses to send unless every
 *    check can be made; the default, `trust: "api"`, sends with the checks the options allow.
 *    A handle's address is resolved by the api tier: pin it (`recipientAddress`, or send
 *    to the 0x address) to take that trust away too.
 * 3. {amount, r} is sealed to the guardian and {amount, memo} to the sender and the
 *    recipient (`Note.sealTransfer`), bound to chain, contract and transfer id.
 * 4. `POST /v1/transfers` with `sealed`: answered as any create (D13/D14, or D26's 202).
 *
 * **An agent needs no key of its own** (D21): its side of a transfer is sealed to its
 * owner's key, which the prepare step answers as `sender_key`. Without a `senderKey`, the
 * agent's copy is sealed to that answered key; the account must then be an agent (asked of
 * `GET /v1/accounts/me`: an account's copy is sealed to its own key, which its holder
 * gives). The answered key is checked against the chain only with `ownerWallet` (the
 * owner's wallet address, pinned by the caller) and `rpcUrl`.
 *
 * The steps are one Effect over the contract's typed client (`sealed`), which both surfaces
 * run: `ApiClient.sealedTransfer` for Effect programs, `send` (and `Pps.transfers.create`)
 * as a Promise. Internal: not exported from `@pps/sdk`.
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
import { Effect } from "effect"
import { type Address, createPublicClient, getAddress, http, isAddress, sha256, stringToBytes } from "viem"
import * as Amount from "./Amount.ts"
import type * as ApiClient from "./ApiClient.ts"
import type { Client } from "./Client.ts"
import { openSealedCopy } from "./Confidential.ts"
import { ConfidentialError, SealedTransferError, type SealedTransferFailure, TransportError } from "./Errors.ts"
import { IdempotencyKey } from "./internal/idempotency.ts"
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
  /** (D57) ISO 8601: if an agent's transfer is held, its approval window ends no later than this (an x402 requirement's expiry). */
  readonly approvalExpiresAt?: string
}

/**
 * What a sealed transfer is checked against and sealed with. The Idempotency-Key is the
 * caller's (`ApiClient.withIdempotencyKey`; `SendOptions.idempotencyKey` for `send`).
 *
 * @since 0.5.0
 * @category models
 */
export interface SealOptions {
  /**
   * The public key the sender's copy is sealed to: the account's own key (its key pair's).
   * The API's answer must name this key, or nothing is sent. Absent: the copy is sealed to
   * the key the API answers, which only an agent's key may do (an agent's amounts are
   * sealed to its owner's key, D21; the account is asked first, and another one is refused
   * `sender_key_missing` before the prepare step).
   */
  readonly senderKey?: EncryptionKey.PublicKey
  /**
   * The wallet address whose registered key the sender's copy is sealed to: for an agent,
   * its owner's (`owner_address` in the answer that issued the agent's key), pinned by the caller, not learnt from the
   * API. The sender key answered must be the one the pinned contract holds for it, read
   * through `rpcUrl` (which it needs). Under `trust: "chain"` an agent's send needs it.
   */
  readonly ownerWallet?: string
  /**
   * A secret only this client holds (the account's secret key; an agent: any secret it
   * keeps). With an idempotency key, the prepare step is replayed and the boxes are sealed
   * again byte for byte, so sending again after a lost answer sends the very same request
   * and gets the first outcome. Without it, each call seals afresh, and a second call with
   * the same key is refused 409 `idempotency_key_reused` (nothing is paid twice).
   */
  readonly sealingSecret?: Uint8Array
  /**
   * An RPC URL of the transfer's chain: its chain id must be the one answered, and the
   * guardian's and the recipient's keys (and with `ownerWallet` the sender's) are read from
   * the pinned contract's registry and must be the ones answered. Needs `deployment` with
   * the asset's contract (a contract named by the API would be checked against itself).
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
   * `rpcUrl` and the asset's pinned contract are given, and, without a `senderKey` (an
   * agent), `ownerWallet`, so every key is checked.
   */
  readonly trust?: Trust
}

/**
 * @since 0.1.0
 * @category models
 */
export interface SendOptions extends SealOptions {
  /** Sent with the create request; a retry with the same key is answered with the first outcome (D6, D36). */
  readonly idempotencyKey?: string
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
 * Who vouches for the keys a transfer is sealed to (`SealOptions.trust`).
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

/** A transfer not sent, and why. */
const refuse = (reason: SealedTransferFailure, message: string) => Effect.fail(new SealedTransferError(reason, message))

const unpinned = (message: string) => refuse("deployment_unpinned", message)

/** An address the caller gave, checksummed; a malformed one is the caller's mistake, refused before any request. */
const callerAddress = (name: string, value: string): Effect.Effect<Address, SealedTransferError> =>
  isAddress(value, { strict: false }) ? Effect.succeed(getAddress(value)) : unpinned(`${name} is not a 20-byte 0x address`)

/** A pinned address, when the caller gave one. */
const optionalAddress = (name: string, value: string | undefined): Effect.Effect<Address | undefined, SealedTransferError> =>
  value === undefined ? Effect.succeed(undefined) : callerAddress(name, value)

/** What the caller pinned, checked before any request. */
interface Pins {
  readonly chainId: bigint | undefined
  readonly contract: Address | undefined
  readonly recipient: Address | undefined
  readonly ownerWallet: Address | undefined
}

/**
 * What the caller pinned and what can be checked, worked out before any request: a check
 * that was asked for but cannot be made is refused here, never skipped.
 */
const pinsOf = Effect.fnUntraced(function*(transfer: SealedTransferRequest, asset: string, options: SealOptions) {
  const deployment = options.deployment
  const contract = yield* optionalAddress(`deployment.contracts.${asset}`, deployment?.contracts[asset as keyof Deployment["contracts"]])
  if (options.rpcUrl !== undefined && contract === undefined) {
    return yield* unpinned(`rpcUrl checks the keys against the pinned ${asset} contract: give deployment.contracts.${asset} (not the contract the API names)`)
  }
  if (options.trust === "chain" && (options.rpcUrl === undefined || contract === undefined)) {
    return yield* unpinned(`trust "chain" needs rpcUrl and deployment.contracts.${asset}: without them the keys cannot be checked`)
  }
  const ownerWallet = yield* optionalAddress("ownerWallet", options.ownerWallet)
  if (ownerWallet !== undefined && options.rpcUrl === undefined) {
    return yield* unpinned("ownerWallet is checked against the key the chain's registry holds for it: give rpcUrl and deployment")
  }
  if (options.trust === "chain" && options.senderKey === undefined && ownerWallet === undefined) {
    return yield* unpinned(
      `trust "chain" with an agent's key needs ownerWallet (its owner's wallet address): without it the key the agent's copy is sealed to cannot be checked`
    )
  }
  const toAddress = isAddress(transfer.to, { strict: false }) ? getAddress(transfer.to) : undefined
  const pinnedRecipient = yield* optionalAddress("recipientAddress", options.recipientAddress)
  if (toAddress !== undefined && pinnedRecipient !== undefined && toAddress !== pinnedRecipient) {
    return yield* refuse("recipient_address_mismatch", `to is ${toAddress} but recipientAddress is ${pinnedRecipient}`)
  }
  const chainId = deployment?.chainId
  if (chainId !== undefined && !(typeof chainId === "bigint" ? chainId > 0n : Number.isSafeInteger(chainId) && chainId > 0)) {
    return yield* unpinned("deployment.chainId is not a positive integer")
  }
  return {
    chainId: chainId === undefined ? undefined : BigInt(chainId),
    contract,
    recipient: toAddress ?? pinnedRecipient,
    ownerWallet
  } satisfies Pins
})

/** The note to seal, refused before any request when its amount or memo cannot be sealed. */
const noteOf = (asset: string, transfer: SealedTransferRequest): Effect.Effect<{ readonly amount: bigint; readonly memo: string }, SealedTransferError> => {
  const decimals = Amount.decimalsOf(asset)
  const match = /^(\d{1,13})(?:\.(\d+))?$/.exec(transfer.amount)
  const fraction = match?.[2] ?? ""
  if (match === null || fraction.length > decimals) {
    return refuse("amount_invalid", `the amount must be a decimal string with at most ${decimals} decimals`)
  }
  const amount = BigInt(match[1]!) * 10n ** BigInt(decimals) + BigInt(fraction.padEnd(decimals, "0") || "0")
  // The sealed note carries the amount as a 64-bit integer of base units (docs/crypto.md).
  if (amount === 0n || amount >= 1n << 64n) {
    return refuse("amount_invalid", "the amount must be above 0 and below 2^64 base units")
  }
  const memo = transfer.memo ?? ""
  if (new TextEncoder().encode(memo).length > Note.memoBytesMax) {
    return refuse("memo_too_long", `the memo is at most ${Note.memoBytesMax} bytes of UTF-8`)
  }
  return Effect.succeed({ amount, memo })
}

/**
 * Without a `senderKey`, the copy is sealed to the key the API answers: an agent's owner's
 * (D21). An account's own copy is sealed to its own key, which only its holder can give.
 */
const requireAgent = Effect.fnUntraced(function*(api: ApiClient.Client) {
  const account = yield* api.accounts.me()
  if (account.type !== "agent") {
    return yield* refuse(
      "sender_key_missing",
      `account ${account.account_id} is not an agent: its copy is sealed to its own key, so give its key pair (only an agent's key seals to the key the API answers, its owner's)`
    )
  }
})

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
 * Prepares a transfer to `transfer.to`, checks the answer against the caller's pins, and seals
 * the boxes for it: the part a create and a refund (D43) share. `purpose` goes into the sealing
 * seed beside the idempotency key, so a create and a refund never seal alike.
 */
const prepareAndSeal = Effect.fnUntraced(function*(
  api: ApiClient.Client,
  transfer: SealedTransferRequest,
  options: SealOptions,
  purpose: ReadonlyArray<string>
) {
  const asset = transfer.asset ?? "USDG"
  const note = yield* noteOf(asset, transfer)
  const pins = yield* pinsOf(transfer, asset, options)
  if (options.senderKey === undefined) yield* requireAgent(api)
  const idempotencyKey = yield* IdempotencyKey
  const replayable = idempotencyKey !== undefined && options.sealingSecret !== undefined
  // The same preparation on a retry (the same transfer id, keys and token); without a
  // secret to seal identically, a fresh one under a key of its own.
  const prepared = yield* api.transfers.prepare({ payload: { to: transfer.to, asset } }).pipe(
    Effect.provideService(IdempotencyKey, replayable ? prepareKeyOf(idempotencyKey) : undefined)
  )
  const checked = yield* checkPrepared(prepared, transfer.to, asset, pins, options.senderKey)
  if (options.rpcUrl !== undefined && pins.contract !== undefined) {
    yield* checkAgainstChain(options.rpcUrl, pins.contract, checked, pins.ownerWallet)
  }
  const random = replayable
    ? Random.deterministic(Random.sealingSeed(options.sealingSecret!, [
      ...purpose,
      idempotencyKey,
      prepared.transfer_id,
      transfer.to,
      asset,
      note.amount.toString(),
      note.memo
    ]))
    : Random.secure
  const boxes = sealBoxes(checked, note, random)
  return {
    asset,
    sealed: {
      transfer_id: prepared.transfer_id,
      token: prepared.token,
      guardian: Wire.hex(boxes.guardian),
      sender: Wire.hex(boxes.sender),
      recipient: Wire.hex(boxes.recipient)
    }
  }
})

/**
 * Prepares, checks the keys, seals and creates a transfer over the contract's typed client,
 * with the caller's Idempotency-Key (`IdempotencyKey`) on the create; succeeds with the
 * API's answer (the Transfer, or an agent's held transaction with status 202).
 *
 * @since 0.5.0
 * @category requests
 */
export const sealed = Effect.fn("SealedTransfers.sealed")(function*(
  api: ApiClient.Client,
  transfer: SealedTransferRequest,
  options: SealOptions
) {
  const { asset, sealed } = yield* prepareAndSeal(api, transfer, options, ["sealed-transfer"])
  const [body, response] = yield* api.transfers.create({
    payload: {
      to: transfer.to,
      asset,
      sealed,
      ...(transfer.approvalExpiresAt === undefined ? {} : { approval_expires_at: transfer.approvalExpiresAt })
    },
    responseMode: "decoded-and-response"
  })
  return { status: response.status, body } satisfies SentTransfer
})

/**
 * What to refund (D43): a transfer the caller received, and how much of it (a decimal string
 * in its asset's units; default the whole amount, read from the caller's own copy).
 *
 * @since 0.10.0
 * @category models
 */
export interface SealedRefundRequest {
  readonly transferId: string
  readonly amount?: string
  readonly memo?: string
}

/**
 * The whole amount of a received transfer, opened from the caller's own copy with its key pair.
 * An agent's copy is sealed to its owner's key, so an agent's key must name the amount.
 */
const wholeAmountOf = (api: ApiClient.Client, transferId: string, keyPair: EncryptionKey.KeyPair | undefined) =>
  keyPair === undefined
    ? refuse(
      "refund_amount_unknown",
      "a refund of the whole amount reads it from your own copy of the transfer, which needs the account's key pair (an agent's copy is sealed to its owner's key): give the amount"
    )
    : api.transfers.sealed({ params: { transfer_id: transferId } }).pipe(
      Effect.flatMap((copy) =>
        Effect.try({
          try: () => openSealedCopy(keyPair, transferId, copy),
          catch: (cause) =>
            cause instanceof ConfidentialError || cause instanceof TransportError
              ? cause
              : new TransportError("malformed_response", `GET /v1/transfers/${transferId}/sealed: an answer that cannot be read`, { cause })
        })
      ),
      Effect.map((opened) => Amount.format(opened.asset, opened.amount))
    )

/**
 * Refunds a received transfer (D43), sealed here as a create is: the original is read (its
 * sender and asset), the amount defaults to the whole of it (opened from the caller's copy with
 * `keyPair`), a transfer to the original's sender is prepared, checked and sealed, and
 * `POST /v1/transfers/{transfer_id}/refund` carries the boxes, with the caller's
 * Idempotency-Key. Succeeds with the API's answer: the refund (201), or an agent's refund held
 * for its owner (202).
 *
 * @since 0.10.0
 * @category requests
 */
export const sealedRefund = Effect.fn("SealedTransfers.sealedRefund")(function*(
  api: ApiClient.Client,
  refund: SealedRefundRequest,
  options: SealOptions,
  keyPair: EncryptionKey.KeyPair | undefined
) {
  const original = yield* api.transfers.get({ params: { transfer_id: refund.transferId } })
  // Its sender would otherwise prepare a transfer to itself (400) before the refund's own 403.
  if (original.direction !== "received") {
    return yield* refuse(
      "not_transfer_recipient",
      `transfer ${refund.transferId} was sent by this account, not received: only its recipient may refund it`
    )
  }
  const amount = refund.amount ?? (yield* wholeAmountOf(api, refund.transferId, keyPair))
  const transfer = {
    to: original.from,
    amount,
    asset: original.asset,
    ...(refund.memo === undefined ? {} : { memo: refund.memo })
  }
  const { sealed } = yield* prepareAndSeal(api, transfer, options, ["sealed-refund", refund.transferId])
  const [body, response] = yield* api.transfers.refund({
    params: { transfer_id: refund.transferId },
    payload: { sealed },
    responseMode: "decoded-and-response"
  })
  return { status: response.status, body } satisfies SentTransfer
})

/**
 * Refunds a received transfer (D43), sealed here; resolves with the API's answer.
 *
 * @since 0.10.0
 * @category requests
 */
export const refund = (
  client: Client,
  request: SealedRefundRequest,
  options: SendOptions & { readonly keyPair?: EncryptionKey.KeyPair }
): Promise<SentTransfer> =>
  run(client, (api) => sealedRefund(api, request, options, options.keyPair), options.idempotencyKey)

/**
 * Prepares, checks the keys, seals and creates a transfer; resolves with the API's answer
 * (the Transfer, or an agent's held transaction with status 202).
 *
 * @since 0.1.0
 * @category requests
 */
export const send = (client: Client, transfer: SealedTransferRequest, options: SendOptions): Promise<SentTransfer> =>
  run(client, (api) => sealed(api, transfer, options), options.idempotencyKey)

/** What the prepare step answered, decoded and checked against what the caller pinned. */
interface CheckedPreparation {
  readonly chainId: bigint
  readonly contract: Address
  readonly recipientAddress: Address
  readonly bindingId: Uint8Array
  readonly senderKey: EncryptionKey.PublicKey
  readonly recipientKey: EncryptionKey.PublicKey
  readonly guardianKey: EncryptionKey.PublicKey
}

const preparedWhat = "POST /v1/transfers/prepare"

/** The prepare answer's values the contract types as strings, read; one that does not parse is `malformed_response`. */
const readPrepared = (prepared: PreparedTransfer) =>
  Effect.try({
    try: () => ({
      chainId: BigInt(prepared.chain_id),
      contract: Wire.address(preparedWhat, "contract", prepared.contract),
      recipientAddress: Wire.address(preparedWhat, "recipient_address", prepared.recipient_address),
      bindingId: Wire.hexBytes(preparedWhat, "binding_id", prepared.binding_id, 32),
      keys: {
        sender_key: Wire.hexBytes(preparedWhat, "sender_key", prepared.sender_key, 64),
        recipient_key: Wire.hexBytes(preparedWhat, "recipient_key", prepared.recipient_key, 64),
        guardian_key: Wire.hexBytes(preparedWhat, "guardian_key", prepared.guardian_key, 64)
      }
    }),
    catch: (cause) =>
      cause instanceof TransportError ? cause : new TransportError("malformed_response", `${preparedWhat}: an answer that cannot be read`, { cause })
  })

/** A key of the prepare answer as a key; one that is no point of the curve is a key that does not match. */
const answeredKey = (name: "sender_key" | "recipient_key" | "guardian_key", bytes: Uint8Array): Effect.Effect<EncryptionKey.PublicKey, SealedTransferError> => {
  const parsed = EncryptionKey.parsePublicKey(bytes)
  if (parsed.ok) return Effect.succeed(parsed.value)
  const reason = name === "guardian_key" ? "guardian_key_mismatch" : name === "recipient_key" ? "recipient_key_mismatch" : "sender_key_mismatch"
  return refuse(reason, `${name} ${Wire.hex(bytes)} is not a valid key`)
}

/**
 * Checks the prepare step's answer against the caller's own key and pins: the boxes are bound to
 * chain and contract, and the keys are read from the contract, so both must be the caller's, not
 * whatever the API names.
 */
const checkPrepared = Effect.fnUntraced(function*(
  prepared: PreparedTransfer,
  to: string,
  asset: string,
  pins: Pins,
  senderKey: EncryptionKey.PublicKey | undefined
) {
  const { chainId, contract, recipientAddress, bindingId, keys } = yield* readPrepared(prepared)
  if (senderKey !== undefined && !sameKey(senderKey, prepared.sender_key)) {
    return yield* refuse(
      "sender_key_mismatch",
      "the API answered a sender key that is not the expected one: is it the key registered for this account (an agent's owner's, for an agent)?"
    )
  }
  if (pins.chainId !== undefined && chainId !== pins.chainId) {
    return yield* refuse("chain_mismatch", `the API answered chain id ${chainId}; the pinned deployment is on chain ${pins.chainId}`)
  }
  if (pins.contract !== undefined && contract !== pins.contract) {
    return yield* refuse("contract_mismatch", `the API answered ${asset} contract ${contract}; the pinned one is ${pins.contract}`)
  }
  if (pins.recipient !== undefined && recipientAddress !== pins.recipient) {
    return yield* refuse(
      "recipient_address_mismatch",
      `the API answered recipient address ${recipientAddress} for ${to}; the expected one is ${pins.recipient}`
    )
  }
  return {
    chainId,
    contract,
    recipientAddress,
    bindingId,
    senderKey: senderKey ?? (yield* answeredKey("sender_key", keys.sender_key)),
    recipientKey: yield* answeredKey("recipient_key", keys.recipient_key),
    guardianKey: yield* answeredKey("guardian_key", keys.guardian_key)
  } satisfies CheckedPreparation
})

/**
 * Checks the chain id, the guardian's key, the recipient's key and, with the owner's wallet
 * pinned, the sender's key against the pinned contract, through the caller's RPC.
 */
const checkAgainstChain = (rpcUrl: string, pinnedContract: Address, checked: CheckedPreparation, ownerWallet: Address | undefined) =>
  Effect.tryPromise({
    try: () => readAndCompare(rpcUrl, pinnedContract, checked, ownerWallet),
    catch: (cause) =>
      cause instanceof SealedTransferError
        ? cause
        // The RPC URL is not named in messages: a provider's URL often carries its API key.
        : new SealedTransferError("chain_unavailable", `the keys could not be read from contract ${pinnedContract} through rpcUrl; nothing was sent`, { cause })
  })

const readAndCompare = async (rpcUrl: string, pinnedContract: Address, checked: CheckedPreparation, ownerWallet: Address | undefined): Promise<void> => {
  const chain = createPublicClient({ transport: http(rpcUrl) })
  const rpcChainId = BigInt(await chain.getChainId())
  if (rpcChainId !== checked.chainId) {
    throw new SealedTransferError("chain_mismatch", `the API answered chain id ${checked.chainId}; the RPC's chain is ${rpcChainId}`)
  }
  const keyOf = async (wallet: Address) =>
    pointHex(await chain.readContract({ address: pinnedContract, abi: registryAbi, functionName: "encryptionKeyOf", args: [wallet] }))
  const onChainGuardian = pointHex(await chain.readContract({ address: pinnedContract, abi: registryAbi, functionName: "guardianEncryptionKey" }))
  if (!sameKey(checked.guardianKey, onChainGuardian)) {
    throw new SealedTransferError("guardian_key_mismatch", `the guardian key the API answered is not the one contract ${pinnedContract} holds`)
  }
  if (!sameKey(checked.recipientKey, await keyOf(checked.recipientAddress))) {
    throw new SealedTransferError(
      "recipient_key_mismatch",
      `the recipient key the API answered is not the one contract ${pinnedContract} holds for ${checked.recipientAddress}`
    )
  }
  if (ownerWallet !== undefined && !sameKey(checked.senderKey, await keyOf(ownerWallet))) {
    throw new SealedTransferError(
      "sender_key_mismatch",
      `the sender key the API answered is not the one contract ${pinnedContract} holds for the owner's wallet ${ownerWallet}`
    )
  }
}

/** The three boxes of the transfer, bound to its chain, contract and id. */
const sealBoxes = (
  checked: CheckedPreparation,
  note: { readonly amount: bigint; readonly memo: string },
  random: Random.RandomSource
) =>
  Note.sealTransfer({
    context: {
      chainId: checked.chainId,
      contract: checked.contract,
      transferId: checked.bindingId
    },
    note,
    opening: ElGamal.newOpening(note.amount, random),
    senderKey: checked.senderKey,
    recipientKey: checked.recipientKey,
    guardianKey: checked.guardianKey
  }, random)
