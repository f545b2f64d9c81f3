/**
 * The admin command's commands, declared with Effect's CLI module: what `cli.ts` (the
 * `npm run -s admin` entry) runs on this process's invocation, and what a test runs through
 * `CommandLine.run` with an invocation of its own. Each reads the admin API's address from the
 * invocation's environment (ADMIN_URL, ADMIN_TOKEN) or from the files under its DATA_DIR.
 *
 * @since 0.10.0
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as CommandLine from "@pps/sdk/CommandLine"
import * as Command from "effect/cli/Command"
import * as Flag from "effect/cli/Flag"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { auditActions } from "../audit/auditActions.ts"

const kycStatuses = ["unverified", "pending", "verified", "enhanced"] as const

/** The API's request fields the commands send, and the flag each comes from: an API refusal names the flag. */
const flagOfParam: Readonly<Record<string, string>> = {
  handle: "--handle",
  type: "--type",
  kyc_status: "--kyc",
  status: "--status",
  account_id: "--account",
  name: "--name",
  mode: "--mode",
  key_id: "--key-id",
  limit: "--limit",
  offset: "--offset",
  action: "--action"
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

/** Where the admin API is, from the invocation's environment or the data directory's files (relative to where it was typed). */
const connection = (invocation: CommandLine.InvocationShape) => {
  const env = invocation.env
  const dataDir = path.resolve(invocation.cwd, env["DATA_DIR"] ?? "./.data")
  const adminFile = path.join(dataDir, "admin.json")
  const fromEnv = env["ADMIN_URL"]
  const url = fromEnv ?? readJson(adminFile)?.["admin_url"]
  const token = env["ADMIN_TOKEN"] ?? readJson(path.join(dataDir, "secrets.json"))?.["admin_token"]
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

/** One request to the admin API: its JSON answer, or a `CliError` naming what failed. */
type Call = (method: "GET" | "POST", route: string, body?: unknown) => Promise<Record<string, unknown>>

const callIn = (invocation: CommandLine.InvocationShape): Call => async (method, route, body) => {
  const { hint, token, url } = connection(invocation)
  let response: Response
  try {
    response = await fetch(`${url}/admin${route}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
  } catch (cause) {
    throw new CliError(`cannot reach the server at ${url}: ${CommandLine.networkFailure(cause)} (is it running? ${hint})`)
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
 * How the admin command names itself (as the README runs it), and what every usage says after the commands.
 *
 * @since 0.10.0
 * @category models
 */
export const program: CommandLine.Program = {
  invocation: "npm run -s admin --",
  prefix: "",
  unrepeatedFlags: [],
  footer: `  help [COMMAND]                                      this text, or one command's with its flags (also --help, -h)
environment: ADMIN_URL, ADMIN_TOKEN, DATA_DIR (default ./.data); wallet-kek backup|restore:
  PPS_BACKUP_PASSPHRASE, WALLET_KEK (else DATA_DIR/secrets.json); chain deploy: DATABASE_URL,
  RPC_URL_TESTNET|RPC_URL_MAINNET, OPERATOR_KEY_TESTNET|OPERATOR_KEY_MAINNET, GUARDIAN_URL,
  GUARDIAN_SHARED_SECRET, FAUCET_KEY_TESTNET (or --faucet-address)
exit status: 0 done, 1 failed, 2 command-line mistake (nothing was sent)`
}

/** The operation failed: exit 1. */
class CliError extends Error {}

/**
 * A failed command's stderr: its error's message.
 *
 * @since 0.10.0
 * @category errors
 */
export const describe = (error: unknown): string => `${error instanceof Error ? error.message : String(error)}\n`

/** One request (or more) through the invocation's admin API: its answer, for a step that goes on with it. */
const answerOf = <A>(request: (call: Call) => Promise<A>): Effect.Effect<A, unknown, CommandLine.Invocation> =>
  CommandLine.Invocation.use((invocation) => Effect.tryPromise({ try: () => request(callIn(invocation)), catch: (error) => error }))

/** Runs one request (or more) through the invocation's admin API and prints the command's JSON output. */
const perform = (request: (call: Call) => Promise<unknown>): Effect.Effect<void, unknown, CommandLine.Invocation> =>
  answerOf(request).pipe(Effect.flatMap((output) => CommandLine.print(`${JSON.stringify(output)}\n`)))

const json = CommandLine.json("accepted; the output is always one JSON document")
const account = CommandLine.text("account", "ACCOUNT_ID", "the account's id (acct_...)")
const mode = (description: string) => CommandLine.choice("mode", ["test", "live"], description)

const accountsCreate = Command.make("create", {
  handle: CommandLine.text("handle", "H", "the account's handle, without the @"),
  type: CommandLine.choice("type", ["personal", "business"], "the kind of account (default personal)").pipe(Flag.optional),
  kyc: CommandLine.choice("kyc", kycStatuses, "its KYC status (default unverified)").pipe(Flag.optional),
  json
}, (flags) =>
  perform(async (call) => {
    const created = await call("POST", "/accounts", {
      handle: flags.handle,
      ...Option.match(flags.type, { onNone: () => ({}), onSome: (type) => ({ type }) }),
      ...Option.match(flags.kyc, { onNone: () => ({}), onSome: (kyc) => ({ kyc_status: kyc }) })
    })
    return { account_id: created["account_id"], handle: created["handle"], api_key: created["api_key"], key_id: created["key_id"] }
  })).pipe(Command.withDescription("an account and its first API key (printed this once)"))

/** D16's page bounds as flags (`--limit` 1-100, `--offset` from 0). */
const pageFlags = (order: string) => ({
  limit: CommandLine.text("limit", "N", `how many (1-100, default 20), ${order}`, {
    accepts: (value) => /^(100|[1-9][0-9]?)$/.test(value),
    expected: "an integer from 1 to 100"
  }).pipe(Flag.optional),
  offset: CommandLine.text("offset", "N", "how many to skip (default 0)", {
    accepts: (value) => /^(0|[1-9][0-9]{0,14})$/.test(value),
    expected: "an integer from 0"
  }).pipe(Flag.optional)
})

/** A query string of the flags given (none given: none sent, the API's defaults apply). */
const queryOf = (entries: Readonly<Record<string, Option.Option<string>>>): string => {
  const query = new URLSearchParams()
  for (const [name, value] of Object.entries(entries)) if (Option.isSome(value)) query.set(name, value.value)
  const text = query.toString()
  return text === "" ? "" : `?${text}`
}

const accountsList = Command.make("list", {
  handle: CommandLine.text("handle", "TEXT", "only handles containing TEXT (case-insensitive; a leading @ is ignored)").pipe(Flag.optional),
  type: CommandLine.choice("type", ["personal", "business", "agent"], "only accounts of this kind").pipe(Flag.optional),
  kyc: CommandLine.choice("kyc", kycStatuses, "only accounts with this KYC status").pipe(Flag.optional),
  status: CommandLine.choice("status", ["active", "suspended"], "only active or only suspended accounts").pipe(Flag.optional),
  ...pageFlags("oldest first"),
  json
}, (flags) =>
  perform((call) =>
    call("GET", `/accounts${queryOf({
      handle: flags.handle,
      type: flags.type,
      kyc_status: flags.kyc,
      status: flags.status,
      limit: flags.limit,
      offset: flags.offset
    })}`))).pipe(Command.withDescription("the accounts, a page at a time: {data,limit,offset,has_more}"))

const accounts = Command.make("accounts").pipe(
  Command.withDescription("the service's accounts"),
  Command.withSubcommands([
    accountsCreate,
    Command.make("set-kyc", { account, status: CommandLine.choice("status", kycStatuses, "the new KYC status"), json }, (flags) =>
      perform((call) => call("POST", `/accounts/${encodeURIComponent(flags.account)}/kyc`, { status: flags.status }))).pipe(
      Command.withDescription("change an account's KYC status")
    ),
    Command.make("get", { account, json }, (flags) => perform((call) => call("GET", `/accounts/${encodeURIComponent(flags.account)}`))).pipe(
      Command.withDescription("one account")
    ),
    Command.make("invite", { account, json }, (flags) =>
      perform((call) => call("POST", `/accounts/${encodeURIComponent(flags.account)}/invites`))).pipe(
      Command.withDescription("a one-time dashboard enrollment link, valid 24 h")
    ),
    accountsList,
    Command.make("suspend", { account, json }, (flags) =>
      perform((call) => call("POST", `/accounts/${encodeURIComponent(flags.account)}/suspend`))).pipe(
      Command.withDescription("refuse the account's keys and its agents' (403 account_suspended);\nwhat is under way finishes")
    ),
    Command.make("reactivate", { account, json }, (flags) =>
      perform((call) => call("POST", `/accounts/${encodeURIComponent(flags.account)}/reactivate`))).pipe(
      Command.withDescription("accept the account's keys again")
    )
  ])
)


const audit = Command.make("audit", {
  account: CommandLine.text("account", "ACCOUNT_ID", "only entries about this account (acct_...)").pipe(Flag.optional),
  action: CommandLine.choice("action", auditActions, "only entries of this action").pipe(Flag.optional),
  ...pageFlags("newest first"),
  json
}, (flags) =>
  perform((call) =>
    call("GET", `/audit${queryOf({ account_id: flags.account, action: flags.action, limit: flags.limit, offset: flags.offset })}`))).pipe(
  Command.withDescription("the audit log of security actions: who, when, from where (ip, request_id)")
)

const webhooks = Command.make("webhooks").pipe(
  Command.withDescription("webhook subscriptions (read-only)"),
  Command.withSubcommands([
    Command.make("list", { account, json }, (flags) =>
      perform((call) => call("GET", `/accounts/${encodeURIComponent(flags.account)}/webhooks`))).pipe(
      Command.withDescription("an account's subscriptions with their delivery health")
    )
  ])
)

const keys = Command.make("keys").pipe(
  Command.withDescription("the API keys of an account"),
  Command.withSubcommands([
    Command.make("create", {
      account,
      name: CommandLine.text("name", "NAME", "the key's name"),
      mode: mode("test or live (default test; an agent's key: its own mode only)").pipe(Flag.optional),
      json
    }, (flags) =>
      perform(async (call) => {
        const created = await call("POST", "/keys", {
          account_id: flags.account,
          name: flags.name,
          ...Option.match(flags.mode, { onNone: () => ({}), onSome: (mode) => ({ mode }) })
        })
        return { key_id: created["key_id"], name: created["name"], api_key: created["api_key"], mode: created["mode"] }
      })).pipe(Command.withDescription("another API key for an account (printed this once)")),
    Command.make("list", { account, json }, (flags) => perform((call) => call("GET", `/accounts/${encodeURIComponent(flags.account)}/keys`))).pipe(
      Command.withDescription("an account's API keys (no secrets)")
    ),
    Command.make("revoke", { keyId: CommandLine.text("key-id", "KEY_ID", "the key's id (key_...)"), json }, (flags) =>
      perform((call) => call("POST", `/keys/${encodeURIComponent(flags.keyId)}/revoke`))).pipe(
      Command.withDescription("revoke one at once")
    )
  ])
)

/** D59: loopback delivery for an account's webhooks (a developer's receiver), per mode, without a restart. */
const webhookLoopback = Command.make("webhook-loopback").pipe(
  Command.withDescription("let an account's webhooks deliver to a receiver on this machine (never the service's own ports)"),
  Command.withSubcommands([
    ...(["allow", "deny"] as const).map((verb) =>
      Command.make(verb, { account, mode: mode("test or live (default test)").pipe(Flag.optional), json }, (flags) =>
        perform((call) =>
          call("POST", `/accounts/${encodeURIComponent(flags.account)}/webhook-loopback`, {
            mode: Option.getOrElse(flags.mode, () => "test"),
            allowed: verb === "allow"
          }))).pipe(Command.withDescription(verb === "allow" ? "allow loopback receivers" : "refuse them again"))
    ),
    Command.make("get", { account, json }, (flags) =>
      perform((call) => call("GET", `/accounts/${encodeURIComponent(flags.account)}/webhook-loopback`))).pipe(
      Command.withDescription("whether each mode may deliver to loopback")
    )
  ])
)

const isAddress = (value: string): value is `0x${string}` => /^0x[0-9a-fA-F]{40}$/.test(value)

const chainDeploy = Command.make("deploy", {
  mode: mode("which chain: test (RPC_URL_TESTNET) or live (RPC_URL_MAINNET)"),
  faucetAddress: Flag.String("faucet-address").pipe(
    Flag.withMetavar("0x..."),
    Flag.withDescription("the test faucet's address (default: FAUCET_KEY_TESTNET's)"),
    Flag.filterMap((value) => isAddress(value) ? Option.some(value) : Option.none(), () => "a 0x address"),
    Flag.optional
  ),
  migrate: CommandLine.toggle(
    "migrate",
    "replace a recorded ConfidentialToken of an older version (v1) by a v2 deployment (D53; what the old one holds stays there)"
  ),
  json
}, (flags) =>
  // Loaded only here: the other commands need no chain or database.
  Effect.promise(() => import("./deploy.ts")).pipe(
    Effect.flatMap(({ deployStep }) => deployStep(flags.mode, flags.faucetAddress, flags.migrate)),
    Effect.mapError((error) => new CliError(`chain deploy failed: ${error.message}`)),
    Effect.flatMap((output) => CommandLine.print(`${JSON.stringify(output)}\n`))
  )).pipe(Command.withDescription("deploy the contracts on an external chain (run on the operator's machine)"))

/** Loaded only for these commands: the others need no crypto or secrets file. */
const walletKekStep = <A>(
  name: string,
  step: (module: typeof import("./walletKek.ts")) => Effect.Effect<A, { readonly message: string }, CommandLine.Invocation>
) =>
  Effect.promise(() => import("./walletKek.ts")).pipe(
    Effect.flatMap(step),
    Effect.mapError((error) => new CliError(`wallet-kek ${name} failed: ${error.message}`)),
    Effect.flatMap((output) => CommandLine.print(`${JSON.stringify(output)}\n`))
  )

const statusOfServer = (call: Call) => call("GET", "/wallet-kek/status") as Promise<{ kek_id: string; remaining: number }>

const walletKek = Command.make("wallet-kek").pipe(
  Command.withDescription("rotate and back up WALLET_KEK, the key sealing custodial wallets (D54)"),
  Command.withSubcommands([
    Command.make("stage", { json }, () => walletKekStep("stage", (module) => module.stage)).pipe(
      Command.withDescription("embedded mode: a fresh KEK in DATA_DIR/secrets.json, the old one kept to open;\nthen restart the server")
    ),
    Command.make("rotate", { json }, () => perform((call) => call("POST", "/wallet-kek/reseal"))).pipe(
      Command.withDescription("re-seal every value under the server's current KEK (resumable: run it again)")
    ),
    Command.make("status", { json }, () => perform(statusOfServer)).pipe(
      Command.withDescription("the server's KEK and how many values are left under another")
    ),
    Command.make("finish", { json }, () =>
      answerOf(statusOfServer).pipe(
        Effect.flatMap((status) => walletKekStep("finish", (module) => module.finish(status)))
      )).pipe(
      Command.withDescription("embedded mode: drop the old KEK from DATA_DIR/secrets.json once nothing is left under it")
    ),
    Command.make("backup", { out: CommandLine.text("out", "FILE", "the backup file to write (not overwritten)"), json }, (flags) =>
      answerOf((call) => call("GET", "/wallet-kek/sealed-wallets")).pipe(
        Effect.flatMap((sealed) => walletKekStep("backup", (module) => module.backup(flags.out, sealed)))
      )).pipe(
      Command.withDescription("the KEK under PPS_BACKUP_PASSPHRASE and every wallet sealed under it, checked, in FILE")
    ),
    Command.make("restore", {
      in: CommandLine.text("in", "FILE", "a backup written by wallet-kek backup"),
      print: CommandLine.toggle("print", "print the KEK (for WALLET_KEK) instead of writing DATA_DIR/secrets.json"),
      json
    }, (flags) => walletKekStep("restore", (module) => module.restore(flags.in, flags.print))).pipe(
      Command.withDescription("check a backup opens every wallet it holds and install its KEK")
    )
  ])
)

const chain = Command.make("chain").pipe(
  Command.withDescription("the contracts"),
  Command.withSubcommands([chainDeploy])
)

/**
 * The admin command tree, in the order the usage lists it.
 *
 * @since 0.10.0
 * @category commands
 */
export const admin = Command.make("admin").pipe(Command.withSubcommands([accounts, keys, audit, webhooks, webhookLoopback, walletKek, chain]))

