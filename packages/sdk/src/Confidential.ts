/**
 * What only the account holder can do, because only the holder has the
 * account's encryption key: register the key, read the amount and memo of a
 * transfer, and read balances. The secret key never leaves this process; the
 * API sees public keys, proofs and ciphertexts.
 *
 * - `registerKey` proves possession of the key once per asset contract
 *   (a Schnorr proof bound to chain, contract and account address) and
 *   registers it; the account becomes confidential-ready. Idempotent for the
 *   same key.
 * - `decryptTransfer` opens the caller's sealed copy of a transfer and checks
 *   it against the transfer's ciphertext with one scalar multiplication
 *   (`ElGamal.matches`): a copy whose amount differs from what the chain moved
 *   is refused, never shown.
 * - `proveBalances` opens the guardian's sealed balance statements, checks each
 *   against the account's ciphertext the same way, and builds the decryption
 *   proof the balances endpoint takes; `readBalances` sends it.
 *
 * The formats are those of `@pps/crypto`, specified in docs/crypto.md.
 *
 * @example
 * ```ts
 * import { Client, Confidential, KeyFile } from "@pps/sdk"
 *
 * const client = Client.make({ apiKey: process.env.PPS_API_KEY! })
 * const { keyPair } = KeyFile.read(KeyFile.defaultPath("acct_..."))
 * const transfer = await Confidential.decryptTransfer(client, keyPair, "tr_...")
 * const { balances } = await Confidential.readBalances(client, keyPair)
 * ```
 *
 * @since 0.1.0
 */
import { DecryptionProof, ElGamal, EncryptionKey, Note } from "@pps/crypto"
import type { Address } from "viem"
import * as Amount from "./Amount.ts"
import { ApiError, type Client, TransportError } from "./Client.ts"
import { request } from "./internal/http.ts"
import * as Wire from "./internal/wire.ts"

/**
 * Why a sealed copy or statement was refused. None of them is a transport
 * problem: each means the service handed over something this key cannot
 * vouch for.
 *
 * - `sealed_copy_unopenable`: the transfer's sealed copy does not open with
 *   this key (usually: not the key registered for the account).
 * - `sealed_copy_mismatch`: it opens, but its amount is not the one the
 *   transfer's ciphertext encrypts.
 * - `sealed_copy_unverifiable`: the caller received a standard
 *   (non-confidential) transfer, whose ciphertext has no handle for the
 *   recipient, so the copy cannot be checked and is not shown.
 * - `statement_unopenable`, `statement_mismatch`: the same for a balance statement.
 * - `balances_mismatch`: the balances endpoint accepted the proof but answered
 *   amounts other than the proven ones.
 *
 * @since 0.1.0
 * @category models
 */
export type ConfidentialFailure =
  | "sealed_copy_unopenable"
  | "sealed_copy_mismatch"
  | "sealed_copy_unverifiable"
  | "statement_unopenable"
  | "statement_mismatch"
  | "balances_mismatch"

/**
 * A sealed copy or statement failed its check. The message names ids and
 * assets, never an amount or a memo.
 *
 * @since 0.1.0
 * @category errors
 */
export class ConfidentialError extends Error {
  override readonly name = "ConfidentialError"
  readonly reason: ConfidentialFailure
  constructor(reason: ConfidentialFailure, message: string) {
    super(message)
    this.reason = reason
  }
}

/**
 * What a proof of possession binds, and whether a key is registered
 * (`GET /v1/accounts/me/encryption-key`), in the API's wire form.
 *
 * @since 0.1.0
 * @category models
 */
export interface EncryptionKeyStatus {
  readonly account_address: Address
  readonly chain_id: number
  /** Each asset's ConfidentialToken contract, which verifies the proof. */
  readonly contracts: Readonly<Record<string, Address>>
  readonly public_key: string | null
  readonly confidential_ready: boolean
}

/**
 * The answer of a registration (`PUT /v1/accounts/me/encryption-key`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Registration {
  readonly public_key: string
  readonly confidential_ready: boolean
}

/**
 * A transfer as its sender or recipient reads it.
 *
 * @since 0.1.0
 * @category models
 */
