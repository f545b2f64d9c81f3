/**
 * The server's own secrets: the API key pepper, the wallet key-encryption key
 * and the admin token.
 *
 * Distributed mode (`DATABASE_URL` set) requires all three from configuration,
 * because every node must share them. The embedded mode generates whatever is
 * not configured once, from the CSPRNG, into `DATA_DIR/secrets.json` (mode
 * 0600), and reuses it on every later start.
 *
 * @since 0.1.0
 */
import * as path from "node:path"
import { Context, Data, Effect, Layer, Option, Redacted } from "effect"
import { AppConfig } from "../config/AppConfig.ts"
import { DataDir } from "./DataDir.ts"
import * as SecretsFileModule from "./SecretsFile.ts"
import type { SecretsFile } from "./SecretsFile.ts"

/**
 * A secret is missing or malformed.
 *
 * @since 0.1.0
 * @category errors
 */
export class SecretsError extends Data.TaggedError("SecretsError")<{ readonly message: string }> {}

/**
 * @since 0.1.0
 * @category models
 */
export interface SecretsShape {
  /** HMAC-SHA256 key under which API keys are stored (>= 32 bytes). */
  readonly apiKeyPepper: Redacted.Redacted<Uint8Array>
  /** AES-256-GCM key sealing custodial wallet keys at rest (exactly 32 bytes). */
  readonly walletKek: Redacted.Redacted<Uint8Array>
  /** D54: further KEKs that open what they sealed but never seal (during a rotation). */
  readonly walletKekAccepted: ReadonlyArray<Redacted.Redacted<Uint8Array>>
  /** Bearer token of the admin listener. */
  readonly adminToken: Redacted.Redacted<string>
}

/**
 * The secrets file of the embedded mode.
 *
 * @since 0.1.0
 * @category constants
 */
export const secretsFileName = SecretsFileModule.secretsFileName

const pepperBytesMin = 32
const adminTokenLengthMin = 32

const decodeKek = (text: string): Option.Option<Uint8Array> => Option.fromUndefinedOr(SecretsFileModule.decodeKekText(text))

const readOrCreateFile = (file: string): Effect.Effect<SecretsFile, SecretsError> =>
  Effect.try({
    try: () => SecretsFileModule.readOrCreateSecretsFile(file),
    catch: (cause) => new SecretsError({ message: `cannot read or create ${file}: ${String(cause)}` })
  })

/** D54: the accepted KEKs, comma-separated base64 (configuration), or the file's list. */
const acceptedKeks = (texts: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<Redacted.Redacted<Uint8Array>>, SecretsError> =>
  Effect.forEach(texts.filter((text) => text.trim() !== ""), (text) =>
    Option.match(decodeKek(text), {
      onSome: (kek) => Effect.succeed(Redacted.make(kek)),
      onNone: () => Effect.fail(new SecretsError({ message: "WALLET_KEK_ACCEPTED must list 32-byte keys, base64-encoded, comma-separated" }))
    }))

/**
 * @since 0.1.0
 * @category services
 */
export class Secrets extends Context.Service<Secrets, SecretsShape>()("server/platform/Secrets") {
  static readonly layer = Layer.effect(
    Secrets,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const embedded = Option.isNone(config.databaseUrl)
      const needFile = embedded &&
        (Option.isNone(config.apiKeyPepper) || Option.isNone(config.walletKek) || Option.isNone(config.adminToken))
      const file = needFile
        ? Option.some(yield* readOrCreateFile(path.join((yield* DataDir).path, secretsFileName)))
        : Option.none<SecretsFile>()
      const pick = (configured: Option.Option<Redacted.Redacted<string>>, fromFile: (f: SecretsFile) => string, name: string) =>
        Option.match(configured, {
          onSome: (value) => Effect.succeed(Redacted.value(value)),
          onNone: () =>
            Option.match(file, {
              onSome: (f) => Effect.succeed(fromFile(f)),
              onNone: () =>
                Effect.fail(new SecretsError({ message: `${name} is required when DATABASE_URL is set (every node must share it)` }))
            })
        })
      const pepperText = yield* pick(config.apiKeyPepper, (f) => f.api_key_pepper, "API_KEY_PEPPER")
      const kekText = yield* pick(config.walletKek, (f) => f.wallet_kek, "WALLET_KEK")
      const adminToken = yield* pick(config.adminToken, (f) => f.admin_token, "ADMIN_TOKEN")
      const pepper = new Uint8Array(Buffer.from(pepperText, "utf8"))
      if (pepper.length < pepperBytesMin) {
        return yield* new SecretsError({ message: `API_KEY_PEPPER must be at least ${pepperBytesMin} bytes` })
      }
      const kek = yield* Option.match(decodeKek(kekText), {
        onSome: Effect.succeed,
        onNone: () => Effect.fail(new SecretsError({ message: "WALLET_KEK must be 32 bytes, base64-encoded" }))
      })
      const accepted = yield* acceptedKeks(Option.match(config.walletKekAccepted, {
        onSome: (text) => Redacted.value(text).split(","),
        onNone: () => Option.match(file, { onSome: (f) => f.wallet_kek_accepted ?? [], onNone: () => [] })
      }))
      if (adminToken.length < adminTokenLengthMin) {
        return yield* new SecretsError({ message: `ADMIN_TOKEN must be at least ${adminTokenLengthMin} characters` })
      }
      return {
        apiKeyPepper: Redacted.make(pepper),
        walletKek: Redacted.make(kek),
        walletKekAccepted: accepted,
        adminToken: Redacted.make(adminToken)
      }
    })
  )
}
