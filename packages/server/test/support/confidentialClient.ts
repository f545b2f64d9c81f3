/**
 * What a client does with its own encryption key, over the real API: register
 * the key (with a proof of possession per asset contract), open the sealed
 * copies of a transfer, and read balances through a decryption proof. It holds
 * the only decryption key; the server never sees it.
 */
import { DecryptionProof, ElGamal, EncryptionKey, Note, type Point } from "@pps/crypto"
import { Effect, Schema } from "effect"
import { getAddress } from "viem"
import { bearer, send } from "./http.ts"

const bytes = (hex: string) => new Uint8Array(Buffer.from(hex.replace(/^0x/, ""), "hex"))
const hex = (value: Uint8Array) => `0x${Buffer.from(value).toString("hex")}`

const KeyStatus = Schema.Struct({
  account_address: Schema.String,
  chain_id: Schema.Number,
  contracts: Schema.Struct({ USDG: Schema.String, ETH: Schema.String }),
  public_key: Schema.NullOr(Schema.String),
  confidential_ready: Schema.Boolean
})

export const registerKey = (baseUrl: string, apiKey: string, keyPair: EncryptionKey.KeyPair = EncryptionKey.generate()) =>
  Effect.gen(function*() {
    const status = Schema.decodeUnknownSync(KeyStatus)(
      (yield* send(`${baseUrl}/v1/accounts/me/encryption-key`, { headers: bearer(apiKey) })).json
    )
    const prove = (contract: string) =>
      hex(EncryptionKey.proveOwnership(keyPair, {
        chainId: BigInt(status.chain_id),
        contract: getAddress(contract),
        account: getAddress(status.account_address)
      }))
    const response = yield* send(`${baseUrl}/v1/accounts/me/encryption-key`, {
      method: "PUT",
      headers: { ...bearer(apiKey), "content-type": "application/json" },
      body: JSON.stringify({
        public_key: hex(keyPair.publicKey),
        proofs: { USDG: prove(status.contracts.USDG), ETH: prove(status.contracts.ETH) }
      })
    })
    if (response.status !== 200) throw new Error(`key registration failed: ${response.status} ${response.text}`)
    return keyPair
  })

const Sealed = Schema.Struct({
  transfer_id: Schema.String,
  role: Schema.Literals(["sender", "recipient"]),
  chain_id: Schema.Number,
  contract: Schema.String,
  binding_id: Schema.String,
  sealed_note: Schema.String,
  commitment: Schema.String,
  handle: Schema.String
})

/** Opens this party's copy of a transfer and checks it against the ciphertext with one multiplication. */
export const decryptTransfer = (baseUrl: string, apiKey: string, keyPair: EncryptionKey.KeyPair, transferId: string) =>
  Effect.gen(function*() {
    const response = yield* send(`${baseUrl}/v1/transfers/${transferId}/sealed`, { headers: bearer(apiKey) })
    if (response.status !== 200) throw new Error(`sealed copy: ${response.status} ${response.text}`)
    const sealed = Schema.decodeUnknownSync(Sealed)(response.json)
    const note = Note.openTransferNote(keyPair, bytes(sealed.sealed_note), {
      chainId: BigInt(sealed.chain_id),
      contract: getAddress(sealed.contract),
      transferId: bytes(sealed.binding_id)
    }, sealed.role)
    if (!note.ok) throw new Error(`the note did not open: ${note.reason}`)
    const consistent = ElGamal.matches(
      keyPair.secretKey,
      bytes(sealed.commitment) as Point.Point,
      bytes(sealed.handle) as Point.Point,
      note.value.amount
    )
    return { amount: note.value.amount, memo: note.value.memo, consistent }
  })

const SealedBalances = Schema.Struct({
  balances: Schema.Array(Schema.Struct({
    asset: Schema.String,
    chain_id: Schema.Number,
    contract: Schema.String,
    account: Schema.String,
    sealed_statement: Schema.String,
    commitment: Schema.String,
    handle: Schema.String,
    ciphertext_version: Schema.String
  }))
})

/**
 * Decrypts the guardian's balance statements, checks each against the on-chain
 * ciphertext, and builds the decryption proof the balances endpoint takes.
 */
export const balanceProof = (baseUrl: string, apiKey: string, keyPair: EncryptionKey.KeyPair) =>
  Effect.gen(function*() {
    const response = yield* send(`${baseUrl}/v1/accounts/me/balances/sealed`, { headers: bearer(apiKey) })
    if (response.status !== 200) throw new Error(`sealed balances: ${response.status} ${response.text}`)
    const sealed = Schema.decodeUnknownSync(SealedBalances)(response.json)
    const claims = sealed.balances.map((entry) => {
      const statement = Note.openBalanceStatement(keyPair, bytes(entry.sealed_statement), {
        chainId: BigInt(entry.chain_id),
        contract: getAddress(entry.contract),
        account: getAddress(entry.account)
      })
      if (!statement.ok) throw new Error(`the balance statement did not open: ${statement.reason}`)
      const commitment = bytes(entry.commitment) as Point.Point
      const handle = bytes(entry.handle) as Point.Point
      if (!ElGamal.matches(keyPair.secretKey, commitment, handle, statement.value.amount)) {
        throw new Error(`the guardian's statement does not match the chain for ${entry.asset}`)
      }
      return {
        asset: entry.asset,
        amount: statement.value.amount,
        ciphertext: {
          contract: getAddress(entry.contract),
          commitment,
          handle,
          ciphertextVersion: BigInt(entry.ciphertext_version)
        }
      }
    })
    const first = sealed.balances[0]!
    return DecryptionProof.prove({
      keyPair,
      chainId: BigInt(first.chain_id),
      account: getAddress(first.account),
      expiresAtSeconds: BigInt(Math.floor(Date.now() / 1000) + 120),
      claims
    })
  })
