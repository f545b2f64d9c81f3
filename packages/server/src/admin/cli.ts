/**
 * `pnpm admin <command>`: the operator's command line over the admin API.
 *
 * It finds the admin listener in `ADMIN_URL` / `ADMIN_TOKEN`, or else in the
 * files the embedded server keeps in `DATA_DIR` (default `./.data`):
 * `admin.json` (the URL) and `secrets.json` (the token). Each command prints one
 * JSON document on stdout and exits 0; `--help` prints the usage on stdout and
 * exits 0. A mistake in the command line (no or unknown command, unknown flag,
 * missing or disallowed flag value) prints the reason and the usage on stderr
 * and exits 2, before any request; any other failure prints the error on stderr
 * and exits 1. The outputs are a contract, documented in docs/operations.md.
 *
 * @since 0.1.0
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { parseArgs } from "node:util"

const kycStatuses = ["unverified", "pending", "verified", "enhanced"] as const

const options = {
  handle: { type: "string" },
  type: { type: "string" },
  kyc: { type: "string" },
  account: { type: "string" },
  status: { type: "string" },
  name: { type: "string" },
  mode: { type: "string" },
  "key-id": { type: "string" },
  "faucet-address": { type: "string" },
  help: { type: "boolean", short: "h" }
} as const

type OptionName = Exclude<keyof typeof options, "help">

/** The values a flag may take where this command line knows them, so a typo fails here, before any request. */
const choices: Partial<Record<OptionName, ReadonlyArray<string>>> = {
  type: ["personal", "business"],
  kyc: kycStatuses,
  status: kycStatuses,
  mode: ["test", "live"]
}

/** Each command's synopsis (after its name) and the flags it takes. */
const commands: Record<string, { readonly synopsis: string; readonly options: ReadonlyArray<OptionName> }> = {
  "accounts create": {
    synopsis: "--handle H [--type personal|business] [--kyc unverified|pending|verified|enhanced]",
    options: ["handle", "type", "kyc"]
  },
  "accounts set-kyc": { synopsis: "--account ACCOUNT_ID --status unverified|pending|verified|enhanced", options: ["account", "status"] },
  "accounts get": { synopsis: "--account ACCOUNT_ID", options: ["account"] },
  "accounts invite": { synopsis: "--account ACCOUNT_ID  (prints a one-time dashboard enrollment link, valid 24 h)", options: ["account"] },
  "keys create": {
    synopsis: "--account ACCOUNT_ID --name NAME [--mode test|live]  (default test; an agent: its own mode only)",
    options: ["account", "name", "mode"]
  },
  "keys list": { synopsis: "--account ACCOUNT_ID", options: ["account"] },
  "keys revoke": { synopsis: "--key-id KEY_ID", options: ["key-id"] },
  "chain deploy": {
    synopsis: "--mode test|live [--faucet-address 0x...]  (external chains; run on the operator's machine)",
    options: ["mode", "faucet-address"]
  }
}

/** The API's request fields the commands send, and the flag each comes from: an API refusal names the flag. */
const flagOfParam: Readonly<Record<string, string>> = {
  handle: "--handle",
  type: "--type",
  kyc_status: "--kyc",
  status: "--status",
  account_id: "--account",
  name: "--name",
  mode: "--mode",
  key_id: "--key-id"
}

const footer = `  help [COMMAND]  this text, or one command's (also --help, -h)
environment: ADMIN_URL, ADMIN_TOKEN, DATA_DIR (default ./.data); chain deploy: DATABASE_URL,
  RPC_URL_TESTNET|RPC_URL_MAINNET, OPERATOR_KEY_TESTNET|OPERATOR_KEY_MAINNET, GUARDIAN_URL,
  GUARDIAN_SHARED_SECRET, FAUCET_KEY_TESTNET (or --faucet-address)
exit status: 0 done, 1 failed, 2 command-line mistake (nothing was sent)`

/** The commands named by `words`: one command, a group (`keys`), or all of them for "". */
const commandsUnder = (words: string): ReadonlyArray<string> =>
  Object.keys(commands).filter((name) => words === "" || name === words || name.startsWith(`${words} `))

