/**
 * `pnpm pps <command>` (or `npm run -s pps -- <command>`): the account
 * holder's command line. It keeps the account's encryption key in a key file
 * and does, on this machine, what the service cannot: register the key, read
 * balances through a decryption proof, and decrypt a transfer's amount and memo.
 *
 * It reads `PPS_API_KEY` (required) and `PPS_BASE_URL` (default
 * `http://127.0.0.1:8080`). A command prints its result on stdout and exits 0,
 * and so does `--help`. A mistake in the command line (no or unknown command,
 * unknown flag, wrong arguments) prints a `pps:` line and the usage on stderr
 * and exits 2, before any request; any other failure prints the API's error
 * body (DECISIONS.md D1) unchanged, or a line starting `pps:`, on stderr and
 * exits 1. It never prints a secret key.
 * The commands and their outputs are a contract, documented in
 * docs/operations.md.
 *
 * @since 0.1.0
 */
import * as path from "node:path"
import { parseArgs } from "node:util"
import * as Client from "./Client.ts"
import * as Commands from "./internal/commands.ts"

const options = {
  "key-file": { type: "string" },
  force: { type: "boolean" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" }
} as const

type OptionName = Exclude<keyof typeof options, "help">

/** Each command's synopsis line, the options it takes, and how many arguments. */
const commands: Record<string, { readonly synopsis: string; readonly options: ReadonlyArray<OptionName>; readonly arguments: number }> = {
  keygen: {
    synopsis: "keygen [--key-file FILE] [--force]                  make the account's encryption key, save it (mode 0600)",
    options: ["key-file", "force"],
    arguments: 0
  },
  "register-key": {
    synopsis: "register-key [--key-file FILE]                      register the key with the service (idempotent)",
    options: ["key-file"],
    arguments: 0
  },
  balance: {
    synopsis: "balance [--key-file FILE] [--json]                  the account's balances, decrypted and proven",
    options: ["key-file", "json"],
    arguments: 0
  },
  "decrypt-transfer": {
    synopsis: "decrypt-transfer ID [--key-file FILE] [--json]      a transfer's amount and memo, checked against the chain",
    options: ["key-file", "json"],
    arguments: 1
  }
}

const usageOf = (names: ReadonlyArray<string>): string =>
  `usage: pps <command> [options]
${names.map((name) => `  ${commands[name]?.synopsis ?? name}`).join("\n")}
  help [COMMAND]                                      this text, or one command's (also --help, -h)
environment: PPS_API_KEY (required), PPS_BASE_URL (default ${Client.defaultBaseUrl})
key file: --key-file, default ~/.pps/<account_id>.key
exit status: 0 done, 1 failed, 2 command-line mistake (nothing was sent)`

const fullUsage = usageOf(Object.keys(commands))

/** The command line is wrong: exit 2, with the usage that applies, and nothing sent. */
class UsageError extends Error {
  readonly usage: string
  constructor(message: string, usage: string) {
    super(message)
    this.usage = usage
  }
}

/** No answer from the API at `baseUrl` (as the user set it), with Node's network error as the cause. */
class Unreachable extends Error {
  readonly baseUrl: string
  constructor(baseUrl: string, cause: unknown) {
    super(`cannot reach the server at ${baseUrl}`, { cause })
    this.baseUrl = baseUrl
  }
}

/**
 * A relative --key-file is read from where the user typed the command: npm and
 * pnpm run scripts from the repository root, and say where they were started in INIT_CWD.
 */
const resolveKeyFile = (keyFile: string | undefined, env: NodeJS.ProcessEnv): string | undefined =>
  keyFile === undefined ? undefined : path.resolve(env["INIT_CWD"] ?? process.cwd(), keyFile)

/**
 * Help asked for anywhere before `--`: `--help`, `-h`, or `help` as the first word.
 * Read without strictness, so help answers even on a command line that is otherwise wrong.
 */
const helpRequest = (argv: ReadonlyArray<string>): { readonly words: ReadonlyArray<string> } | undefined => {
  const { positionals, tokens } = parseArgs({ args: [...argv], options, allowPositionals: true, strict: false, tokens: true })
  if (positionals[0] === "help") return { words: positionals.slice(1) }
  return tokens.some((token) => token.kind === "option" && token.name === "help") ? { words: positionals } : undefined
}

/** Node's parseArgs messages are long and generic; these name the flag and what is wrong with it. */
const parseFailure = (argv: ReadonlyArray<string>, fallback: string): string => {
  const { tokens } = parseArgs({ args: [...argv], options, allowPositionals: true, strict: false, tokens: true })
  for (const token of tokens) {
    if (token.kind !== "option") continue
    if (!Object.hasOwn(options, token.name)) return `unknown option "${token.rawName}"`
    const takesValue = token.name === "key-file"
    if (takesValue && token.value === undefined) return `${token.rawName} needs a value`
    if (takesValue && token.inlineValue === false && token.value?.startsWith("-") === true) {
      return `${token.rawName} needs a value, not "${token.value}" (write ${token.rawName}=VALUE for one that starts with -)`
    }
    if (!takesValue && token.value !== undefined) return `${token.rawName} takes no value`
  }
  return fallback
}

const parse = (argv: ReadonlyArray<string>) => {
  try {
    return parseArgs({ args: [...argv], options, allowPositionals: true, strict: true })
  } catch (error) {
    throw new UsageError(parseFailure(argv, error instanceof Error ? error.message : String(error)), fullUsage)
  }
}

const isHttpUrl = (value: string): boolean => URL.canParse(value) && ["http:", "https:"].includes(new URL(value).protocol)

const run = async (argv: ReadonlyArray<string>, env: NodeJS.ProcessEnv): Promise<string> => {
  const help = helpRequest(argv)
  if (help !== undefined) {
    const [asked] = help.words
    if (asked === undefined) return `${fullUsage}\n`
    if (!Object.hasOwn(commands, asked)) throw new UsageError(`unknown command "${asked}"`, fullUsage)
    return `${usageOf([asked])}\n`
  }
  if (argv.length === 0) throw new UsageError("", fullUsage)
  const parsed = parse(argv)
  const [name, ...rest] = parsed.positionals
  const command = name !== undefined && Object.hasOwn(commands, name) ? commands[name] : undefined
  if (name === undefined) throw new UsageError("no command given", fullUsage)
  if (command === undefined) throw new UsageError(`unknown command "${name}"`, fullUsage)
  const commandUsage = usageOf([name])
  const unknown = (Object.keys(parsed.values) as Array<OptionName>).find((option) => !command.options.includes(option))
  if (unknown !== undefined) throw new UsageError(`${name} does not take --${unknown}`, commandUsage)
  if (rest.length !== command.arguments) throw new UsageError(`${name} takes ${command.arguments} argument(s)`, commandUsage)

  const apiKey = env["PPS_API_KEY"]
  if (apiKey === undefined || apiKey === "") throw new Commands.CommandError("PPS_API_KEY is not set: export the account's API key")
  // An empty PPS_BASE_URL means the default, as before; anything else must be an http(s) URL.
  const baseUrl = env["PPS_BASE_URL"] || Client.defaultBaseUrl
  if (!isHttpUrl(baseUrl)) {
    throw new Commands.CommandError(`PPS_BASE_URL is not a URL: ${JSON.stringify(baseUrl)} (expected http://HOST:PORT)`)
  }
  const settings: Commands.Settings = {
    client: Client.make({ apiKey, baseUrl }),
    keyFilePath: resolveKeyFile(parsed.values["key-file"], env)
  }
  const json = parsed.values.json === true
  try {
    switch (name) {
      case "keygen":
        return await Commands.keygen({ ...settings, force: parsed.values.force === true })
      case "register-key":
        return await Commands.registerKey(settings)
      case "balance":
        return await Commands.balance({ ...settings, json })
      default:
        return await Commands.decryptTransfer({ ...settings, json, transferId: rest[0] ?? "" })
    }
  } catch (error) {
    // The SDK says "cannot reach the API at <url>: TypeError: fetch failed"; the cause tells what actually happened.
    if (error instanceof Client.TransportError && error.reason === "unreachable") throw new Unreachable(baseUrl, error.cause)
    throw error
  }
}

/** Plain words for the errno codes Node's fetch hides behind `TypeError: fetch failed`. */
const networkCauses: Readonly<Record<string, string>> = {
  ECONNREFUSED: "connection refused",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host name lookup failed",
  ETIMEDOUT: "timed out",
  UND_ERR_CONNECT_TIMEOUT: "timed out",
  UND_ERR_HEADERS_TIMEOUT: "timed out",
  UND_ERR_BODY_TIMEOUT: "timed out",
  ECONNRESET: "connection reset",
  UND_ERR_SOCKET: "connection closed by the server",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable"
}

/**
 * Why a request got no answer. Node's fetch throws `TypeError("fetch failed")`
 * and puts the socket error in `cause` (an AggregateError when a host name has
 * several addresses); its errno `code` is what the user can act on.
 * (packages/server/src/admin/cli.ts has the same rule for the admin command.)
 */
const networkFailure = (error: unknown): string => {
  const codes: Array<string> = []
  let innermost = "the request failed"
  const visit = (value: unknown, depth: number): void => {
    if (depth > 5 || typeof value !== "object" || value === null) return
    if ("code" in value && typeof value.code === "string") codes.push(value.code)
    if (value instanceof Error && value.name === "TimeoutError") codes.push("ETIMEDOUT")
    if (value instanceof Error && depth > 0 && value.message !== "") innermost = value.message
    if (value instanceof AggregateError) for (const inner of value.errors) visit(inner, depth + 1)
    if ("cause" in value) visit(value.cause, depth + 1)
  }
  visit(error, 0)
  return codes.map((code) => networkCauses[code]).find((words) => words !== undefined) ?? innermost
}

/** The API's own error body when there is one (it is the contract), else one `pps:` line. */
const describe = (error: unknown): string => {
  if (error instanceof UsageError) return `${error.message === "" ? "" : `pps: ${error.message}\n`}${error.usage}\n`
  if (error instanceof Unreachable) {
    return `pps: ${error.message}: ${networkFailure(error.cause)} (is it running? set PPS_BASE_URL to the API's address)\n`
  }
  if (error instanceof Client.ApiError) return error.body === "" ? `pps: HTTP ${error.status}\n` : `${error.body.trimEnd()}\n`
  return `pps: ${error instanceof Error ? error.message : String(error)}\n`
}

run(process.argv.slice(2), process.env).then(
  (output) => {
    process.stdout.write(output)
  },
  (error: unknown) => {
    process.stderr.write(describe(error))
    process.exitCode = error instanceof UsageError ? 2 : 1
  }
)
