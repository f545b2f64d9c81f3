/**
 * Key files on the real file system: a key file round-trips, is written 0600
 * and never overwritten by accident, and a file that others can read, or whose
 * halves do not belong together, is refused.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { EncryptionKey } from "@pps/crypto"
import { afterAll, describe, expect, it } from "vitest"
import { KeyFile } from "../src/index.ts"

const directory = fs.mkdtempSync(path.join(os.tmpdir(), "pps-keyfile-"))
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }))

const refusal = (thunk: () => unknown): KeyFile.KeyFileError => {
  try {
    thunk()
  } catch (error) {
    if (error instanceof KeyFile.KeyFileError) return error
    throw error
  }
  throw new Error("expected a KeyFileError")
}

describe("KeyFile", () => {
  it("writes 0600 in a new 0700 directory, reads back the same key, and refuses to overwrite unless asked", () => {
    const file = path.join(directory, "nested", "acct_A.key")
    const keyFile = { accountId: "acct_A", keyPair: EncryptionKey.generate() }
    KeyFile.write(file, keyFile, { overwrite: false })
    expect(fs.statSync(file).mode & 0o777).toBe(0o600)
    expect(fs.statSync(path.dirname(file)).mode & 0o777).toBe(0o700)
    expect(KeyFile.read(file)).toEqual(keyFile)

    const other = { accountId: "acct_A", keyPair: EncryptionKey.generate() }
    expect(refusal(() => KeyFile.write(file, other, { overwrite: false })).reason).toBe("exists")
    expect(KeyFile.read(file)).toEqual(keyFile)
    KeyFile.write(file, other, { overwrite: true })
    expect(KeyFile.read(file)).toEqual(other)
    expect(fs.readdirSync(path.dirname(file))).toEqual(["acct_A.key"])
  })

  it("refuses a missing file, one others can read, and one whose public key is not its secret key's", () => {
    expect(refusal(() => KeyFile.read(path.join(directory, "absent.key"))).reason).toBe("missing")

    const open = path.join(directory, "open.key")
    KeyFile.write(open, { accountId: "acct_B", keyPair: EncryptionKey.generate() }, { overwrite: false })
    fs.chmodSync(open, 0o644)
    expect(refusal(() => KeyFile.read(open)).reason).toBe("permissions_too_open")

    const text = KeyFile.encode({ accountId: "acct_C", keyPair: EncryptionKey.generate() })
    const foreign = KeyFile.encode({ accountId: "acct_C", keyPair: EncryptionKey.generate() })
    const spliced = { ...JSON.parse(text), public_key: JSON.parse(foreign).public_key }
    const error = refusal(() => KeyFile.decode(JSON.stringify(spliced), "spliced.key"))
    expect(error.reason).toBe("malformed")
    // The message names the file and the field, never the key material.
    expect(error.message).not.toContain(JSON.parse(text).secret_key.slice(2))
    expect(refusal(() => KeyFile.decode(JSON.stringify({ ...JSON.parse(text), secret_key: `0x${"00".repeat(32)}` }), "zero.key")).reason)
      .toBe("malformed")
    expect(refusal(() => KeyFile.decode("not json", "garbage.key")).reason).toBe("malformed")
    // An account id becomes a file name: nothing that could leave the directory.
    expect(refusal(() => KeyFile.defaultPath("../etc/passwd", directory)).reason).toBe("malformed")
    expect(KeyFile.defaultPath("acct_D", "/home/x")).toBe("/home/x/.pps/acct_D.key")
  })
})