const usageOf = (names: ReadonlyArray<string>): string =>
  `usage: pnpm admin <command>\n${names.map((name) => `  ${name} ${commands[name]?.synopsis ?? ""}`).join("\n")}\n${footer}`

const fullUsage = usageOf(Object.keys(commands))

/** The operation failed: exit 1. */
class CliError extends Error {}

/** The command line is wrong: exit 2, with the usage that applies, and nothing sent. */
class UsageError extends Error {
  readonly usage: string
  constructor(message: string, usage: string) {
    super(message)
    this.usage = usage
  }
}

const readJson = (file: string): Record<string, unknown> | undefined => {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8")) as Record<string, unknown>
  } catch {
    return undefined
  }
}

const isHttpUrl = (value: string): boolean =>
  URL.canParse(value) && ["http:", "https:"].includes(new URL(value).protocol)

const connection = () => {
  const dataDir = path.resolve(process.env["DATA_DIR"] ?? "./.data")
  const adminFile = path.join(dataDir, "admin.json")
  const fromEnv = process.env["ADMIN_URL"]
  const url = fromEnv ?? readJson(adminFile)?.["admin_url"]
  const token = process.env["ADMIN_TOKEN"] ?? readJson(path.join(dataDir, "secrets.json"))?.["admin_token"]
  if (typeof url !== "string" || typeof token !== "string") {
    throw new CliError(
      `cannot find the admin API: set ADMIN_URL and ADMIN_TOKEN, or start the embedded server (it writes them under ${dataDir})`
    )
  }
  const source = fromEnv === undefined ? `admin_url in ${adminFile}` : "ADMIN_URL"
  if (!isHttpUrl(url)) throw new CliError(`${source} is not a URL: ${JSON.stringify(url)} (expected http://HOST:PORT)`)
  // Where the address came from decides what the operator should change when nothing answers there.
  const hint = fromEnv === undefined
    ? `the address is from ${adminFile}; set ADMIN_URL, or DATA_DIR to the running server's data directory`
    : "set ADMIN_URL to the admin listener's address"
  return { url: url.replace(/\/$/, ""), token, hint }
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
 * several addresses); its errno `code` is what the operator can act on.
 * (packages/sdk/src/cli.ts has the same rule for the pps command.)
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

/** The D1 error object of an API answer, when the body is one. */
const errorObjectOf = (text: string): { readonly code: string; readonly message: string; readonly param?: unknown } | undefined => {
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown; param?: unknown } }
    const error = body.error
    if (typeof error?.code !== "string" || typeof error.message !== "string") return undefined
    return { code: error.code, message: error.message, param: error.param }
  } catch {
    return undefined
  }
}

