/**
 * `pnpm pps <command>` (or `npm run -s pps -- <command>`): the account
 * holder's command line. It keeps the account's encryption key in a key file
 * and does, on this machine, what the service cannot: register the key, read
 * balances through a decryption proof, and decrypt a transfer's amount and memo.
 *
 * It reads `PPS_API_KEY` (required) and `PPS_BASE_URL` (default
 * `http://127.0.0.1:8080`). A command prints its result on stdout and exits 0;
 * on failure it prints the API's error body (DECISIONS.md D1) unchanged, or a
 * line starting `pps:`, on stderr and exits 1. It never prints a secret key.
 * The commands and their outputs are a contract, documented in
 * docs/operations.md.
 *
 * @since 0.1.0
 */
import * as path from "node:path"
import { parseArgs } from "node:util"
import * as Client from "./Client.ts"
import * as Commands from "./internal/commands.ts"

const usage = `usage: pps <command> [options]
  keygen [--key-file FILE] [--force]                  make the account's encryption key, save it (mode 0600)
  register-key [--key-file FILE]                      register the key with the service (idempotent)
  balance [--key-file FILE] [--json]                  the account's balances, decrypted and proven
  decrypt-transfer ID [--key-file FILE] [--json]      a transfer's amount and memo, checked against the chain
environment: PPS_API_KEY (required), PPS_BASE_URL (default ${Client.defaultBaseUrl})
key file: --key-file, default ~/.pps/<account_id>.key`

const options = {
  "key-file": { type: "string" },
  force: { type: "boolean" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" }
} as const

type OptionName = keyof typeof options

/** Which options each command takes, and how many arguments. */
const commands: Record<string, { readonly options: ReadonlyArray<OptionName>; readonly arguments: number }> = {
  keygen: { options: ["key-file", "force"], arguments: 0 },
  "register-key": { options: ["key-file"], arguments: 0 },
  balance: { options: ["key-file", "json"], arguments: 0 },
  "decrypt-transfer": { options: ["key-file", "json"], arguments: 1 }
}

/**
 * A relative --key-file is read from where the user typed the command: npm and
 * pnpm run scripts from the repository root, and say where they were started in INIT_CWD.
 */
const resolveKeyFile = (keyFile: string | undefined, env: NodeJS.ProcessEnv): string | undefined =>
  keyFile === undefined ? undefined : path.resolve(env["INIT_CWD"] ?? process.cwd(), keyFile)

const parse = (argv: ReadonlyArray<string>) => {
  try {
    return parseArgs({ args: [...argv], options, allowPositionals: true, strict: true })
  } catch (error) {
    throw new Commands.CommandError(`${error instanceof Error ? error.message : String(error)}\n${usage}`)
  }
}

const run = async (argv: ReadonlyArray<string>, env: NodeJS.ProcessEnv): Promise<string> => {
  const parsed = parse(argv)
  const [name, ...rest] = parsed.positionals
  if (parsed.values.help === true || name === "help") return `${usage}\n`
  const command = name !== undefined && Object.hasOwn(commands, name) ? commands[name] : undefined
  if (name === undefined || command === undefined) throw new Commands.CommandError(usage)
  const given = (Object.keys(parsed.values) as Array<OptionName>).filter((option) => option !== "help")
  const unknown = given.find((option) => !command.options.includes(option))
  if (unknown !== undefined) throw new Commands.CommandError(`${name} does not take --${unknown}\n${usage}`)
  if (rest.length !== command.arguments) throw new Commands.CommandError(`${name} takes ${command.arguments} argument(s)\n${usage}`)

  const apiKey = env["PPS_API_KEY"]
  if (apiKey === undefined || apiKey === "") throw new Commands.CommandError("PPS_API_KEY is not set: export the account's API key")
  const settings: Commands.Settings = {
    client: Client.make({ apiKey, baseUrl: env["PPS_BASE_URL"] || Client.defaultBaseUrl }),
    keyFilePath: resolveKeyFile(parsed.values["key-file"], env)
  }
  const json = parsed.values.json === true
  switch (name) {
    case "keygen":
      return Commands.keygen({ ...settings, force: parsed.values.force === true })
    case "register-key":
      return Commands.registerKey(settings)
    case "balance":
      return Commands.balance({ ...settings, json })
    default:
      return Commands.decryptTransfer({ ...settings, json, transferId: rest[0] ?? "" })
  }
}

/** The API's own error body when there is one (it is the contract), else one `pps:` line. */
const describe = (error: unknown): string => {
  if (error instanceof Client.ApiError) return error.body === "" ? `pps: HTTP ${error.status}\n` : `${error.body.trimEnd()}\n`
  return `pps: ${error instanceof Error ? error.message : String(error)}\n`
}

run(process.argv.slice(2), process.env).then(
  (output) => {
    process.stdout.write(output)
  },
  (error: unknown) => {
    process.stderr.write(describe(error))
    process.exitCode = 1
  }
)
