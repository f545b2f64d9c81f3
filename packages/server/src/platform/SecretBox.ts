/**
 * Authenticated encryption of secrets at rest (custodial wallet keys, later
 * webhook secrets) under the key-encryption key (KEK) from configuration.
 *
 * AES-256-GCM from the platform (node:crypto), a fresh 96-bit nonce per seal, and
 * associated data that binds each ciphertext to its row (e.g. the account id), so
 * a sealed value copied to another row does not open. Layout:
 * `version (1 byte = 1) || nonce (12) || ciphertext || tag (16)`.
 *
 * @since 0.1.0
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto"
import { Context, Effect, Layer, Redacted } from "effect"
import { Secrets } from "./Secrets.ts"

const version = 1
const nonceBytes = 12
const tagBytes = 16

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
 * Seal and open secrets at rest.
 *
 * @since 0.1.0
 * @category services
 */
export class SecretBox extends Context.Service<SecretBox, {
  readonly seal: (plaintext: Uint8Array, associatedData: string) => Uint8Array
  readonly open: (sealed: Uint8Array, associatedData: string) => Effect.Effect<Uint8Array, SecretBoxOpenError>
}>()("server/platform/SecretBox") {
  static readonly layer = Layer.effect(
    SecretBox,
    Effect.gen(function*() {
      const secrets = yield* Secrets
      const key = Redacted.value(secrets.walletKek)
      return SecretBox.of({
        seal: (plaintext, associatedData) => {
          const nonce = randomBytes(nonceBytes)
          const cipher = createCipheriv("aes-256-gcm", key, nonce)
          cipher.setAAD(Buffer.from(associatedData, "utf8"))
          const body = Buffer.concat([cipher.update(plaintext), cipher.final()])
          return new Uint8Array(Buffer.concat([Buffer.of(version), nonce, body, cipher.getAuthTag()]))
        },
        open: (sealed, associatedData) =>
          Effect.try({
            try: () => {
              if (sealed.length < 1 + nonceBytes + tagBytes || sealed[0] !== version) {
                throw new SecretBoxOpenError("unknown sealed value format")
              }
              const nonce = sealed.subarray(1, 1 + nonceBytes)
              const body = sealed.subarray(1 + nonceBytes, sealed.length - tagBytes)
              const tag = sealed.subarray(sealed.length - tagBytes)
              const decipher = createDecipheriv("aes-256-gcm", key, nonce)
              decipher.setAAD(Buffer.from(associatedData, "utf8"))
              decipher.setAuthTag(tag)
              return new Uint8Array(Buffer.concat([decipher.update(body), decipher.final()]))
            },
            catch: () => new SecretBoxOpenError("sealed value did not open")
          })
      })
    })
  )
}
