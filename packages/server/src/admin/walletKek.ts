/**
 * `npm run -s admin -- wallet-kek ...` (D54): the operator rotates `WALLET_KEK` and backs it up.
 * Run on the operator's machine; loaded by `cli.ts` for these commands only.
 *
 * - `stage` (embedded mode): a fresh KEK becomes `wallet_kek` in `DATA_DIR/secrets.json` and the
 *   old one moves to `wallet_kek_accepted` (it still opens, never seals). Distributed mode sets
 *   `WALLET_KEK` / `WALLET_KEK_ACCEPTED` in its configuration instead (docs/operations.md).
 * - `rotate` (after the restart): the running server re-seals every value under its current KEK
 *   (`Reseal.ts`), resumably; `status` counts what is left.
 * - `finish` (embedded mode): once the server says nothing is left under another KEK, the accepted
 *   KEKs are dropped from the file.
 * - `backup --out FILE`: the KEK wrapped under a passphrase (scrypt, then AES-256-GCM), beside
 *   every custodial wallet as sealed under it, each checked to open to its address before the file
 *   is written. The file alone opens nothing; with the passphrase it gives back the KEK.
 * - `restore --in FILE`: unwraps the KEK, checks it opens every wallet of the backup to its
 *   address, and installs it (embedded: as `wallet_kek`, whatever key was there kept as accepted;
 *   `--print`: on stdout for a distributed configuration).
 *
 * The passphrase comes from `PPS_BACKUP_PASSPHRASE` (at least 16 characters), never a flag, so it
 * stays out of shell history and process listings.
 *
 * @since 0.12.0
 */
import { createCipheriv, createDecipheriv, randomBytes, scryptSync } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import * as CommandLine from "@pps/sdk/CommandLine"
import { Data, DateTime, Effect, Schema } from "effect"
import { bytesToHex } from "viem"
import { privateKeyToAddress } from "viem/accounts"
import { walletKeyBinding } from "../accounts/Accounts.ts"
import { kekIdOf, makeSecretBox } from "../platform/SecretBox.ts"
import {
  decodeKekText,
  generateKek,
  readSecretsFile,
  readOrCreateSecretsFile,
  type SecretsFile,
  secretsFileName,
  writeSecretsFile
} from "../platform/SecretsFile.ts"

/**
 * A wallet-kek step failed; the message says why and what to do.
 *
 * @since 0.12.0
 * @category errors
 */
export class WalletKekError extends Data.TaggedError("WalletKekError")<{ readonly message: string }> {}

const fail = (message: string) => Effect.fail(new WalletKekError({ message }))

/** The backup file's format name, also the wrap's associated data prefix. */
const backupFormat = "pps-wallet-kek-backup/v1"
/** scrypt's cost: 2^17 × 8 × 128 B = 128 MiB and about half a second a try, per guess as well. */
const scryptCost = { N: 2 ** 17, r: 8, p: 1, maxmem: 256 * 1024 * 1024 } as const
const passphraseLengthMin = 16
const nonceBytes = 12
const tagBytes = 16

/**
 * @since 0.12.0
 * @category models
 */
export const BackupFile = Schema.Struct({
  format: Schema.Literal(backupFormat),
  created_at: Schema.String,
  kek_id: Schema.String,
  kdf: Schema.Struct({ name: Schema.Literal("scrypt"), N: Schema.Int, r: Schema.Int, p: Schema.Int, salt: Schema.String }),
  wrapped_kek: Schema.String,
  wallets: Schema.Array(Schema.Struct({ account_id: Schema.String, address: Schema.String, wallet_key_sealed: Schema.String }))
})
export type BackupFile = typeof BackupFile.Type

/** The sealed wallets as the admin API lists them (`GET /admin/wallet-kek/sealed-wallets`). */
const SealedWallets = Schema.Struct({ kek_id: Schema.String, wallets: BackupFile.fields.wallets })

/** A variable of the command's environment (the invocation's, so an in-process run sees its own). */
const variable = (name: string) => CommandLine.Invocation.use((invocation) => Effect.succeed(invocation.env[name]))

const passphrase = Effect.gen(function*() {
  const value = yield* variable("PPS_BACKUP_PASSPHRASE")
  if (value === undefined || value.length < passphraseLengthMin) {
    return yield* fail(`set PPS_BACKUP_PASSPHRASE to the backup's passphrase (at least ${passphraseLengthMin} characters)`)
  }
  return value
})

/** `DATA_DIR/secrets.json`, relative paths read from the command's working directory. */
const secretsPath = CommandLine.Invocation.use((invocation) =>
  Effect.succeed(path.join(path.resolve(invocation.cwd, invocation.env["DATA_DIR"] ?? "./.data"), secretsFileName)))

const tryIo = <A>(what: string, run: () => A) =>
  Effect.try({ try: run, catch: (cause) => new WalletKekError({ message: `${what}: ${cause instanceof Error ? cause.message : String(cause)}` }) })

