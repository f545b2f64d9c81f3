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
 * Internal: not exported from `@pps/sdk`; Promise users reach it through `Pps` (`encryptionKey.register`, `transfers.decrypt`, `balances.read`/`prove`, `approvals.open`).
 *
 * @example
 * ```ts
 * import { KeyFile, Pps } from "@pps/sdk"
 *
 * const pps = new Pps({ apiKey: process.env.PPS_API_KEY!, keyPair: KeyFile.read(KeyFile.defaultPath("acct_...")).keyPair })
 * const transfer = await pps.transfers.decrypt("tr_...")
 * const { balances } = await pps.balances.read()
 * ```
 *
 * @since 0.1.0
 * @internal
 */
import type { BalancesResponse } from "@pps/api/Balances"
import type { EncryptionKeyStatus as EncryptionKeyStatusSchema, RegisteredEncryptionKey } from "@pps/api/EncryptionKeys"
import type { SealedTransfer } from "@pps/api/Transfers"
import { DecryptionProof, ElGamal, EncryptionKey, Note } from "@pps/crypto"
import { Effect } from "effect"
import type { Address } from "viem"
import * as Amount from "./Amount.ts"
import type { Client } from "./Client.ts"
import { ApiError, ConfidentialError, TransportError } from "./Errors.ts"
import { run } from "./internal/typedClient.ts"
import * as Wire from "./internal/wire.ts"

/**
 * Why a sealed copy or statement was refused (declared in `Errors`, where both surfaces' errors live).
 *
 * @since 0.1.0
 * @category errors
 */
export { ConfidentialError, type ConfidentialFailure } from "./Errors.ts"

/**
 * What a proof of possession binds, and whether a key is registered
 * (`GET /v1/accounts/me/encryption-key`): the contract's `EncryptionKeyStatus`, with
 * its addresses checked and checksummed here.
 *
 * @since 0.1.0
 * @category models
 */
export type EncryptionKeyStatus = typeof EncryptionKeyStatusSchema.Type

/**
 * The answer of a registration (`PUT /v1/accounts/me/encryption-key`): the contract's
 * `RegisteredEncryptionKey`.
 *
 * @since 0.1.0
 * @category models
 */
export type Registration = typeof RegisteredEncryptionKey.Type

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
 * its entries, each with the block its amount is as of (`as_of_block`, D63).
 *
 * @since 0.1.0
 * @category models
 */
export interface Balances {
  readonly body: string
  /** The answer's entries, each a proven amount (the contract's `BalanceProven`). */
  readonly balances: ReadonlyArray<ProvenEntry>
}

/** One entry of the balances answer to a proof: the contract's, with an `amount`. */
type ProvenEntry = Extract<(typeof BalancesResponse.Type)["balances"][number], { readonly amount: string }>

/**
 * How long a decryption proof stays valid. The server refuses proofs that
 * expire more than 5 minutes ahead (D20); two minutes covers a slow network
 * while keeping a leaked proof short-lived.
 *
 * @since 0.1.0
 * @category constants
 */
export const proofLifetimeSeconds = 120

/**
 * The key registration status, and what a proof of possession binds.
 *
 * @since 0.1.0
 * @category requests
 */
export const encryptionKeyStatus = (client: Client): Promise<EncryptionKeyStatus> => checkedKeyStatus(client)

