/**
 * The holder's decryption key in this browser: parsed from the key file `pps
 * keygen` writes (or generated here), kept in IndexedDB only encrypted, under a
 * passphrase (PBKDF2-SHA256, 600,000 iterations, to AES-256-GCM) or under the
 * output of the passkey's PRF extension where the browser and authenticator
 * offer it (HKDF-SHA256 to AES-256-GCM), and unlocked into memory for the life
 * of the tab. It is never sent anywhere: no function here touches the network
 * (the PRF is evaluated by the authenticator with a challenge made here; the
 * assertion is used for its PRF output only and goes to no server).
 */
import { EncryptionKey } from "@pps/crypto"

const databaseName = "pps-dashboard"
const storeName = "keys"
/** OWASP's 2023 figure for PBKDF2-HMAC-SHA256. */
const pbkdf2Iterations = 600_000

/** A key as stored: the secret key sealed, the public key in clear (to show which key it is). */
interface StoredKey {
  readonly account_id: string
  readonly public_key: string
  /** What unlocks it; absent in records written before the passkey option (a passphrase). */
  readonly protection?: "passphrase" | "passkey"
  /** PBKDF2's salt, or the PRF's input. */
  readonly salt: Uint8Array
  readonly iv: Uint8Array
  readonly sealed_secret: Uint8Array
  /** The passkey whose PRF seals it (base64url credential id). */
  readonly credential_id?: string
}

/** How the stored key is protected, as the page shows it. */
export type Protection = "passphrase" | "passkey"

const hex = (bytes: Uint8Array): string => `0x${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`
const unhex = (text: string): Uint8Array => {
  const clean = text.replace(/^0x/, "")
  const bytes = new Uint8Array(clean.length / 2)
  for (let i = 0; i < bytes.length; i++) bytes[i] = Number.parseInt(clean.slice(i * 2, i * 2 + 2), 16)
  return bytes
}

/** Why a key could not be read, imported or unlocked; messages never quote the key. */
export class KeyProblem extends Error {
  override readonly name = "KeyProblem"
}

/**
 * Reads a key file's text (`{"account_id","secret_key","public_key"}`), checking that
 * the public key is the secret key's and that it is this account's.
 */
export const parseKeyFile = (text: string, accountId: string): EncryptionKey.KeyPair => {
  let record: unknown
  try {
    record = JSON.parse(text)
  } catch {
    throw new KeyProblem("This file is not a key file (it is not JSON).")
  }
  if (typeof record !== "object" || record === null) throw new KeyProblem("This file is not a key file.")
  const fields = record as Record<string, unknown>
  const secret = fields["secret_key"]
  const publicKey = fields["public_key"]
  if (typeof secret !== "string" || !/^0x[0-9a-fA-F]{64}$/.test(secret)) throw new KeyProblem("The key file's secret_key is not 32 bytes of hex.")
  if (typeof publicKey !== "string" || !/^0x[0-9a-fA-F]{128}$/.test(publicKey)) throw new KeyProblem("The key file's public_key is not 64 bytes of hex.")
  if (fields["account_id"] !== accountId) throw new KeyProblem("This key file belongs to another account.")
  const keyPair = EncryptionKey.fromSecretKey(unhex(secret))
  if (!keyPair.ok) throw new KeyProblem("The key file's secret key is not a valid key.")
  if (hex(keyPair.value.publicKey).toLowerCase() !== publicKey.toLowerCase()) {
    throw new KeyProblem("The key file's public key does not match its secret key.")
  }
  return keyPair.value
}

/** A key file's text for a key pair, in `pps keygen`'s format, so the holder can back it up. */
export const keyFileText = (accountId: string, keyPair: EncryptionKey.KeyPair): string =>
  `${JSON.stringify({ account_id: accountId, secret_key: hex(keyPair.secretKey), public_key: hex(keyPair.publicKey) }, null, 2)}\n`

export const publicKeyHex = (keyPair: EncryptionKey.KeyPair): string => hex(keyPair.publicKey)

const open = (): Promise<IDBDatabase> =>
  new Promise((resolve, reject) => {
    const request = indexedDB.open(databaseName, 1)
    request.onupgradeneeded = () => request.result.createObjectStore(storeName, { keyPath: "account_id" })
    request.onsuccess = () => resolve(request.result)
    request.onerror = () => reject(new KeyProblem("This browser's storage (IndexedDB) is not available."))
  })

const transact = async <A>(mode: IDBTransactionMode, act: (store: IDBObjectStore) => IDBRequest<A>): Promise<A> => {
  const db = await open()
  try {
    return await new Promise<A>((resolve, reject) => {
      const request = act(db.transaction(storeName, mode).objectStore(storeName))
      request.onsuccess = () => resolve(request.result)
      request.onerror = () => reject(new KeyProblem("This browser's storage refused the key."))
    })
  } finally {
    db.close()
  }
}

const wrappingKey = async (passphrase: string, salt: Uint8Array): Promise<CryptoKey> => {
  const material = await crypto.subtle.importKey("raw", new TextEncoder().encode(passphrase), "PBKDF2", false, ["deriveKey"])
  return crypto.subtle.deriveKey(
    { name: "PBKDF2", hash: "SHA-256", salt: salt as BufferSource, iterations: pbkdf2Iterations },
    material,
    { name: "AES-GCM", length: 256 },
    false,
    ["encrypt", "decrypt"]
  )
}

/** Stores a key pair for the account, sealed under the passphrase (replacing any earlier one). */
/**
 * Refuses a passphrase too short to protect a key (checked before anything is sent, where a key
 * would otherwise exist in memory only).
 */
export const checkPassphrase = (passphrase: string): void => {
  if (passphrase.length < 8) throw new KeyProblem("Choose a passphrase of at least 8 characters.")
}