/** Embedded mode only: the secrets file, refused when `WALLET_KEK` is configured (the file's is then unused). */
const embeddedSecrets = (step: string) =>
  Effect.gen(function*() {
    if ((yield* variable("WALLET_KEK")) !== undefined) {
      return yield* fail(
        `wallet-kek ${step} edits the embedded mode's ${secretsFileName}; WALLET_KEK is set, so change WALLET_KEK and WALLET_KEK_ACCEPTED in the configuration instead (docs/operations.md)`
      )
    }
    const file = yield* secretsPath
    const found = yield* tryIo(`cannot read ${file}`, () => readSecretsFile(file))
    if (found === undefined) return yield* fail(`no ${file}: set DATA_DIR to the embedded server's data directory`)
    return { file, secrets: found }
  })

const kekOf = (text: string, where: string) => {
  const kek = decodeKekText(text)
  return kek === undefined ? fail(`${where} is not a 32-byte key in base64`) : Effect.succeed(kek)
}

/**
 * `wallet-kek stage`: a fresh KEK seals from the next start; the old one still opens.
 *
 * @since 0.12.0
 * @category steps
 */
export const stage = Effect.gen(function*() {
  const { file, secrets } = yield* embeddedSecrets("stage")
  if ((secrets.wallet_kek_accepted ?? []).length > 0) {
    return yield* fail(
      `a rotation is under way (${file} lists accepted KEKs): finish it first with wallet-kek rotate, then wallet-kek finish`
    )
  }
  const old = yield* kekOf(secrets.wallet_kek, `wallet_kek in ${file}`)
  const next = generateKek()
  yield* tryIo(`cannot write ${file}`, () => writeSecretsFile(file, { ...secrets, wallet_kek: next, wallet_kek_accepted: [secrets.wallet_kek] }))
  return {
    kek_id: kekIdOf(yield* kekOf(next, "the new KEK")),
    accepted_kek_ids: [kekIdOf(old)],
    next_step: "restart the server, then run wallet-kek rotate"
  }
})

/**
 * `wallet-kek finish`: drops the accepted KEKs once the server (its `status`) reports nothing left
 * under them and seals under the file's KEK.
 *
 * @since 0.12.0
 * @category steps
 */
export const finish = (status: { readonly kek_id: string; readonly remaining: number }) =>
  Effect.gen(function*() {
    const { file, secrets } = yield* embeddedSecrets("finish")
    const current = kekIdOf(yield* kekOf(secrets.wallet_kek, `wallet_kek in ${file}`))
    if (status.kek_id !== current) {
      return yield* fail(`the server seals under KEK ${status.kek_id}, ${file} names ${current}: restart the server first`)
    }
    if (status.remaining > 0) {
      return yield* fail(`${status.remaining} values are still sealed under another KEK: run wallet-kek rotate first`)
    }
    const dropped = yield* Effect.forEach(secrets.wallet_kek_accepted ?? [], (text) => kekOf(text, `an accepted KEK in ${file}`))
    const { wallet_kek_accepted: _dropped, ...kept } = secrets
    yield* tryIo(`cannot write ${file}`, () => writeSecretsFile(file, kept))
    return { kek_id: current, dropped_kek_ids: dropped.map(kekIdOf) }
  })

/** Every wallet opens under the KEK and gives the address recorded beside it. */
const checkWallets = (kek: Uint8Array, wallets: BackupFile["wallets"]) => {
  const box = makeSecretBox(kek, [])
  return Effect.forEach(wallets, (wallet) =>
    box.open(new Uint8Array(Buffer.from(wallet.wallet_key_sealed, "base64")), walletKeyBinding(wallet.account_id)).pipe(
      Effect.mapError(() => new WalletKekError({ message: `the wallet of ${wallet.account_id} does not open under KEK ${kekIdOf(kek)}` })),
      Effect.flatMap((key) =>
        privateKeyToAddress(bytesToHex(key)).toLowerCase() === wallet.address.toLowerCase()
          ? Effect.void
          : fail(`the wallet of ${wallet.account_id} opens to another address than ${wallet.address}`)
      )
    ), { discard: true })
}

const wrapKey = (secret: string, salt: Uint8Array) => scryptSync(secret, salt, 32, scryptCost)

/** The KEK configured here: `WALLET_KEK`, else the embedded data directory's file. */
const localKek = Effect.gen(function*() {
  const configured = yield* variable("WALLET_KEK")
  if (configured !== undefined) return yield* kekOf(configured, "WALLET_KEK")
  const { file, secrets } = yield* embeddedSecrets("backup")
  return yield* kekOf(secrets.wallet_kek, `wallet_kek in ${file}`)
})

/**
 * `wallet-kek backup --out FILE`: refuses unless every wallet the server lists is sealed under the
 * KEK configured here and opens to its address.
 *
 * @since 0.12.0
 * @category steps
 */
