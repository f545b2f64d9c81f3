/**
 * What a client does with its own encryption key, over the real API, as
 * Effects for the server's tests: the SDK's own client code (@pps/sdk
 * `Confidential`), so these tests exercise exactly what users run. It holds the
 * only decryption key; the server never sees it.
 */
import { EncryptionKey } from "@pps/crypto"
import { Client, Confidential } from "@pps/sdk"
import { Effect } from "effect"

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