export interface DecryptedTransfer {
  readonly transferId: string
  /** Which copy was opened: the caller's role in the transfer. */
  readonly role: "sender" | "recipient"
  readonly asset: string
  /** In the asset's base units (`Amount.format` writes it as a decimal string). */
  readonly amount: bigint
  /** Empty when the transfer had none. */
  readonly memo: string
}

/**
 * One asset's balance as decrypted by the account holder, in base units.
 *
 * @since 0.1.0
 * @category models
 */
export interface ProvenBalance {
  readonly asset: string
  readonly amount: bigint
}

/**
 * A decryption proof (base64, the format of docs/crypto.md) and what it claims.
 *
 * @since 0.1.0
 * @category models
 */
export interface BalanceProof {
  readonly proof: string
  readonly balances: ReadonlyArray<ProvenBalance>
}

/**
 * The balances endpoint's answer to a proof: `body` exactly as received, and
 * its entries.
 *
 * @since 0.1.0
 * @category models
 */
export interface Balances {
  readonly body: string
  readonly balances: ReadonlyArray<{ readonly asset: string; readonly amount: string }>
}

/**
 * How long a decryption proof stays valid. The server refuses proofs that
 * expire more than 5 minutes ahead (D20); two minutes covers a slow network
 * while keeping a leaked proof short-lived.
 *
 * @since 0.1.0
 * @category constants
 */
export const proofLifetimeSeconds = 120

const encryptionKeyPath = "/v1/accounts/me/encryption-key"

/**
 * The key registration status, and what a proof of possession binds.
 *
 * @since 0.1.0
 * @category requests
 */
export const encryptionKeyStatus = async (client: Client): Promise<EncryptionKeyStatus> => {
  const fields = Wire.fieldsOf((await request(client, "GET", encryptionKeyPath)).json, `GET ${encryptionKeyPath}`)
  const contractFields = Wire.object(fields, "contracts")
  const contracts: Record<string, Address> = {}
  for (const asset of Object.keys(contractFields.record)) contracts[asset] = Wire.address(contractFields, asset)
  return {
    account_address: Wire.address(fields, "account_address"),
    chain_id: Number(Wire.integer(fields, "chain_id")),
    contracts,
    public_key: Wire.nullableString(fields, "public_key"),
    confidential_ready: Wire.boolean(fields, "confidential_ready")
  }
}

/**
 * Registers the key pair's public key for the client's account, with a proof
 * of possession for each asset contract. Registering the same key again is
 * harmless (it also completes a registration that an earlier call left
 * half-mined); another key than the registered one is refused by the API
 * (409 `encryption_key_already_registered`).
 *
 * @since 0.1.0
 * @category requests
 */
export const registerKey = async (client: Client, keyPair: EncryptionKey.KeyPair): Promise<Registration> => {
  const status = await encryptionKeyStatus(client)
  const proofs: Record<string, string> = {}
  for (const [asset, contract] of Object.entries(status.contracts)) {
    proofs[asset] = Wire.hex(EncryptionKey.proveOwnership(keyPair, {
      chainId: BigInt(status.chain_id),
      contract,
      account: status.account_address
    }))
  }
  const answer = await request(client, "PUT", encryptionKeyPath, {
    body: { public_key: Wire.hex(keyPair.publicKey), proofs }
  })
  const fields = Wire.fieldsOf(answer.json, `PUT ${encryptionKeyPath}`)
  return { public_key: Wire.string(fields, "public_key"), confidential_ready: Wire.boolean(fields, "confidential_ready") }
}

/**
 * Opens the caller's sealed copy of a transfer and checks it against the
 * transfer's ciphertext; rejects with `ConfidentialError` when it does not
 * open, does not match, or cannot be checked, and with `ApiError` 404 `transfer_not_found` when
 * the caller is not a party to the transfer.
 *
 * @since 0.1.0
 * @category requests
 */
