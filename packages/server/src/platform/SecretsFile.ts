/**
 * The embedded mode's secrets file, `DATA_DIR/secrets.json` (mode 0600): read by the server at
 * start (`Secrets.ts`) and changed only by the operator's admin command when it rotates or
 * restores `WALLET_KEK` (D54, `admin/walletKek.ts`).
 *
 * Every write replaces the whole file atomically: a temporary file in the same directory,
 * written and synced, renamed over the old one, and the directory synced, so a crash leaves the
 * old file or the new one, never a torn one.
 *
 * @since 0.12.0
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"

/**
 * @since 0.12.0
 * @category constants
 */
export const secretsFileName = "secrets.json"

/**
 * The file's fields; `wallet_kek_accepted` (D54) holds older (or upcoming) KEKs that open sealed
 * values but never seal, during a rotation.
 *
 * @since 0.12.0
 * @category models
 */
export interface SecretsFile {
  readonly api_key_pepper: string
  readonly wallet_kek: string
  readonly admin_token: string
  readonly wallet_kek_accepted?: ReadonlyArray<string>
}

/**
 * The bytes of a KEK.
 *
 * @since 0.12.0
 * @category constants
 */
export const kekBytes = 32

/**
 * A fresh KEK from the CSPRNG, base64.
 *
 * @since 0.12.0
 * @category constructors
 */
export const generateKek = (): string => randomBytes(kekBytes).toString("base64")

/**
 * The 32 bytes of a base64 KEK, or undefined when it is not that.
 *
 * @since 0.12.0
 * @category constructors
 */
export const decodeKekText = (text: string): Uint8Array | undefined => {
  const bytes = Buffer.from(text.trim(), "base64")
  return bytes.length === kekBytes ? new Uint8Array(bytes) : undefined
}

const generate = (): SecretsFile => ({
  api_key_pepper: randomBytes(32).toString("base64"),
  wallet_kek: generateKek(),
  admin_token: `adm_${randomBytes(32).toString("base64url")}`
})

/**
 * Writes the file atomically (see the module header), mode 0600. Throws on any failure.
 *
 * @since 0.12.0
 * @category constructors
 */
export const writeSecretsFile = (file: string, contents: SecretsFile): void => {
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`
  const fd = fs.openSync(tmp, "wx", 0o600)
  try {
    fs.writeSync(fd, JSON.stringify(contents, null, 2) + "\n")
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
  fs.renameSync(tmp, file)
  const dir = fs.openSync(path.dirname(file), "r")
  try {
    fs.fsyncSync(dir)
  } finally {
    fs.closeSync(dir)
  }
}

/**
 * The file's contents; undefined when there is none. Throws when it cannot be read or parsed.
 *
 * @since 0.12.0
 * @category constructors
 */
export const readSecretsFile = (file: string): SecretsFile | undefined =>
  fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, "utf8")) as SecretsFile) : undefined

/**
 * The file's contents, generated first when there is none. Throws on any failure.
 *
 * @since 0.12.0
 * @category constructors
 */
export const readOrCreateSecretsFile = (file: string): SecretsFile => {
  const found = readSecretsFile(file)
  if (found !== undefined) return found
  const created = generate()
  writeSecretsFile(file, created)
  return created
}
