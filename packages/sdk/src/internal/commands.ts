/**
 * The commands of `pnpm pps`, each a function from its settings to the text it
 * prints on stdout. They fail by throwing the SDK's errors; the entry point
 * (src/cli.ts) turns those into stderr lines and exit status 1. The outputs
 * are a contract, documented in docs/operations.md.
 *
 * @since 0.1.0
 */
import * as fs from "node:fs"
import { EncryptionKey } from "@pps/crypto"
import * as Account from "../Account.ts"
import * as Amount from "../Amount.ts"
import type { Client } from "../Client.ts"
import * as Confidential from "../Confidential.ts"
import * as KeyFile from "../KeyFile.ts"

/** A failure the user can act on, printed as `pps: <message>`. */
export class CommandError extends Error {
  override readonly name = "CommandError"
}

/** What every command needs: the client, and the key file named by --key-file, if any. */
export interface Settings {
  readonly client: Client
  readonly keyFilePath: string | undefined
}

const json = (value: unknown) => `${JSON.stringify(value)}\n`

/** Left-aligned columns separated by two spaces. */
const table = (rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => row[column]?.length ?? 0))) ?? []
  return rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join("  ").trimEnd() + "\n").join("")
}

/** The key file of the API key's account, checked to belong to it. */
const accountKey = async (settings: Settings): Promise<{ readonly accountId: string; readonly keyFile: KeyFile.KeyFile }> => {
  const account = await Account.me(settings.client)
  const filePath = settings.keyFilePath ?? KeyFile.defaultPath(account.account_id)
  const keyFile = KeyFile.read(filePath)
  if (keyFile.accountId !== account.account_id) {
    throw new CommandError(
      `${filePath} holds the key of account ${keyFile.accountId}, but PPS_API_KEY belongs to account ${account.account_id}`
    )
  }
  return { accountId: account.account_id, keyFile }
}

/**
 * `keygen`: a fresh key pair in the account's key file. Refused when the file
 * exists (unless `force`), and when the account already has a registered key,
 * since a second key could never be registered and would only shadow the first.
 */
export const keygen = async (settings: Settings & { readonly force: boolean }): Promise<string> => {
  const account = await Account.me(settings.client)
  const filePath = settings.keyFilePath ?? KeyFile.defaultPath(account.account_id)
  if (!settings.force && fs.existsSync(filePath)) {
    throw new CommandError(`${filePath} exists already and may hold the only copy of a key; use --force to replace it`)
  }
  const status = await Confidential.encryptionKeyStatus(settings.client)
  if (status.public_key !== null) {
    throw new CommandError(
      `account ${account.account_id} has a registered encryption key already; it cannot be replaced, so no new key was made`
    )
  }
  const keyPair = EncryptionKey.generate()
  KeyFile.write(filePath, { accountId: account.account_id, keyPair }, { overwrite: settings.force })
  return json({
    account_id: account.account_id,
    public_key: `0x${Buffer.from(keyPair.publicKey).toString("hex")}`,
    key_file: filePath
  })
}

/** `register-key`: registers the key file's public key; running it again is harmless. */
export const registerKey = async (settings: Settings): Promise<string> => {
  const { accountId, keyFile } = await accountKey(settings)
  const registration = await Confidential.registerKey(settings.client, keyFile.keyPair)
  return json({ account_id: accountId, public_key: registration.public_key, confidential_ready: registration.confidential_ready })
}

/** `balance`: a table of the proven balances, or with `json` the endpoint's body unchanged. */
export const balance = async (settings: Settings & { readonly json: boolean }): Promise<string> => {
  const { keyFile } = await accountKey(settings)
  const balances = await Confidential.readBalances(settings.client, keyFile.keyPair)
  if (settings.json) return balances.body.endsWith("\n") ? balances.body : `${balances.body}\n`
  return table([["asset", "amount"], ...balances.balances.map((entry) => [entry.asset, entry.amount])])
}

/** `decrypt-transfer <id>`: the transfer's amount and memo, checked against its ciphertext. */
export const decryptTransfer = async (
  settings: Settings & { readonly json: boolean; readonly transferId: string }
): Promise<string> => {
  const { keyFile } = await accountKey(settings)
  const transfer = await Confidential.decryptTransfer(settings.client, keyFile.keyPair, settings.transferId)
  const amount = Amount.format(transfer.asset, transfer.amount)
  if (settings.json) return json({ transfer_id: transfer.transferId, amount, memo: transfer.memo })
  return table([
    ["transfer_id", transfer.transferId],
    ["role", transfer.role],
    ["asset", transfer.asset],
    ["amount", amount],
    ["memo", transfer.memo]
  ])
}
