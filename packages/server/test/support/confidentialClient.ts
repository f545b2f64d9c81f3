/**
 * What a client does with its own encryption key, over the real API, as
 * Effects for the server's tests: the SDK's own client code (@pps/sdk
 * `Confidential`), so these tests exercise exactly what users run. It holds the
 * only decryption key; the server never sees it.
 */
import { EncryptionKey } from "@pps/crypto"
import { Client, Confidential } from "@pps/sdk/internal"
import { Effect } from "effect"
import { ulid } from "../../src/platform/Ids.ts"
import { bearer, createAccount, postJson, send } from "./http.ts"

const clientOf = (baseUrl: string, apiKey: string) => Client.make({ baseUrl, apiKey })

/** Registers a key (a fresh one unless given) with its proofs of possession; resolves with the key pair. */
export const registerKey = (baseUrl: string, apiKey: string, keyPair: EncryptionKey.KeyPair = EncryptionKey.generate()) =>
  Effect.promise(() => Confidential.registerKey(clientOf(baseUrl, apiKey), keyPair)).pipe(Effect.as(keyPair))

/**
 * Opens this party's copy of a transfer; the SDK refuses (and the test dies) when
 * the copy does not open or does not match the transfer's ciphertext.
 */
export const decryptTransfer = (baseUrl: string, apiKey: string, keyPair: EncryptionKey.KeyPair, transferId: string) =>
  Effect.promise(() => Confidential.decryptTransfer(clientOf(baseUrl, apiKey), keyPair, transferId))

/**
 * Decrypts the guardian's balance statements, checks each against the on-chain
 * ciphertext, and builds the decryption proof the balances endpoint takes.
 */
export const balanceProof = (baseUrl: string, apiKey: string, keyPair: EncryptionKey.KeyPair) =>
  Effect.promise(() => Confidential.proveBalances(clientOf(baseUrl, apiKey), keyPair)).pipe(
    Effect.map((proven) => proven.proof)
  )

/**
 * Two fresh accounts with registered keys (handles unique to this call), the first funded
 * with `amountUsdg` from the test faucet: a sender and a recipient for transfer tests.
 */
export const fundedPair = (
  server: { readonly baseUrl: string; readonly adminUrl: string; readonly adminToken: string },
  amountUsdg: string
) =>
  Effect.gen(function*() {
    const suffix = ulid().toLowerCase().slice(-8)
    const sender = yield* createAccount(server, `alice-${suffix}`)
    const recipient = yield* createAccount(server, `bob-${suffix}`)
    const senderKey = yield* registerKey(server.baseUrl, sender.api_key)
    const recipientKey = yield* registerKey(server.baseUrl, recipient.api_key)
    const grant = yield* send(`${server.baseUrl}/v1/test/faucet`, postJson(bearer(sender.api_key), { amount: amountUsdg }))
    if (grant.status !== 200) return yield* Effect.die(new Error(`faucet grant failed: ${grant.status} ${grant.text}`))
    return { sender, senderKey, recipient, recipientKey, recipientHandle: `bob-${suffix}` }
  })