export const storeKey = async (accountId: string, keyPair: EncryptionKey.KeyPair, passphrase: string): Promise<void> => {
  checkPassphrase(passphrase)
  const salt = crypto.getRandomValues(new Uint8Array(16))
  const { iv, sealed } = await seal(await wrappingKey(passphrase, salt), keyPair)
  const stored: StoredKey = { account_id: accountId, public_key: hex(keyPair.publicKey), protection: "passphrase", salt, iv, sealed_secret: sealed }
  await transact("readwrite", (store) => store.put(stored))
}

/** The stored key's public half and protection, if this browser holds a key for the account. */
export const storedKeyInfo = async (accountId: string): Promise<{ readonly publicKey: string; readonly protection: Protection } | undefined> => {
  const stored = await transact<StoredKey | undefined>("readonly", (store) => store.get(accountId) as IDBRequest<StoredKey | undefined>)
  return stored === undefined ? undefined : { publicKey: stored.public_key, protection: stored.protection ?? "passphrase" }
}

const seal = async (key: CryptoKey, keyPair: EncryptionKey.KeyPair) => {
  const iv = crypto.getRandomValues(new Uint8Array(12))
  const sealed = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv: iv as BufferSource }, key, keyPair.secretKey as BufferSource))
  return { iv, sealed }
}

const open_ = async (key: CryptoKey, stored: StoredKey, wrong: string): Promise<EncryptionKey.KeyPair> => {
  let secret: Uint8Array
  try {
    secret = new Uint8Array(await crypto.subtle.decrypt({ name: "AES-GCM", iv: stored.iv as BufferSource }, key, stored.sealed_secret as BufferSource))
  } catch {
    throw new KeyProblem(wrong)
  }
  const keyPair = EncryptionKey.fromSecretKey(secret)
  if (!keyPair.ok) throw new KeyProblem("The stored key is damaged; import the key file again.")
  return keyPair.value
}

const b64url = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")
const unb64url = (text: string) => Uint8Array.from(atob(text.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0))

/**
 * Evaluates the passkey's PRF on `salt` (the authenticator asks for the person's
 * touch or PIN) and derives the wrapping key from its output.
 */
const passkeyWrappingKey = async (salt: Uint8Array, credentialId: string | undefined) => {
  const assertion = await navigator.credentials.get({
    publicKey: {
      // A challenge of our own: the assertion proves nothing to anyone, it only carries the PRF output.
      challenge: crypto.getRandomValues(new Uint8Array(32)),
      rpId: globalThis.location.hostname,
      userVerification: "required",
      ...(credentialId === undefined ? {} : { allowCredentials: [{ type: "public-key" as const, id: unb64url(credentialId) as BufferSource }] }),
      extensions: { prf: { eval: { first: salt as BufferSource } } }
    }
  })
  if (!(assertion instanceof PublicKeyCredential)) throw new KeyProblem("No passkey answered.")
  const output = assertion.getClientExtensionResults().prf?.results?.first
  if (output === undefined) throw new KeyProblem("This browser or passkey does not offer the PRF extension; protect the key with a passphrase instead.")
  const material = await crypto.subtle.importKey("raw", output, "HKDF", false, ["deriveKey"])
  const key = await crypto.subtle.deriveKey(
    { name: "HKDF", hash: "SHA-256", salt: new Uint8Array(0), info: new TextEncoder().encode("pps/dashboard/key-wrap/v1") },
    material,
    { name: "AES-GCM", length: 256 },
    false,
    ["encrypt", "decrypt"]
  )
  return { key, credentialId: b64url(new Uint8Array(assertion.rawId)) }
}

/** Stores a key pair for the account, sealed under the PRF output of one of the holder's passkeys. */
export const storeKeyUnderPasskey = async (accountId: string, keyPair: EncryptionKey.KeyPair): Promise<void> => {
  const salt = crypto.getRandomValues(new Uint8Array(32))
  const { key, credentialId } = await passkeyWrappingKey(salt, undefined)
  const { iv, sealed } = await seal(key, keyPair)
  const stored: StoredKey = { account_id: accountId, public_key: hex(keyPair.publicKey), protection: "passkey", salt, iv, sealed_secret: sealed, credential_id: credentialId }
  await transact("readwrite", (store) => store.put(stored))
}

/** Opens the stored key with the passkey that sealed it. */
export const unlockKeyWithPasskey = async (accountId: string): Promise<EncryptionKey.KeyPair> => {
  const stored = await transact<StoredKey | undefined>("readonly", (store) => store.get(accountId) as IDBRequest<StoredKey | undefined>)
  if (stored === undefined || stored.protection !== "passkey") throw new KeyProblem("This browser holds no passkey-protected key for this account.")
  const { key } = await passkeyWrappingKey(stored.salt, stored.credential_id)
  return open_(key, stored, "This passkey did not open the key; use the passkey that protected it.")
}

/** Opens the stored key with the passphrase. */
export const unlockKey = async (accountId: string, passphrase: string): Promise<EncryptionKey.KeyPair> => {
  const stored = await transact<StoredKey | undefined>("readonly", (store) => store.get(accountId) as IDBRequest<StoredKey | undefined>)
  if (stored === undefined) throw new KeyProblem("This browser holds no key for this account.")
  if (stored.protection === "passkey") throw new KeyProblem("This key is protected by a passkey: unlock it with the passkey.")
  return open_(await wrappingKey(passphrase, stored.salt), stored, "Wrong passphrase.")
}

/** Removes the account's key from this browser. */
export const forgetKey = async (accountId: string): Promise<void> => {
  await transact("readwrite", (store) => store.delete(accountId))
}