export const backup = (out: string, answer: unknown) =>
  Effect.gen(function*() {
    const sealed = yield* Schema.decodeUnknownEffect(SealedWallets)(answer).pipe(
      Effect.mapError(() => new WalletKekError({ message: "the server's list of sealed wallets is not what this command expects" }))
    )
    const secret = yield* passphrase
    const kek = yield* localKek
    const kekId = kekIdOf(kek)
    if (sealed.kek_id !== kekId) {
      return yield* fail(`the server seals under KEK ${sealed.kek_id}, the KEK here is ${kekId}: back up the server's KEK`)
    }
    yield* checkWallets(kek, sealed.wallets)
    const salt = randomBytes(16)
    const nonce = randomBytes(nonceBytes)
    const cipher = createCipheriv("aes-256-gcm", wrapKey(secret, salt), nonce)
    cipher.setAAD(Buffer.from(`${backupFormat}|${kekId}`, "utf8"))
    const wrapped = Buffer.concat([nonce, cipher.update(kek), cipher.final(), cipher.getAuthTag()])
    const contents: BackupFile = {
      format: backupFormat,
      created_at: DateTime.formatIso(yield* DateTime.now),
      kek_id: kekId,
      kdf: { name: "scrypt", N: scryptCost.N, r: scryptCost.r, p: scryptCost.p, salt: salt.toString("base64") },
      wrapped_kek: wrapped.toString("base64"),
      wallets: sealed.wallets
    }
    const target = path.resolve(yield* CommandLine.Invocation.use((invocation) => Effect.succeed(invocation.cwd)), out)
    yield* tryIo(`cannot write ${target}`, () => fs.writeFileSync(target, JSON.stringify(contents, null, 2) + "\n", { mode: 0o600, flag: "wx" }))
    return { file: target, kek_id: kekId, wallets: sealed.wallets.length }
  })

const unwrap = (contents: BackupFile, secret: string) =>
  tryIo("the passphrase does not open this backup (or the file was altered)", () => {
    const wrapped = Buffer.from(contents.wrapped_kek, "base64")
    const { N, p, r, salt } = contents.kdf
    const key = scryptSync(secret, Buffer.from(salt, "base64"), 32, { N, r, p, maxmem: scryptCost.maxmem })
    const decipher = createDecipheriv("aes-256-gcm", key, wrapped.subarray(0, nonceBytes))
    decipher.setAAD(Buffer.from(`${backupFormat}|${contents.kek_id}`, "utf8"))
    decipher.setAuthTag(wrapped.subarray(wrapped.length - tagBytes))
    return new Uint8Array(Buffer.concat([decipher.update(wrapped.subarray(nonceBytes, wrapped.length - tagBytes)), decipher.final()]))
  })

/** Embedded: the restored KEK seals from the next start; a different key found there still opens. */
const installEmbedded = (kekText: string) =>
  Effect.gen(function*() {
    const file = yield* secretsPath
    const existed = yield* tryIo(`cannot read ${file}`, () => readSecretsFile(file) !== undefined)
    const secrets: SecretsFile = yield* tryIo(`cannot read or create ${file}`, () => readOrCreateSecretsFile(file))
    const others = [secrets.wallet_kek, ...(secrets.wallet_kek_accepted ?? [])].filter((text) => text !== kekText && existed)
    yield* tryIo(`cannot write ${file}`, () =>
      writeSecretsFile(file, { ...secrets, wallet_kek: kekText, ...(others.length > 0 ? { wallet_kek_accepted: others } : {}) }))
    return { file, created: !existed, accepted_kek_count: others.length }
  })

/**
 * `wallet-kek restore --in FILE [--print]`.
 *
 * @since 0.12.0
 * @category steps
 */
export const restore = (input: string, print: boolean) =>
  Effect.gen(function*() {
    const secret = yield* passphrase
    const cwd = yield* CommandLine.Invocation.use((invocation) => Effect.succeed(invocation.cwd))
    const text = yield* tryIo(`cannot read ${input}`, () => fs.readFileSync(path.resolve(cwd, input), "utf8"))
    const parsed = yield* tryIo(`${input} is not JSON`, () => JSON.parse(text) as unknown)
    const contents = yield* Schema.decodeUnknownEffect(BackupFile)(parsed).pipe(
      Effect.mapError(() => new WalletKekError({ message: `${input} is not a ${backupFormat} file` }))
    )
    const kek = yield* unwrap(contents, secret)
    if (kekIdOf(kek) !== contents.kek_id) return yield* fail(`the KEK in ${input} is not the one it names (${contents.kek_id})`)
    yield* checkWallets(kek, contents.wallets)
    const kekText = Buffer.from(kek).toString("base64")
    const base = { kek_id: contents.kek_id, wallets_checked: contents.wallets.length }
    if (print) return { ...base, wallet_kek: kekText }
    if ((yield* variable("WALLET_KEK")) !== undefined) {
      return yield* fail("WALLET_KEK is set: run restore with --print and put the key in the configuration")
    }
    const installed = yield* installEmbedded(kekText)
    return {
      ...base,
      secrets_file: installed.file,
      // A new file holds a new API key pepper: every API key must then be issued again.
      ...(installed.created ? { secrets_file_created: true } : {}),
      next_step: "restart the server"
    }
  })
