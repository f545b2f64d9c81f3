/**
 * Authenticated encryption of secrets at rest (custodial wallet keys, the embedded chain's keys,
 * webhook secrets, held transactions' public amounts) under the key-encryption key (KEK) from
 * configuration (`WALLET_KEK`).
 *
 * AES-256-GCM from the platform (node:crypto), a fresh 96-bit nonce per seal, and associated data
 * that binds each ciphertext to its row (e.g. the account id), so a sealed value copied to another
 * row does not open.
 *
 * Layouts:
 * - version 2 (every seal since D54): `2 || kek_id (8) || nonce (12) || ciphertext || tag (16)`,
 *   `kek_id` naming the KEK it is sealed under (`kekIdOf`), so a value is opened with its own key
 *   and a rotation knows, without opening anything, which values are still under an older one;
 * - version 1 (before D54): `1 || nonce (12) || ciphertext || tag (16)`: opened by trying the
 *   current KEK, then the accepted ones.
 *
 * D54: the box holds a key ring, the current KEK (which seals) and the accepted ones
 * (`WALLET_KEK_ACCEPTED`, which only open), so a KEK is rotated with every node running:
 * `admin/Reseal.ts` re-seals each value under the current KEK.
 *
 * @since 0.1.0
 */
import { createCipheriv, createDecipheriv, createHash, createSecretKey, type KeyObject, randomBytes } from "node:crypto"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { Secrets } from "./Secrets.ts"

const versionKeyed = 2
const versionLegacy = 1
const kekIdBytes = 8
const nonceBytes = 12
const tagBytes = 16

/**
 * A KEK's public name: the first 8 bytes of SHA-256 over a domain tag and the key, in hex. It says
 * which key a value is sealed under and is safe to print (it reveals nothing usable about the key).
 *
 * @since 0.12.0
 * @category constructors
 */
export const kekIdOf = (kek: Uint8Array): string =>
  createHash("sha256").update("pps/wallet-kek-id/v1").update(kek).digest().subarray(0, kekIdBytes).toString("hex")

/**
 * The KEK a version-2 value names; None for a version-1 value (or one too short to be either).
 *
 * @since 0.12.0
 * @category getters
 */
export const sealedKekId = (sealed: Uint8Array): Option.Option<string> =>
  sealed[0] === versionKeyed && sealed.length >= 1 + kekIdBytes + nonceBytes + tagBytes
    ? Option.some(Buffer.from(sealed.subarray(1, 1 + kekIdBytes)).toString("hex"))
    : Option.none()

/**
 * The sealed value did not open: wrong key, wrong associated data, or tampered.
 *
 * @since 0.1.0
 * @category errors
 */
export class SecretBoxOpenError extends Error {
  override readonly name = "SecretBoxOpenError"
}

/**
 * @since 0.12.0
 * @category models
 */
export interface SecretBoxShape {
  readonly seal: (plaintext: Uint8Array, associatedData: string) => Uint8Array
  readonly open: (sealed: Uint8Array, associatedData: string) => Effect.Effect<Uint8Array, SecretBoxOpenError>
  /** The id of the KEK that seals (`kekIdOf`). */
  readonly currentKekId: string
  /** The ids of the accepted KEKs, which open but never seal. */
  readonly acceptedKekIds: ReadonlyArray<string>
  /** Whether a value is sealed under the current KEK already (version 2 naming it). */
  readonly isCurrent: (sealed: Uint8Array) => boolean
}

const sealUnder = (kek: KeyObject, kekId: string, plaintext: Uint8Array, associatedData: string): Uint8Array => {
  const nonce = randomBytes(nonceBytes)
  const cipher = createCipheriv("aes-256-gcm", kek, nonce)
  cipher.setAAD(Buffer.from(associatedData, "utf8"))
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()])
  return new Uint8Array(Buffer.concat([Buffer.of(versionKeyed), Buffer.from(kekId, "hex"), nonce, body, cipher.getAuthTag()]))
}

/** Opens `nonce || body || tag` under one key, or throws. */
const openUnder = (kek: KeyObject, framed: Uint8Array, associatedData: string): Uint8Array => {
  const nonce = framed.subarray(0, nonceBytes)
  const body = framed.subarray(nonceBytes, framed.length - tagBytes)
  const tag = framed.subarray(framed.length - tagBytes)
  const decipher = createDecipheriv("aes-256-gcm", kek, nonce)
  decipher.setAAD(Buffer.from(associatedData, "utf8"))
  decipher.setAuthTag(tag)
  return new Uint8Array(Buffer.concat([decipher.update(body), decipher.final()]))
}

/** Tries each key in turn (version 1 names none). */
const openWithAny = (keys: ReadonlyArray<KeyObject>, framed: Uint8Array, associatedData: string): Uint8Array => {
  for (const kek of keys) {
    try {
      return openUnder(kek, framed, associatedData)
    } catch {
      // the next key
    }
  }
  throw new SecretBoxOpenError("sealed value did not open")
}

/**
 * A box over a key ring: `current` seals, every key opens what names it.
 *
 * @since 0.12.0
 * @category constructors
 */
export const makeSecretBox = (current: Uint8Array, accepted: ReadonlyArray<Uint8Array>): SecretBoxShape => {
  const currentKekId = kekIdOf(current)
  // KeyObjects: Node checks and copies raw key bytes on every cipher it makes (37 µs against
  // 4 µs measured on the 2-vCPU VM), and every transfer's co-signature opens a wallet key.
  const currentKey = createSecretKey(current)
  const ring = new Map<string, KeyObject>([[currentKekId, currentKey]])
  for (const kek of accepted) if (!ring.has(kekIdOf(kek))) ring.set(kekIdOf(kek), createSecretKey(kek))
  const openSync = (sealed: Uint8Array, associatedData: string): Uint8Array => {
    if (sealed[0] === versionLegacy && sealed.length >= 1 + nonceBytes + tagBytes) {
      return openWithAny([...ring.values()], sealed.subarray(1), associatedData)
    }
    const named = sealedKekId(sealed)
    if (Option.isNone(named)) throw new SecretBoxOpenError("unknown sealed value format")
    const kek = ring.get(named.value)
    if (kek === undefined) throw new SecretBoxOpenError(`sealed under KEK ${named.value}, which is neither WALLET_KEK nor accepted`)
    return openUnder(kek, sealed.subarray(1 + kekIdBytes), associatedData)
  }
  return {
    seal: (plaintext, associatedData) => sealUnder(currentKey, currentKekId, plaintext, associatedData),
    open: (sealed, associatedData) =>
      Effect.try({
        try: () => openSync(sealed, associatedData),
        catch: (cause) => cause instanceof SecretBoxOpenError ? cause : new SecretBoxOpenError("sealed value did not open")
      }),
    currentKekId,
    acceptedKekIds: [...ring.keys()].filter((id) => id !== currentKekId),
    isCurrent: (sealed) => Option.getOrUndefined(sealedKekId(sealed)) === currentKekId
  }
}

/**
 * Seal and open secrets at rest.
 *
 * @since 0.1.0
 * @category services
 */
export class SecretBox extends Context.Service<SecretBox, SecretBoxShape>()("server/platform/SecretBox") {
  static readonly layer = Layer.effect(
    SecretBox,
    Effect.gen(function*() {
      const secrets = yield* Secrets
      return SecretBox.of(makeSecretBox(Redacted.value(secrets.walletKek), secrets.walletKekAccepted.map(Redacted.value)))
    })
  )
}
