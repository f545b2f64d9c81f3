#!/usr/bin/env node
/**
 * `pnpm pps <command>` (or `npm run -s pps -- <command>`): the account
 * holder's command line. It keeps the account's encryption key in a key file
 * and does, on this machine, what the service cannot: register the key, read
 * balances through a decryption proof, and decrypt a transfer's amount and memo.
 *
 * It reads `PPS_API_KEY` (required) and `PPS_BASE_URL` (default
 * `http://127.0.0.1:8080`); `send` also reads the deployment it checks against
 * (`PPS_RPC_URL`, `PPS_CHAIN_ID`, `PPS_CONTRACT_USDG`, `PPS_CONTRACT_ETH`,
 * `PPS_TRUST`). A command prints its result on stdout and exits 0, and so does
 * `--help`. A mistake in the command line (no or unknown command,
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
import type * as SealedTransfers from "./SealedTransfers.ts"
import * as Webhook from "./Webhook.ts"

const options = {
  "key-file": { type: "string" },
  force: { type: "boolean" },
  json: { type: "boolean" },
  to: { type: "string" },
  amount: { type: "string" },
  memo: { type: "string" },
  asset: { type: "string" },
  public: { type: "boolean" },
  "idempotency-key": { type: "string" },
  limit: { type: "string" },
  "include-agents": { type: "boolean" },
  "forward-to": { type: "string" },
  name: { type: "string" },
  policy: { type: "string" },
  url: { type: "string" },
  events: { type: "string" },
  help: { type: "boolean", short: "h" }
} as const

type OptionName = Exclude<keyof typeof options, "help">

/**
 * Each command's synopsis lines, the options it takes, and its words after the command:
 * `subcommands` (the first word, when the command has some) with the count of arguments
 * each takes, or a plain count.
 */
const commands: Record<string, {
  readonly synopsis: string
  readonly options: ReadonlyArray<OptionName>
  readonly arguments: number | Readonly<Record<string, number>>
}> = {
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
  send: {
    synopsis: `send --to @HANDLE|0xADDRESS --amount DECIMAL [--memo TEXT] [--asset USDG|ETH] [--public]
        [--idempotency-key KEY] [--key-file FILE] [--json]
                                                      a transfer, sealed here: no request carries amount or memo
                                                      (--public: a standard transfer, its amount public on chain)`,
    options: ["to", "amount", "memo", "asset", "public", "idempotency-key", "key-file", "json"],
    arguments: 0
  },
  transfers: {
    synopsis: `transfers list [--limit N] [--include-agents] [--key-file FILE] [--json]
                                                      the newest transfers, amounts and memos decrypted here
  transfers get ID [--key-file FILE] [--json]         one transfer's amount and memo, checked against the chain`,
    options: ["limit", "include-agents", "key-file", "json"],
    arguments: { list: 0, get: 1 }
  },
  approvals: {
    synopsis: `approvals list [--key-file FILE] [--json]           held agent transactions, with the amount the guardian would pay
  approvals approve ID [--key-file FILE] [--json]     approve one (refused here if the agent's note disagrees)
  approvals reject ID [--json]                        reject one`,
    options: ["key-file", "json"],
    arguments: { list: 0, approve: 1, reject: 1 }
  },
  agents: {
    synopsis: `agents create --name NAME --policy JSON [--json]  an agent account with its spend policy (D21, D22)
  agents list [--json]                                the account's agents`,
    options: ["name", "policy", "json"],
    arguments: { create: 0, list: 0 }
  },
  policy: {
    synopsis: `policy get AGENT_ID [--json]                        an agent's spend policy
  policy set AGENT_ID --policy JSON [--json]          change some of its fields (PATCH)`,
    options: ["policy", "json"],
    arguments: { get: 1, set: 1 }
  },
  webhooks: {
    synopsis: `webhooks create --url URL --events a,b [--json]   a subscription; its secret is shown this once
  webhooks list | delete ID | deliveries ID | rotate-secret ID | replay ID EVENT_ID [--json]`,
    options: ["url", "events", "json"],
    arguments: { create: 0, list: 0, delete: 1, deliveries: 1, "rotate-secret": 1, replay: 2 }
  },
  faucet: {
    synopsis: `faucet [--amount DECIMAL] [--asset USDG] [--idempotency-key KEY] [--json]
                                                      test USDG (default 100) shielded into the account (test keys only)`,
    options: ["amount", "asset", "idempotency-key", "json"],
    arguments: 0
  },
  listen: {
    synopsis: `listen --forward-to URL [--json]                   receive the account's events live and forward each to URL,
                                                      signed with a local secret it prints (Ctrl-C stops)`,
    options: ["forward-to", "json"],
    arguments: 0
  },
  keys: {
    synopsis: "keys [--key-file FILE] [--json]                     the account's API keys: last use, requests, decrypted totals",
    options: ["key-file", "json"],
    arguments: 0
  },
  "decrypt-transfer": {
    synopsis: "decrypt-transfer ID [--key-file FILE] [--json]      a transfer's amount and memo, checked against the chain",
    options: ["key-file", "json"],
    arguments: 1
  }
}