export const decryptTransfer = async (
  client: Client,
  keyPair: EncryptionKey.KeyPair,
  transferId: string
): Promise<DecryptedTransfer> => {
  const path = `/v1/transfers/${encodeURIComponent(transferId)}/sealed`
  const fields = Wire.fieldsOf((await request(client, "GET", path)).json, `GET ${path}`)
  const role = Wire.string(fields, "role")
  if (role !== "sender" && role !== "recipient") {
    throw new TransportError("malformed_response", `GET ${path}: \`role\` is neither sender nor recipient`)
  }
  const note = Note.openTransferNote(keyPair, Wire.hexBytes(fields, "sealed_note"), {
    chainId: Wire.integer(fields, "chain_id"),
    contract: Wire.address(fields, "contract"),
    transferId: Wire.hexBytes(fields, "binding_id", 32)
  }, role)
  if (!note.ok) {
    throw new ConfidentialError(
      "sealed_copy_unopenable",
      `the sealed copy of transfer ${transferId} does not open with this key (${note.reason}); is it the key registered for this account?`
    )
  }
  // A standard transfer's recipient gets no handle: its ciphertext encrypts the debit to the
  // sender and the guardian only (the amount is public in the transaction).
  if (Wire.nullableString(fields, "handle") === null) {
    throw new ConfidentialError(
      "sealed_copy_unverifiable",
      `transfer ${transferId} is a standard transfer: the API gives its recipient no ciphertext to check the sealed copy against`
    )
  }
  if (!ElGamal.matches(keyPair.secretKey, Wire.point(fields, "commitment"), Wire.point(fields, "handle"), note.value.amount)) {
    throw new ConfidentialError(
      "sealed_copy_mismatch",
      `the sealed copy of transfer ${transferId} does not match the transfer's ciphertext: do not trust it`
    )
  }
  return {
    transferId: Wire.string(fields, "transfer_id"),
    role,
    asset: Wire.string(fields, "asset"),
    amount: note.value.amount,
    memo: note.value.memo
  }
}

/**
 * Opens the guardian's balance statements, checks each against the account's
 * ciphertext, and proves them for the balances endpoint. The proof expires
 * after `proofLifetimeSeconds`.
 *
 * @since 0.1.0
 * @category requests
 */
export const proveBalances = async (client: Client, keyPair: EncryptionKey.KeyPair): Promise<BalanceProof> => {
  const path = "/v1/accounts/me/balances/sealed"
  const answer = Wire.fieldsOf((await request(client, "GET", path)).json, `GET ${path}`)
  const entries = Wire.array(answer, "balances").map((entry, index) => Wire.fieldsOf(entry, `GET ${path} balances[${index}]`))
  const first = entries[0]
  if (first === undefined) throw new TransportError("malformed_response", `GET ${path}: no balance listed`)
  const chainId = Wire.integer(first, "chain_id")
  const account = Wire.address(first, "account")
  const claims = entries.map((entry): DecryptionProof.Claim => {
    const asset = Wire.string(entry, "asset")
    const contract = Wire.address(entry, "contract")
    if (Wire.integer(entry, "chain_id") !== chainId || Wire.address(entry, "account") !== account) {
      throw new TransportError("malformed_response", `GET ${path}: the statement for ${asset} is for another chain or account`)
    }
    const statement = Note.openBalanceStatement(keyPair, Wire.hexBytes(entry, "sealed_statement"), { chainId, contract, account })
    if (!statement.ok) {
      throw new ConfidentialError(
        "statement_unopenable",
        `the balance statement for ${asset} does not open with this key (${statement.reason}); is it the key registered for this account?`
      )
    }
    const commitment = Wire.point(entry, "commitment")
    const handle = Wire.point(entry, "handle")
    if (!ElGamal.matches(keyPair.secretKey, commitment, handle, statement.value.amount)) {
      throw new ConfidentialError("statement_mismatch", `the guardian's statement for ${asset} does not match the account's ciphertext`)
    }
    return {
      asset,
      amount: statement.value.amount,
      ciphertext: { contract, commitment, handle, ciphertextVersion: Wire.integer(entry, "ciphertext_version") }
    }
  })
  const proof = DecryptionProof.prove({
    keyPair,
    chainId,
    account,
    expiresAtSeconds: BigInt(Math.floor(Date.now() / 1000) + proofLifetimeSeconds),
    claims
  })
  return { proof, balances: claims.map((claim) => ({ asset: claim.asset, amount: claim.amount })) }
}