const call = async (method: "GET" | "POST", route: string, body?: unknown): Promise<Record<string, unknown>> => {
  const { hint, token, url } = connection()
  let response: Response
  try {
    response = await fetch(`${url}/admin${route}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
  } catch (cause) {
    throw new CliError(`cannot reach the server at ${url}: ${networkFailure(cause)} (is it running? ${hint})`)
  }
  const text = await response.text()
  if (!response.ok) {
    const error = errorObjectOf(text)
    if (error === undefined) throw new CliError(text || `HTTP ${response.status}`)
    const flag = typeof error.param === "string" ? flagOfParam[error.param] : undefined
    // A readable line naming the flag, then the D1 body unchanged as the last line (request_id included) for scripts.
    throw new CliError(`${flag === undefined ? "" : `${flag}: `}${error.message} (${error.code}, HTTP ${response.status})\n${text.trimEnd()}`)
  }
  return JSON.parse(text) as Record<string, unknown>
}

/**
 * Help asked for anywhere before `--`: `--help`, `-h`, or `help` as the first word.
 * Read without strictness, so `accounts create --help` helps even without its required flags.
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
    const takesValue = token.name !== "help"
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

/** What the command line asks for: help on some commands, or one command with its checked flags. */
const interpret = (argv: ReadonlyArray<string>) => {
  const help = helpRequest(argv)
  if (help !== undefined) {
    const asked = help.words.join(" ")
    const names = commandsUnder(asked)
    if (names.length === 0) throw new UsageError(`unknown command "${asked}"`, fullUsage)
    return { help: usageOf(names) } as const
  }
  if (argv.length === 0) throw new UsageError("", fullUsage)
  const { positionals, values } = parse(argv)
  const command = positionals.slice(0, 2).join(" ")
  const spec = Object.hasOwn(commands, command) ? commands[command] : undefined
  if (spec === undefined) {
    const group = commandsUnder(positionals.join(" "))
    if (positionals.length === 1 && group.length > 0) throw new UsageError(`"${command}" needs a subcommand`, usageOf(group))
    throw new UsageError(`unknown command "${positionals.join(" ")}"`, fullUsage)
  }
  const commandUsage = usageOf([command])
  if (positionals.length > 2) throw new UsageError(`${command} takes no arguments, got "${positionals.slice(2).join(" ")}"`, commandUsage)
  for (const option of Object.keys(values) as Array<OptionName>) {
    if (!spec.options.includes(option)) throw new UsageError(`${command} does not take --${option}`, commandUsage)
    const allowed = choices[option]
    const value = values[option]
    if (allowed !== undefined && typeof value === "string" && !allowed.includes(value)) {
      throw new UsageError(`--${option} must be one of ${allowed.join("|")}, not ${JSON.stringify(value)}`, commandUsage)
    }
  }
  const need = (name: OptionName): string => {
    const value = values[name]
    if (value === undefined || value === "") throw new UsageError(`--${name} is required`, commandUsage)
    return value
  }
  return { command, values, need, commandUsage } as const
}

/** The command's JSON output. */
const execute = async (
  { command, commandUsage, need, values }: Exclude<ReturnType<typeof interpret>, { readonly help: string }>
): Promise<unknown> => {
  switch (command) {
    case "accounts create": {
      const created = await call("POST", "/accounts", {
        handle: need("handle"),
        ...(values.type === undefined ? {} : { type: values.type }),
        ...(values.kyc === undefined ? {} : { kyc_status: values.kyc })
      })
      return { account_id: created["account_id"], handle: created["handle"], api_key: created["api_key"], key_id: created["key_id"] }
    }
    case "accounts set-kyc": {
      const account = need("account")
      return call("POST", `/accounts/${encodeURIComponent(account)}/kyc`, { status: need("status") })
    }
    case "accounts get":
      return call("GET", `/accounts/${encodeURIComponent(need("account"))}`)
    case "accounts invite":
      return call("POST", `/accounts/${encodeURIComponent(need("account"))}/invites`)
    case "keys create": {
      const created = await call("POST", "/keys", {
        account_id: need("account"),
        name: need("name"),
        ...(values.mode === undefined ? {} : { mode: values.mode })
      })
      return { key_id: created["key_id"], name: created["name"], api_key: created["api_key"], mode: created["mode"] }
    }
    case "keys list":
      return call("GET", `/accounts/${encodeURIComponent(need("account"))}/keys`)
    case "keys revoke":
      return call("POST", `/keys/${encodeURIComponent(need("key-id"))}/revoke`)
    default: {
      // chain deploy; --mode was checked against its choices above.
      const mode = need("mode") === "live" ? "live" : "test"
      const faucet = values["faucet-address"]
      if (faucet !== undefined && !/^0x[0-9a-fA-F]{40}$/.test(faucet)) {
        throw new UsageError("--faucet-address must be a 0x address", commandUsage)
      }
      // Loaded only here: the other commands need no chain, database or Effect runtime.
      const [{ Effect, Option }, { deployStep }] = await Promise.all([import("effect"), import("./deploy.ts")])
      return Effect.runPromise(deployStep(mode, Option.fromNullishOr(faucet as `0x${string}` | undefined)).pipe(
        Effect.mapError((error) => new CliError(`chain deploy failed: ${error.message}`))
      ))
    }
  }
}

const run = async (argv: ReadonlyArray<string>): Promise<string> => {
  const request = interpret(argv)
  return "help" in request ? `${request.help}\n` : `${JSON.stringify(await execute(request))}\n`
}

run(process.argv.slice(2)).then(
  (output) => {
    process.stdout.write(output)
  },
  (error: unknown) => {
    if (error instanceof UsageError) {
      process.stderr.write(`${error.message === "" ? "" : `${error.message}\n`}${error.usage}\n`)
      process.exitCode = 2
      return
    }
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`)
    process.exitCode = 1
  }
)