/** What `faucet` asks for without --amount: enough for the quickstart's transfers. */
const faucetAmountDefault = "100"

const usageOf = (names: ReadonlyArray<string>): string =>
  `usage: pps <command> [options]
${names.map((name) => `  ${commands[name]?.synopsis ?? name}`).join("\n")}
  help [COMMAND]                                      this text, or one command's (also --help, -h)
environment: PPS_API_KEY (required), PPS_BASE_URL (default ${Client.defaultBaseUrl}),
  send's checks: PPS_CHAIN_ID and PPS_CONTRACT_USDG / PPS_CONTRACT_ETH (the operator's deployment,
  pinned here), PPS_RPC_URL (needs them: the guardian's and recipient's keys read from the pinned
  contract), PPS_TRUST=chain (refuse to send unless all are set; default api: the API is trusted
  for what is not set)
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
  readonly hint: string
  constructor(baseUrl: string, cause: unknown, hint = "") {
    super(`cannot reach the server at ${baseUrl}`, { cause })
    this.baseUrl = baseUrl
    this.hint = hint
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
    const takesValue = options[token.name as keyof typeof options].type === "string"
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

/** The deployment `send` checks the prepare answer against, pinned by PPS_CHAIN_ID and PPS_CONTRACT_<ASSET>. */
const deploymentOf = (env: NodeJS.ProcessEnv): SealedTransfers.Deployment | undefined => {
  const chainId = env["PPS_CHAIN_ID"] || undefined
  const contracts = { USDG: env["PPS_CONTRACT_USDG"] || undefined, ETH: env["PPS_CONTRACT_ETH"] || undefined }
  for (const [asset, address] of Object.entries(contracts)) {
    if (address !== undefined && !/^0x[0-9a-fA-F]{40}$/.test(address)) {
      throw new Commands.CommandError(`PPS_CONTRACT_${asset} is not a 0x address: ${JSON.stringify(address)}`)
    }
  }
  if (chainId === undefined) {
    if (contracts.USDG !== undefined || contracts.ETH !== undefined) {
      throw new Commands.CommandError("PPS_CONTRACT_USDG and PPS_CONTRACT_ETH need PPS_CHAIN_ID (the chain they are on)")
    }
    return undefined
  }
  if (!/^[1-9][0-9]{0,18}$/.test(chainId)) throw new Commands.CommandError(`PPS_CHAIN_ID is not a chain id: ${JSON.stringify(chainId)}`)
  return {
    chainId: BigInt(chainId),
    contracts: {
      ...(contracts.USDG === undefined ? {} : { USDG: contracts.USDG }),
      ...(contracts.ETH === undefined ? {} : { ETH: contracts.ETH })
    }
  }
}

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
  let subcommand: string | undefined
  if (typeof command.arguments === "number") {
    if (rest.length !== command.arguments) throw new UsageError(`${name} takes ${command.arguments} argument(s)`, commandUsage)
  } else {
    const known = Object.keys(command.arguments)
    subcommand = rest[0]
    if (subcommand === undefined) throw new UsageError(`${name} needs one of: ${known.join(", ")}`, commandUsage)
    const count = command.arguments[subcommand]
    if (count === undefined) throw new UsageError(`unknown ${name} command "${subcommand}" (one of: ${known.join(", ")})`, commandUsage)
    if (rest.length - 1 !== count) throw new UsageError(`${name} ${subcommand} takes ${count} argument(s)`, commandUsage)
  }
  const required = (option: "to" | "amount"): string => {
    const value = parsed.values[option]
    if (value === undefined || value === "") throw new UsageError(`${name} needs --${option}`, commandUsage)
    return value
  }
  const limitText = parsed.values.limit ?? "20"
  if (!/^\d+$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > 100) {
    throw new UsageError(`--limit must be an integer from 1 to 100, not ${JSON.stringify(limitText)}`, commandUsage)
  }
  const assetOption = parsed.values.asset
  if (assetOption !== undefined && assetOption !== "USDG" && assetOption !== "ETH") {
    throw new UsageError(`--asset must be USDG or ETH, not ${JSON.stringify(assetOption)}`, commandUsage)
  }

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
  const idempotencyKey = parsed.values["idempotency-key"] ?? `pps-${crypto.randomUUID()}`
  try {
    switch (name) {
      case "keygen":
        return await Commands.keygen({ ...settings, force: parsed.values.force === true })
      case "register-key":
        return await Commands.registerKey(settings)
      case "balance":
        return await Commands.balance({ ...settings, json })
      case "send": {
        const rpcUrl = env["PPS_RPC_URL"] || undefined
        if (rpcUrl !== undefined && !isHttpUrl(rpcUrl)) {
          throw new Commands.CommandError(`PPS_RPC_URL is not a URL: ${JSON.stringify(rpcUrl)} (expected http://HOST:PORT)`)
        }
        const deployment = deploymentOf(env)
        const trust = env["PPS_TRUST"] || undefined
        if (trust !== undefined && trust !== "api" && trust !== "chain") {
          throw new Commands.CommandError(`PPS_TRUST must be api or chain, not ${JSON.stringify(trust)}`)
        }
        return await Commands.send({
          ...settings,
          json,
          to: required("to"),
          amount: required("amount"),
          memo: parsed.values.memo,
          asset: assetOption,
          public: parsed.values.public === true,
          // Printed with the result: the same key retried after a lost answer never pays twice (D36).
          idempotencyKey,
          rpcUrl,
          deployment,
          trust
        })
      }
      case "transfers":
        return subcommand === "list"
          ? await Commands.listTransfers({ ...settings, json, limit: Number(limitText), includeAgents: parsed.values["include-agents"] === true })
          : await Commands.decryptTransfer({ ...settings, json, transferId: rest[1] ?? "" })
      case "approvals":
        return subcommand === "list"
          ? await Commands.listApprovals({ ...settings, json })
          : await Commands.decide({ ...settings, json, transactionId: rest[1] ?? "", action: subcommand === "approve" ? "approve" : "reject" })
      case "keys":
        return await Commands.keys({ ...settings, json })
      case "agents":
        return await Commands.agents({
          ...settings,
          json,
          action: subcommand === "create" ? "create" : "list",
          name: parsed.values.name,
          agentId: undefined,
          policy: parsed.values.policy
        })
      case "policy":
        return await Commands.agents({
          ...settings,
          json,
          action: subcommand === "set" ? "policy-set" : "policy-get",
          name: undefined,
          agentId: rest[1],
          policy: parsed.values.policy
        })
      case "webhooks":
        return await Commands.webhooks({
          ...settings,
          json,
          action: subcommand as "create" | "list" | "delete" | "deliveries" | "replay" | "rotate-secret",
          webhookId: rest[1],
          eventId: rest[2],
          url: parsed.values.url,
          events: parsed.values.events
        })
      case "faucet":
        // The faucet grants USDG only: said here with the flag's name rather than the API's field.
        if (assetOption !== undefined && assetOption !== "USDG") {
          throw new UsageError(`--asset must be USDG for the faucet, not ${JSON.stringify(assetOption)}`, commandUsage)
        }
        return await Commands.faucet({
          ...settings,
          json,
          amount: parsed.values.amount ?? faucetAmountDefault,
          asset: assetOption,
          idempotencyKey
        })
      case "listen": {
        const forwardTo = parsed.values["forward-to"]
        if (forwardTo === undefined || !isHttpUrl(forwardTo)) {
          throw new UsageError("listen needs --forward-to http(s)://HOST:PORT/PATH", commandUsage)
        }
        const stop = new Promise<void>((resolve) => {
          process.once("SIGINT", () => resolve())
          process.once("SIGTERM", () => resolve())
        })
        return await Commands.listen({
          ...settings,
          json,
          forwardTo,
          secret: Webhook.generateSecret(),
          out: (line) => process.stdout.write(line),
          stop
        })
      }
      default:
        return await Commands.decryptTransfer({ ...settings, json, transferId: rest[0] ?? "" })
    }
  } catch (error) {
    // The SDK says "cannot reach the API at <url>: TypeError: fetch failed"; the cause tells what actually happened.
    if (error instanceof Client.TransportError && error.reason === "unreachable") {
      // A send whose answer was lost may have been paid: the same key makes a retry safe (D36).
      throw new Unreachable(baseUrl, error.cause, name === "send" ? `; retry with --idempotency-key ${idempotencyKey}` : "")
    }
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
    return `pps: ${error.message}: ${networkFailure(error.cause)} (is it running? set PPS_BASE_URL to the API's address)${error.hint}\n`
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
