/**
 * The file that holds an account's encryption key on the holder's machine.
 *
 * It is one JSON object, `{"account_id","secret_key","public_key"}` (keys as
 * 0x-prefixed hex: the 32-byte secret scalar and the 64-byte public point), in
 * `~/.pps/<account_id>.key` by default, with mode 0600 in a directory created
 * with mode 0700. The secret key exists nowhere else: losing the file loses
 * the ability to read the account's amounts, so back it up like a wallet seed.
 *
 * Writing never replaces an existing file unless asked to, and then does so
 * atomically (a temporary file renamed over the old one), so a crash leaves
 * either the old key or the new one, never half of one. Reading refuses a file
 * that others can read (as ssh does with private keys), and a file whose
 * public key is not the one its secret key gives.
 *
 * Node only (it uses node:fs).
 *
 * @since 0.1.0
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { EncryptionKey } from "@pps/crypto"

/**
 * An account's key as stored.
 *
 * @since 0.1.0
 * @category models
 */
export interface KeyFile {
  readonly accountId: string
  readonly keyPair: EncryptionKey.KeyPair
}

/**
 * Why a key file could not be written or read.
 *
 * @since 0.1.0
 * @category models
 */
export type KeyFileFailure = "exists" | "missing" | "malformed" | "permissions_too_open" | "unwritable" | "unreadable"

/**
 * A key file could not be written or read. Messages name the file, never
 * anything in it.
 *
 * @since 0.1.0
 * @category errors
 */
export class KeyFileError extends Error {
  override readonly name = "KeyFileError"
  readonly reason: KeyFileFailure
  constructor(reason: KeyFileFailure, message: string, options?: { readonly cause?: unknown }) {
    super(message, options)
    this.reason = reason
  }
}

/**
 * Mode of a key file: read and write for its owner only.
 *
 * @since 0.1.0
 * @category constants
 */
export const fileMode = 0o600

/**
 * Mode of the directory created for key files.
 *
 * @since 0.1.0
 * @category constants
 */
export const directoryMode = 0o700

// Account ids are opaque (D3) but end up in a file name: allow nothing that could leave the directory.
const accountIdPattern = /^[A-Za-z0-9_-]{1,64}$/
const secretKeyPattern = /^0x[0-9a-f]{64}$/
const publicKeyPattern = /^0x[0-9a-f]{128}$/

const hex = (bytes: Uint8Array) => `0x${Buffer.from(bytes).toString("hex")}`
const bytes = (text: string) => Uint8Array.from(Buffer.from(text.slice(2), "hex"))

/**
 * `~/.pps/<account_id>.key`, or the same under another home directory.
 *
 * @since 0.1.0
 * @category constructors
 */
export const defaultPath = (accountId: string, homeDirectory: string = os.homedir()): string => {
  if (!accountIdPattern.test(accountId)) throw new KeyFileError("malformed", "the account id is not a valid file name")
  return path.join(homeDirectory, ".pps", `${accountId}.key`)
}

/**
 * The file's JSON text.
 *
 * @since 0.1.0
 * @category encoding
 */
export const encode = (keyFile: KeyFile): string =>
  JSON.stringify({
    account_id: keyFile.accountId,
    secret_key: hex(keyFile.keyPair.secretKey),
    public_key: hex(keyFile.keyPair.publicKey)
  }) + "\n"

/**
 * Parses a key file's text; `source` names it in error messages.
 *
 * @since 0.1.0
 * @category encoding
 */
export const decode = (text: string, source: string): KeyFile => {
  const malformed = (detail: string) => new KeyFileError("malformed", `${source} is not a key file: ${detail}`)
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    throw malformed("not JSON")
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw malformed("not a JSON object")
  const record = parsed as Record<string, unknown>
  const accountId = record["account_id"]
  const secretKey = record["secret_key"]
  const publicKey = record["public_key"]
  if (typeof accountId !== "string" || !accountIdPattern.test(accountId)) throw malformed("`account_id` is missing or invalid")
  if (typeof secretKey !== "string" || !secretKeyPattern.test(secretKey)) throw malformed("`secret_key` is not 32 bytes of 0x hex")
  if (typeof publicKey !== "string" || !publicKeyPattern.test(publicKey)) throw malformed("`public_key` is not 64 bytes of 0x hex")
  const keyPair = EncryptionKey.fromSecretKey(bytes(secretKey))
  if (!keyPair.ok) throw malformed("`secret_key` is not a valid secret scalar")
  if (hex(keyPair.value.publicKey) !== publicKey) throw malformed("`public_key` is not the public key of `secret_key`")
  return { accountId, keyPair: keyPair.value }
}

const writeNew = (filePath: string, text: string): void => {
  const descriptor = fs.openSync(filePath, "wx", fileMode)
  try {
    // The mode given to open is narrowed by the umask; set it exactly.
    fs.fchmodSync(descriptor, fileMode)
    fs.writeFileSync(descriptor, text)
    fs.fsyncSync(descriptor)
  } finally {
    fs.closeSync(descriptor)
  }
}

/**
 * Writes a key file, creating its directory (mode 0700) when missing. Fails
 * with `exists` when the file is there, unless `overwrite` is set.
 *
 * @since 0.1.0
 * @category writing
 */
export const write = (filePath: string, keyFile: KeyFile, options: { readonly overwrite: boolean }): void => {
  const text = encode(keyFile)
  try {
    fs.mkdirSync(path.dirname(filePath), { recursive: true, mode: directoryMode })
    if (!options.overwrite) {
      writeNew(filePath, text)
      return
    }
    const temporary = `${filePath}.${randomBytes(6).toString("hex")}.tmp`
    try {
      writeNew(temporary, text)
      fs.renameSync(temporary, filePath)
    } catch (cause) {
      fs.rmSync(temporary, { force: true })
      throw cause
    }
  } catch (cause) {
    if (cause instanceof Error && "code" in cause && cause.code === "EEXIST") {
      throw new KeyFileError("exists", `${filePath} exists already and may hold the only copy of a key`)
    }
    throw new KeyFileError("unwritable", `cannot write ${filePath}: ${cause instanceof Error ? cause.message : String(cause)}`, {
      cause
    })
  }
}

/**
 * Reads and checks a key file.
 *
 * @since 0.1.0
 * @category reading
 */
export const read = (filePath: string): KeyFile => {
  let text: string
  try {
    // Windows has no Unix modes to check.
    if (process.platform !== "win32" && (fs.statSync(filePath).mode & 0o077) !== 0) {
      throw new KeyFileError("permissions_too_open", `${filePath} is readable by others; run: chmod 600 ${filePath}`)
    }
    text = fs.readFileSync(filePath, "utf8")
  } catch (cause) {
    if (cause instanceof KeyFileError) throw cause
    if (cause instanceof Error && "code" in cause && cause.code === "ENOENT") {
      throw new KeyFileError("missing", `no key file at ${filePath}`)
    }
    throw new KeyFileError("unreadable", `cannot read ${filePath}: ${cause instanceof Error ? cause.message : String(cause)}`, {
      cause
    })
  }
  return decode(text, filePath)
}