const readBalancesOnce = async (client: Client, keyPair: EncryptionKey.KeyPair): Promise<Balances> => {
  const { balances: proven, proof } = await proveBalances(client, keyPair)
  const path = "/v1/accounts/me/balances"
  // The proof goes in a header: fetch cannot send a body on GET (D20 accepts either).
  const answer = await request(client, "GET", path, { headers: { "x-decryption-proof": proof } })
  const balances = Wire.array(Wire.fieldsOf(answer.json, `GET ${path}`), "balances").map((entry, index) => {
    const fields = Wire.fieldsOf(entry, `GET ${path} balances[${index}]`)
    return { asset: Wire.string(fields, "asset"), amount: Wire.string(fields, "amount") }
  })
  // The endpoint answers the amounts the proof claims; anything else is a fault worth refusing.
  const expected = proven.map((balance) => `${balance.asset}=${Amount.format(balance.asset, balance.amount)}`).sort()
  const answered = balances.map((balance) => `${balance.asset}=${balance.amount}`).sort()
  if (expected.join(" ") !== answered.join(" ")) {
    throw new ConfidentialError("balances_mismatch", `GET ${path} answered other balances than the proven ones`)
  }
  return { body: answer.text, balances }
}

/**
 * The account's balances through a decryption proof (`GET /v1/accounts/me/balances`).
 * When a balance changes between reading the statements and sending the proof,
 * the API refuses the proof (422 `decryption_proof_invalid`): the read is then
 * made once more from fresh statements.
 *
 * @since 0.1.0
 * @category requests
 */
export const readBalances = async (client: Client, keyPair: EncryptionKey.KeyPair): Promise<Balances> => {
  try {
    return await readBalancesOnce(client, keyPair)
  } catch (error) {
    if (!(error instanceof ApiError && error.code === "decryption_proof_invalid")) throw error
    return readBalancesOnce(client, keyPair)
  }
}

/**
 * A held agent transaction as its owner decides on it: the amount the guardian read and
 * will pay (opened from the guardian's own statement), and the agent's note {amount, memo}.
 *
 * @since 0.1.0
 * @category models
 */
export interface HeldTransaction {
  readonly transactionId: string
  readonly transferId: string
  readonly asset: string
  /** What an approval pays, in base units: the guardian's figure. */
  readonly amount: bigint
  readonly memo: string
  /**
   * Whether the agent's own note states the same amount. False means the agent sealed one
   * amount for its owner to read and another for the guardian to pay: do not approve.
   * Null for a transaction held before the guardian's statement existed.
   */
  readonly noteMatches: boolean | null
}

/**
 * Opens what an owner is asked to approve (`GET /v1/agents/transactions/{id}/sealed`) with
 * the owner's key pair.
 *
 * @since 0.1.0
 * @category requests
 */
export const openHeld = async (
  client: Client,
  keyPair: EncryptionKey.KeyPair,
  transactionId: string
): Promise<HeldTransaction> => {
  const path = `/v1/agents/transactions/${encodeURIComponent(transactionId)}/sealed`
  const fields = Wire.fieldsOf((await request(client, "GET", path)).json, `GET ${path}`)
  const context = {
    chainId: Wire.integer(fields, "chain_id"),
    contract: Wire.address(fields, "contract"),
    transferId: Wire.hexBytes(fields, "binding_id", 32)
  }
  const note = Note.openTransferNote(keyPair, Wire.hexBytes(fields, "sealed_note"), context, "sender")
  if (!note.ok) {
    throw new ConfidentialError(
      "sealed_copy_unopenable",
      `the sealed note of held transaction ${transactionId} does not open with this key (${note.reason}); is it the owner's key?`
    )
  }
  const statement = Wire.nullableString(fields, "guardian_amount")
  let amount = note.value.amount
  let noteMatches: boolean | null = null
  if (statement !== null) {
    const opened = Note.openHeldAmount(keyPair, Wire.hexBytes(fields, "guardian_amount"), context)
    if (!opened.ok) {
      throw new ConfidentialError(
        "statement_unopenable",
        `the guardian's statement of held transaction ${transactionId} does not open with this key (${opened.reason})`
      )
    }
    amount = opened.value
    noteMatches = opened.value === note.value.amount
  }
  return {
    transactionId: Wire.string(fields, "transaction_id"),
    transferId: Wire.string(fields, "transfer_id"),
    asset: Wire.string(fields, "asset"),
    amount,
    memo: note.value.memo,
    noteMatches
  }
}