/** The status with its addresses checked and checksummed, typed as addresses for the proofs. */
const checkedKeyStatus = async (client: Client) => {
  const answer = await run(client, (api) => api.accounts.encryptionKey())
  const what = "GET /v1/accounts/me/encryption-key"
  return {
    ...answer,
    account_address: Wire.address(what, "account_address", answer.account_address),
    contracts: {
      USDG: Wire.address(what, "contracts.USDG", answer.contracts.USDG),
      ETH: Wire.address(what, "contracts.ETH", answer.contracts.ETH)
    }
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
  const payload = await keyPayload(client, keyPair)
  return run(client, (api) => api.accounts.registerEncryptionKey({ payload }))
}

/** The public key and its proof of possession for each asset contract, bound to the account. */
const keyPayload = async (client: Client, keyPair: EncryptionKey.KeyPair) => {
  const status = await checkedKeyStatus(client)
  const proofOf = (contract: Address) =>
    Wire.hex(EncryptionKey.proveOwnership(keyPair, { chainId: BigInt(status.chain_id), contract, account: status.account_address }))
  return {
    public_key: Wire.hex(keyPair.publicKey),
    proofs: { USDG: proofOf(status.contracts.USDG), ETH: proofOf(status.contracts.ETH) }
  }
}

/**
 * D55: replaces the account's registered key by the new key pair's, keeping the balance (the
 * guardian re-encrypts it to the new key). The old key is not needed: this is also how a holder
 * that lost it recovers. Transfers sealed before stay readable only with the old key; every one
 * after, with the new. Rotating to the key already registered is harmless (it finishes a rotation
 * an earlier call left half-mined); 503 while transfers of the account are in flight (retry).
 *
 * @since 0.12.0
 * @category requests
 */
export const rotateKey = async (client: Client, newKeyPair: EncryptionKey.KeyPair, options: { readonly idempotencyKey?: string } = {}): Promise<Registration> => {
  const payload = await keyPayload(client, newKeyPair)
  return run(client, (api) => api.accounts.rotateEncryptionKey({ payload }), options.idempotencyKey)
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
): Promise<DecryptedTransfer> =>
  openSealedCopy(keyPair, transferId, await run(client, (api) => api.transfers.sealed({ params: { transfer_id: transferId } })))

/**
 * Opens a sealed copy as `GET /v1/transfers/{transfer_id}/sealed` answered it (D18) with the
 * caller's key pair, and checks it against the transfer's ciphertext; throws `ConfidentialError`
 * when it does not open, does not match, or cannot be checked (a standard transfer's recipient before
 * it is confirmed; once it is, the public amount its transaction paid is the check, D62).
 * Shared by `decryptTransfer` and a refund's default amount (`SealedTransfers.sealedRefund`).
 *
 * @since 0.10.0
 * @category requests
 */
export const openSealedCopy = (
  keyPair: EncryptionKey.KeyPair,
  transferId: string,
  sealed: typeof SealedTransfer.Type
): DecryptedTransfer => {
  const what = `GET /v1/transfers/${transferId}/sealed`
  const note = Note.openTransferNote(keyPair, Wire.hexBytes(what, "sealed_note", sealed.sealed_note), {
    chainId: BigInt(sealed.chain_id),
    contract: Wire.address(what, "contract", sealed.contract),
    transferId: Wire.hexBytes(what, "binding_id", sealed.binding_id, 32)
  }, sealed.role)
  if (!note.ok) {
    throw new ConfidentialError(
      "sealed_copy_unopenable",
      `the sealed copy of transfer ${transferId} does not open with this key (${note.reason}); is it the key registered for this account?`
    )
  }
  // D62: a standard transfer's amount is public in its transaction; once confirmed, the copy
  // must say the same amount (for either party).
  if (sealed.public_amount !== null && Amount.format(sealed.asset, note.value.amount) !== sealed.public_amount) {
    throw new ConfidentialError(
      "sealed_copy_mismatch",
      `the sealed copy of transfer ${transferId} does not match the amount its transaction paid in public: do not trust it`
    )
  }
  // A standard transfer's recipient gets no handle: its ciphertext encrypts the debit to the
  // sender and the guardian only. Its public amount is the check; before confirmation there is none.
  if (sealed.handle === null) {
    if (sealed.public_amount !== null) return openedCopy(sealed, note.value)
    throw new ConfidentialError(
      "sealed_copy_unverifiable",
      `transfer ${transferId} is a standard transfer not yet confirmed: its public amount is not on chain yet to check the sealed copy against`
    )
  }
  const commitment = Wire.point(what, "commitment", sealed.commitment)
  if (!ElGamal.matches(keyPair.secretKey, commitment, Wire.point(what, "handle", sealed.handle), note.value.amount)) {
    throw new ConfidentialError(
      "sealed_copy_mismatch",
      `the sealed copy of transfer ${transferId} does not match the transfer's ciphertext: do not trust it`
    )
  }
  return openedCopy(sealed, note.value)
}

const openedCopy = (
  sealed: typeof SealedTransfer.Type,
  note: { readonly amount: bigint; readonly memo: string }
): DecryptedTransfer => ({
  transferId: sealed.transfer_id,
  role: sealed.role,
  asset: sealed.asset,
  amount: note.amount,
  memo: note.memo
})

/**
 * Opens the guardian's balance statements, checks each against the account's
 * ciphertext, and proves them for the balances endpoint. The proof expires
 * after `proofLifetimeSeconds`.
 *
 * @since 0.1.0
 * @category requests
 */
export const proveBalances = async (client: Client, keyPair: EncryptionKey.KeyPair): Promise<BalanceProof> => {
  const what = "GET /v1/accounts/me/balances/sealed"
  const { balances: entries } = await run(client, (api) => api.accounts.sealedBalances())
  const first = entries[0]
  if (first === undefined) throw new TransportError("malformed_response", `${what}: no balance listed`)
  const chainId = BigInt(first.chain_id)
  const account = Wire.address(what, "account", first.account)
  const claims = entries.map((entry): DecryptionProof.Claim => {
    const asset = entry.asset
    const contract = Wire.address(what, "contract", entry.contract)
    if (BigInt(entry.chain_id) !== chainId || Wire.address(what, "account", entry.account) !== account) {
      throw new TransportError("malformed_response", `${what}: the statement for ${asset} is for another chain or account`)
    }
    const statement = Note.openBalanceStatement(keyPair, Wire.hexBytes(what, "sealed_statement", entry.sealed_statement), {
      chainId,
      contract,
      account
    })
    if (!statement.ok) {
      throw new ConfidentialError(
        "statement_unopenable",
        `the balance statement for ${asset} does not open with this key (${statement.reason}); is it the key registered for this account?`
      )
    }
    const commitment = Wire.point(what, "commitment", entry.commitment)
    const handle = Wire.point(what, "handle", entry.handle)
    if (!ElGamal.matches(keyPair.secretKey, commitment, handle, statement.value.amount)) {
      throw new ConfidentialError("statement_mismatch", `the guardian's statement for ${asset} does not match the account's ciphertext`)
    }
    return {
      asset,
      amount: statement.value.amount,
      ciphertext: { contract, commitment, handle, ciphertextVersion: Wire.decimal(what, "ciphertext_version", entry.ciphertext_version) }
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
  // The proof goes in a header: fetch cannot send a body on GET, and a URL would leave it in
  // access logs (D20 accepts either).
  const [answer, response] = await run(client, (api) =>
    api.accounts.balances({ query: {}, headers: { "x-decryption-proof": proof }, responseMode: "decoded-and-response" }))
  const balances = answer.balances.map((entry) => {
    if (!("amount" in entry)) {
      throw new TransportError("malformed_response", `GET /v1/accounts/me/balances answered no amount for ${entry.asset} to a proof`)
    }
    return { asset: entry.asset, amount: entry.amount, as_of_block: entry.as_of_block }
  })
  // The endpoint answers the amounts the proof claims; anything else is a fault worth refusing.
  const expected = proven.map((balance) => `${balance.asset}=${Amount.format(balance.asset, balance.amount)}`).sort()
  const answered = balances.map((balance) => `${balance.asset}=${balance.amount}`).sort()
  if (expected.join(" ") !== answered.join(" ")) {
    throw new ConfidentialError("balances_mismatch", "GET /v1/accounts/me/balances answered other balances than the proven ones")
  }
  // The body as received (the command line prints it unchanged); the client kept it.
  const body = await Effect.runPromise(response.text)
  return { body, balances }
}

/**
 * The account's balances through a decryption proof (`GET /v1/accounts/me/balances`).
 * When a balance changes between reading the statements and sending the proof, the
 * API checks the proof against the recent block whose ciphertext it was made from
 * and says so in each entry's `as_of_block` (D63). Past that window (32 blocks, or
 * a ciphertext replaced longer ago than a proof lives) it refuses the proof
 * (422 `decryption_proof_invalid`): the read is then made once more from fresh
 * statements, a fallback that a client proving at once rarely needs.
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
  const held = await run(client, (api) => api.agents.sealedTransaction({ params: { transaction_id: transactionId } }))
  const what = `GET /v1/agents/transactions/${transactionId}/sealed`
  const context = {
    chainId: BigInt(held.chain_id),
    contract: Wire.address(what, "contract", held.contract),
    transferId: Wire.hexBytes(what, "binding_id", held.binding_id, 32)
  }
  const note = Note.openTransferNote(keyPair, Wire.hexBytes(what, "sealed_note", held.sealed_note), context, "sender")
  if (!note.ok) {
    throw new ConfidentialError(
      "sealed_copy_unopenable",
      `the sealed note of held transaction ${transactionId} does not open with this key (${note.reason}); is it the owner's key?`
    )
  }
  let amount = note.value.amount
  let noteMatches: boolean | null = null
  if (held.guardian_amount !== null) {
    const opened = Note.openHeldAmount(keyPair, Wire.hexBytes(what, "guardian_amount", held.guardian_amount), context)
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
    transactionId: held.transaction_id,
    transferId: held.transfer_id,
    asset: held.asset,
    amount,
    memo: note.value.memo,
    noteMatches
  }
}
