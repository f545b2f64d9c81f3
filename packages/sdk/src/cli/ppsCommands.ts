/**
 * The `pps` commands, declared with Effect's CLI module: each command's flags
 * and arguments with what they mean (the help is built from them), and its
 * handler, which checks the environment and calls the command's body in
 * internal/commands.ts. The conventions (help, mistakes, exit statuses) are
 * CommandLine.ts's; the contract is docs/cli.md and docs/operations.md.
 *
 * @since 0.5.0
 */
import * as path from "node:path"
import { Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import * as Client from "../Client.ts"
import * as Commands from "../internal/commands.ts"
import type * as SealedTransfers from "../SealedTransfers.ts"
import * as CommandLine from "./CommandLine.ts"
import * as Connection from "./Connection.ts"
import type * as McpEntry from "./McpEntry.ts"
import * as Trigger from "../internal/trigger.ts"

/** What `faucet` asks for without --amount: enough for the quickstart's transfers. */
const faucetAmountDefault = "100"

/**
 * How `pps` names itself, and what every usage says after the commands.
 *
 * @since 0.5.0
 * @category models
 */
export const program: CommandLine.Program = {
  invocation: "pps",
  prefix: "pps: ",
  unrepeatedFlags: ["amount", "memo"],
  footer: `  help [COMMAND]                                      this text, or one command's with its flags (also --help, -h)
environment: PPS_API_KEY (required), PPS_BASE_URL (default ${Client.defaultBaseUrl}),
  send's (and mcp's pay's) checks: PPS_CHAIN_ID and PPS_CONTRACT_USDG / PPS_CONTRACT_ETH (the
  operator's deployment, pinned here), PPS_RPC_URL (needs them: the guardian's and recipient's keys
  read from the pinned contract), PPS_OWNER_WALLET (an agent's owner's wallet: with PPS_RPC_URL the
  key the agent's copy is sealed to is read from the pinned contract), PPS_TRUST=chain (refuse
  to send unless all are set; default api: the API is trusted for what is not set),
  PPS_RETRY_BUDGET_MS (default 15000: how long after a failure a request is retried, each retry
  told on stderr; 0: never)
idempotency: a POST command without --idempotency-key draws one and prints it on stderr
key file: --key-file, default ~/.pps/<account_id>.key (an agent has none: agents use their owner's key)
exit status: 0 done, 1 failed, 2 command-line mistake (nothing was sent)`
}

/** The command line is right but nothing answers at `baseUrl` (as the user set it); Node's network error is the cause. */
class Unreachable extends Error {
  readonly baseUrl: string
  readonly hint: string
  constructor(baseUrl: string, cause: unknown, hint: string) {
    super(`cannot reach the server at ${baseUrl}`, { cause })
    this.baseUrl = baseUrl
    this.hint = hint
  }
}

/**
 * A failed command's stderr: the API's own error body when there is one (it is the contract), else one `pps:` line.
 *
 * @since 0.5.0
 * @category errors
 */
export const describe = (error: unknown): string => {
  if (error instanceof Unreachable) {
    return `pps: ${error.message}: ${CommandLine.networkFailure(error.cause)} (is it running? set PPS_BASE_URL to the API's address)${error.hint}\n`
  }
  if (error instanceof Client.ApiError) return error.body === "" ? `pps: HTTP ${error.status}\n` : `${error.body.trimEnd()}\n`
  return `pps: ${error instanceof Error ? error.message : String(error)}\n`
}

const isHttpUrl = (value: string): boolean => URL.canParse(value) && ["http:", "https:"].includes(new URL(value).protocol)

/**
 * A relative --key-file is read from where the user typed the command: npm and
 * pnpm run scripts from the repository root, and say where they were started in INIT_CWD.
 */
const resolveKeyFile = (keyFile: Option.Option<string>, invocation: CommandLine.InvocationShape): string | undefined =>
  Option.match(keyFile, { onNone: () => undefined, onSome: (file) => path.resolve(invocation.env["INIT_CWD"] ?? invocation.cwd, file) })

/**
 * Runs a command's body with the client and key file every command needs (and the invocation,
 * for what else it reads of the environment or prints), and prints what it returns. `hint`
 * ends the line of an unreachable server; `generatedKey` is the POST key the command drew, told
 * on stderr when it is sent. Retries and that key are told on the invocation's stderr.
 */
const perform = (
  keyFile: Option.Option<string>,
  body: (settings: Commands.Settings, invocation: CommandLine.InvocationShape) => Promise<string>,
  options: { readonly hint?: string; readonly generatedKey?: string | undefined } = {}
): Effect.Effect<void, unknown, CommandLine.Invocation> =>
  CommandLine.Invocation.use((invocation) =>
    Effect.tryPromise({
      try: async () => {
        const env = invocation.env
        const apiKey = env["PPS_API_KEY"]
        if (apiKey === undefined || apiKey === "") throw new Commands.CommandError("PPS_API_KEY is not set: export the account's API key")
        // An empty PPS_BASE_URL means the default, as before; anything else must be an http(s) URL.
        const baseUrl = env["PPS_BASE_URL"] || Client.defaultBaseUrl
        if (!isHttpUrl(baseUrl)) {
          throw new Commands.CommandError(`PPS_BASE_URL is not a URL: ${JSON.stringify(baseUrl)} (expected http://HOST:PORT)`)
        }
        try {
          const client = Connection.make({ apiKey, baseUrl, env, generatedKey: options.generatedKey, note: invocation.stderr })
          const settings: Commands.Settings = {
            client,
            keyFilePath: resolveKeyFile(keyFile, invocation),
            homeDirectory: invocation.homeDirectory,
            note: invocation.stderr
          }
          return await body(settings, invocation)
        } catch (error) {
          // The SDK says "cannot reach the API at <url>: TypeError: fetch failed"; the cause tells what actually happened.
          if (error instanceof Client.TransportError && error.reason === "unreachable") throw new Unreachable(baseUrl, error.cause, options.hint ?? "")
          throw error
        }
      },
      catch: (error) => error
    })
  ).pipe(Effect.flatMap(CommandLine.print))

const keyFile = Flag.String("key-file").pipe(
  Flag.withMetavar("FILE"),
  Flag.withDescription("the account's key file (default ~/.pps/<account_id>.key;\na relative path is read from where the command was typed)"),
  Flag.optional
)
const jsonPrinted = CommandLine.json("accepted; the output is JSON already")
const jsonTable = CommandLine.json("print JSON instead of a table")
/** `--idempotency-key`; `what` the request does at most once per key ("pays"), or `unbound` says why it does not. */
const idempotencyKey = (what: string, unbound?: string) =>
  CommandLine.text(
    "idempotency-key",
    "KEY",
    `the request's Idempotency-Key (default a fresh pps-<uuid>, printed on stderr):\n${unbound ?? `the same key again never ${what} twice (D36)`}`
  ).pipe(Flag.optional)
const amountCheck = { accepts: (value: string) => /^\d+(\.\d+)?$/.test(value), expected: "a decimal number without sign or exponent, such as 12.5" }
const id = (metavar: string, description: string) => Argument.String(metavar.toLowerCase()).pipe(Argument.withMetavar(metavar), Argument.withDescription(description))
/** A POST command's Idempotency-Key: the user's, or one drawn here (`generated`, told on stderr when sent). */
const keyOf = (given: Option.Option<string>): { readonly key: string; readonly generated: string | undefined } =>
  Option.match(given, {
    onSome: (key) => ({ key, generated: undefined }),
    onNone: () => {
      const key = `pps-${crypto.randomUUID()}`
      return { key, generated: key }
    }
  })

/**
 * Runs a command's body with its Idempotency-Key: `given` (the --idempotency-key flag) or, when
 * the flag was not, one drawn here and told on stderr as the first POST leaves. A command that
 * takes no key (`given` undefined: it sends no POST) runs as `perform` runs it.
 */
const keyed = (
  keyFile: Option.Option<string>,
  given: Option.Option<string> | undefined,
  body: (settings: Commands.Settings, idempotencyKey: string | undefined) => Promise<string>
): Effect.Effect<void, unknown, CommandLine.Invocation> => {
  if (given === undefined) return perform(keyFile, (settings) => body(settings, undefined))
  const { key, generated } = keyOf(given)
  return perform(keyFile, (settings) => body(settings, key), { generatedKey: generated })
}

const keygen = Command.make("keygen", {
  keyFile,
  force: CommandLine.toggle("force", "replace an existing key file (refused once the key is registered)"),
  json: jsonPrinted
}, (flags) => perform(flags.keyFile, (settings) => Commands.keygen({ ...settings, force: flags.force }))).pipe(
  Command.withDescription("make the account's encryption key, save it (mode 0600)")
)

const registerKey = Command.make("register-key", { keyFile, json: jsonPrinted }, (flags) => perform(flags.keyFile, Commands.registerKey)).pipe(
  Command.withDescription("register the key with the service (idempotent)")
)

const rotateKey = Command.make("rotate-key", { keyFile, json: jsonPrinted }, (flags) => perform(flags.keyFile, Commands.rotateKey)).pipe(
  Command.withDescription("replace the registered key by a new one, keeping the balance (D55);\nalso the recovery of a lost key. The old key file is kept beside the new one")
)

const balance = Command.make(
  "balance",
  { keyFile, json: jsonTable },
  (flags) => perform(flags.keyFile, (settings) => Commands.balance({ ...settings, json: flags.json }))
).pipe(Command.withDescription("the account's balances, decrypted and proven"))

const isAddress = (value: string): boolean => /^0x[0-9a-fA-F]{40}$/.test(value)

/** The deployment `send` checks the prepare answer against, pinned by PPS_CHAIN_ID and PPS_CONTRACT_<ASSET>. */
const deploymentOf = (env: NodeJS.ProcessEnv): SealedTransfers.Deployment | undefined => {
  const chainId = env["PPS_CHAIN_ID"] || undefined
  const contracts = { USDG: env["PPS_CONTRACT_USDG"] || undefined, ETH: env["PPS_CONTRACT_ETH"] || undefined }
  for (const [asset, address] of Object.entries(contracts)) {
    if (address !== undefined && !isAddress(address)) {
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

/**
 * send's checks of the deployment it seals against, from the environment (a mistake there is
 * exit 1, as before); --owner-wallet, when given, pins the owner's wallet instead of PPS_OWNER_WALLET.
 */
const sendChecks = (env: CommandLine.InvocationShape["env"], ownerWalletFlag: string | undefined): {
  readonly ownerWallet: string | undefined
  readonly rpcUrl: string | undefined
  readonly deployment: SealedTransfers.Deployment | undefined
  readonly trust: SealedTransfers.Trust | undefined
} => {
  const ownerWallet = ownerWalletFlag ?? (env["PPS_OWNER_WALLET"] || undefined)
  if (ownerWallet !== undefined && !isAddress(ownerWallet)) {
    throw new Commands.CommandError(`PPS_OWNER_WALLET is not a 0x address: ${JSON.stringify(ownerWallet)}`)
  }
  const rpcUrl = env["PPS_RPC_URL"] || undefined
  if (rpcUrl !== undefined && !isHttpUrl(rpcUrl)) {
    throw new Commands.CommandError(`PPS_RPC_URL is not a URL: ${JSON.stringify(rpcUrl)} (expected http://HOST:PORT)`)
  }
  const deployment = deploymentOf(env)
  const trust = env["PPS_TRUST"] || undefined
  if (trust !== undefined && trust !== "api" && trust !== "chain") {
    throw new Commands.CommandError(`PPS_TRUST must be api or chain, not ${JSON.stringify(trust)}`)
  }
  return { ownerWallet, rpcUrl, deployment, trust }
}

/** An agent's owner's wallet, pinned (`send`, `mcp`). */
const ownerWallet = CommandLine.text(
  "owner-wallet",
  "0xADDRESS",
  "with an agent's key: its owner's wallet address (default PPS_OWNER_WALLET);\nwith PPS_RPC_URL the owner's key is checked against the chain",
  { accepts: isAddress, expected: "a 0x address of 20 bytes" }
).pipe(Flag.optional)

const send = Command.make("send", {
  to: CommandLine.text("to", "@HANDLE|0xADDRESS", "the recipient: a handle, or a 0x address (then the API's answer must name it)"),
  amount: CommandLine.text("amount", "DECIMAL", "the amount in the asset's units, e.g. 12.5; sealed here, never sent in clear", amountCheck),
  memo: Flag.String("memo").pipe(Flag.withMetavar("TEXT"), Flag.withDescription("a note for the recipient (at most 512 bytes), sealed with the amount"), Flag.optional),
  asset: CommandLine.choice("asset", ["USDG", "ETH"], "the asset (default USDG)", "USDG or ETH").pipe(Flag.optional),
  public: CommandLine.toggle("public", "a standard transfer instead: its amount public on chain, sent in the plain form"),
  idempotencyKey: idempotencyKey("pays"),
  ownerWallet,
  keyFile,
  json: CommandLine.json("print the API's answer body instead of lines")
}, (flags) => {
  // Printed with the result: the same key retried after a lost answer never pays twice (D36).
  const { key, generated } = keyOf(flags.idempotencyKey)
  return perform(flags.keyFile, (settings, invocation) =>
    Commands.send({
      ...settings,
      ...sendChecks(invocation.env, Option.getOrUndefined(flags.ownerWallet)),
      json: flags.json,
      to: flags.to,
      amount: flags.amount,
      memo: Option.getOrUndefined(flags.memo),
      asset: Option.getOrUndefined(flags.asset),
      public: flags.public,
      idempotencyKey: key
    }), { hint: `; retry with --idempotency-key ${key}`, generatedKey: generated })
}).pipe(Command.withDescription("a transfer, sealed here: no request carries amount or memo\n(--public: a standard transfer, its amount public on chain)"))

const refund = Command.make("refund", {
  transferId: id("ID", "the transfer to refund (tr_...), one this account received"),
  amount: CommandLine.text("amount", "DECIMAL", "how much to send back (default the whole amount, read from your copy);\nsealed here, never sent in clear", amountCheck).pipe(Flag.optional),
  memo: Flag.String("memo").pipe(Flag.withMetavar("TEXT"), Flag.withDescription("a note for the original's sender (at most 512 bytes), sealed with the amount"), Flag.optional),
  idempotencyKey: idempotencyKey("refunds"),
  ownerWallet,
  keyFile,
  json: CommandLine.json("print the API's answer body instead of lines")
}, (flags) => {
  // Printed with the result: the same key retried after a lost answer never refunds twice (D36).
  const { key, generated } = keyOf(flags.idempotencyKey)
  return perform(flags.keyFile, (settings, invocation) =>
    Commands.refund({
      ...settings,
      ...sendChecks(invocation.env, Option.getOrUndefined(flags.ownerWallet)),
      json: flags.json,
      transferId: flags.transferId,
      amount: Option.getOrUndefined(flags.amount),
      memo: Option.getOrUndefined(flags.memo),
      idempotencyKey: key
    }), { hint: `; retry with --idempotency-key ${key}`, generatedKey: generated })
}).pipe(Command.withDescription("up to a received transfer's amount, sent back to its sender (D43), sealed here"))

const limit = CommandLine.text("limit", "N", "how many, newest first (default 20)", {
  accepts: (value) => /^(100|[1-9][0-9]?)$/.test(value),
  expected: "an integer from 1 to 100"
}).pipe(Flag.withDefault("20"), Flag.map(Number))

const transfers = Command.make("transfers").pipe(
  Command.withDescription("the account's transfers"),
  Command.withSubcommands([
    Command.make("list", {
      limit,
      includeAgents: CommandLine.toggle("include-agents", "also the transfers of the account's agents"),
      keyFile,
      json: jsonTable
    }, (flags) =>
      perform(flags.keyFile, (settings) =>
        Commands.listTransfers({ ...settings, json: flags.json, limit: flags.limit, includeAgents: flags.includeAgents }))).pipe(
      Command.withDescription("the newest transfers, amounts and memos decrypted here")
    ),
    Command.make("get", { transferId: id("ID", "the transfer's id (tr_...)"), keyFile, json: jsonTable }, (flags) =>
      perform(flags.keyFile, (settings) => Commands.decryptTransfer({ ...settings, json: flags.json, transferId: flags.transferId }))).pipe(
      Command.withDescription("one transfer's amount and memo, checked against the chain")
    ),
    refund
  ])
)

const transactionId = id("ID", "the held transaction's id (from approvals list)")
const approvals = Command.make("approvals").pipe(
  Command.withDescription("agent transactions held for the owner's approval"),
  Command.withSubcommands([
    Command.make("list", { keyFile, json: jsonTable }, (flags) =>
      perform(flags.keyFile, (settings) => Commands.listApprovals({ ...settings, json: flags.json }))).pipe(
      Command.withDescription("held agent transactions, with the amount the guardian would pay")
    ),
    Command.make("approve", { transactionId, idempotencyKey: idempotencyKey("decides"), keyFile, json: jsonTable }, (flags) =>
      keyed(flags.keyFile, flags.idempotencyKey, (settings, key) =>
        Commands.decide({ ...settings, json: flags.json, transactionId: flags.transactionId, action: "approve", idempotencyKey: key }))).pipe(
      Command.withDescription("approve one (refused here if the agent's note disagrees)")
    ),
    Command.make("reject", { transactionId, idempotencyKey: idempotencyKey("decides"), json: jsonTable }, (flags) =>
      keyed(Option.none(), flags.idempotencyKey, (settings, key) =>
        Commands.decide({ ...settings, json: flags.json, transactionId: flags.transactionId, action: "reject", idempotencyKey: key }))).pipe(
      Command.withDescription("reject one")
    )
  ])
)

const policyJson = (description: string) => CommandLine.text("policy", "JSON", description)
const agentsCommand = (
  json: boolean,
  action: "create" | "list" | "policy-get" | "policy-set",
  fields: {
    readonly name?: string
    readonly agentId?: string
    readonly policy?: string
    readonly idempotencyKey?: Option.Option<string>
    readonly limit?: number
    readonly offset?: number
  } = {}
) =>
  keyed(Option.none(), fields.idempotencyKey, (settings, idempotencyKey) =>
    Commands.agents({
      ...settings,
      json,
      action,
      name: fields.name,
      agentId: fields.agentId,
      policy: fields.policy,
      idempotencyKey,
      limit: fields.limit,
      offset: fields.offset
    }))

const agentId = id("AGENT_ID", "the agent's account id (acct_...)")

const agentKeysCommand = (
  json: boolean,
  action: "create" | "list" | "revoke" | "rotate",
  fields: {
    readonly agentId: string
    readonly name?: string | Option.Option<string>
    readonly keyId?: string
    readonly idempotencyKey?: Option.Option<string>
  }
) =>
  keyed(Option.none(), fields.idempotencyKey, (settings, idempotencyKey) =>
    Commands.agentKeys({
      ...settings,
      json,
      action,
      agentId: fields.agentId,
      name: typeof fields.name === "object" ? Option.getOrUndefined(fields.name) : fields.name,
      keyId: fields.keyId,
      idempotencyKey
    }))

const agentKeys = Command.make("keys").pipe(
  Command.withDescription("an agent's API keys, managed by its owner (D44)"),
  Command.withSubcommands([
    Command.make("create", {
      agentId,
      name: CommandLine.text("name", "NAME", "the key's name (1-100 characters), to recognise it by"),
      idempotencyKey: idempotencyKey("creates a key"),
      json: jsonTable
    }, (flags) => agentKeysCommand(flags.json, "create", flags)).pipe(
      Command.withDescription("a key for the agent, of its mode; its value is printed this once,\nwith the owner's wallet address (the agent's PPS_TRUST=chain pin)")
    ),
    Command.make("list", { agentId, json: jsonTable }, (flags) => agentKeysCommand(flags.json, "list", flags)).pipe(
      Command.withDescription("the agent's keys (never their values): last use, requests, revoked")
    ),
    Command.make("revoke", { agentId, keyId: id("KEY_ID", "the key's id (key_...)"), idempotencyKey: idempotencyKey("revokes"), json: jsonTable }, (flags) =>
      agentKeysCommand(flags.json, "revoke", flags)).pipe(
      Command.withDescription("revoke one: its next request is refused (401)")
    ),
    Command.make("rotate", {
      agentId,
      keyId: id("KEY_ID", "the key to replace (key_...)"),
      name: CommandLine.text("name", "NAME", "the new key's name (default: the old key's)").pipe(Flag.optional),
      idempotencyKey: idempotencyKey("replaces the key"),
      json: jsonTable
    }, (flags) => agentKeysCommand(flags.json, "rotate", flags)).pipe(
      Command.withDescription("replace a leaked key in one step (D56): a new key, its value printed\nthis once, and the old one revoked in the same transaction (its next request: 401)")
    )
  ])
)

const agents = Command.make("agents").pipe(
  Command.withDescription("the account's agent accounts (D21, D22)"),
  Command.withSubcommands([
    Command.make("create", {
      name: CommandLine.text("name", "NAME", "the agent's name; its handle is @<owner>/<name>"),
      policy: policyJson("its spend policy as a JSON object, e.g. '{\"daily_limit_usdg\":100,\"per_transaction_limit_usdg\":20}'"),
      idempotencyKey: idempotencyKey("creates an agent"),
      json: jsonTable
    }, (flags) => agentsCommand(flags.json, "create", flags)).pipe(
      Command.withDescription("an agent account with its spend policy (D21, D22)")
    ),
    Command.make("list", {
      limit: CommandLine.text("limit", "N", "how many, oldest first (default 20)", {
        accepts: (value) => /^(100|[1-9][0-9]?)$/.test(value),
        expected: "an integer from 1 to 100"
      }).pipe(Flag.withDefault("20"), Flag.map(Number)),
      offset: CommandLine.text("offset", "N", "how many to skip (default 0)", {
        accepts: (value) => /^(0|[1-9][0-9]{0,14})$/.test(value),
        expected: "an integer from 0"
      }).pipe(Flag.withDefault("0"), Flag.map(Number)),
      json: jsonTable
    }, (flags) => agentsCommand(flags.json, "list", { limit: flags.limit, offset: flags.offset })).pipe(
      Command.withDescription("a page of the account's agents (D61)")
    ),
    agentKeys,
    Command.make("policy", {
      agentId: Argument.String("agent_id").pipe(
        Argument.withMetavar("AGENT_ID"),
        Argument.withDescription("the agent's account id (acct_...); without it, the key's own\n(an agent key reads its own policy, D42)"),
        Argument.optional
      ),
      json: jsonTable
    }, (flags) =>
      perform(Option.none(), (settings) =>
        Commands.agentPolicy({ ...settings, json: flags.json, agentId: Option.getOrUndefined(flags.agentId) }))).pipe(
      Command.withDescription("an agent's spend policy; with an agent key and no id, its own")
    ),
    Command.make("transactions").pipe(
      Command.withDescription("an agent's held transactions (D42)"),
      Command.withSubcommands([
        Command.make("get", { transactionId: id("ID", "the held transaction's id (atx_...)"), json: jsonTable }, (flags) =>
          perform(Option.none(), (settings) =>
            Commands.agentTransaction({ ...settings, json: flags.json, transactionId: flags.transactionId }))).pipe(
          Command.withDescription("its state: pending_approval, approved (with its transfer), rejected\nor expired; never an amount (the agent's key or its owner's)")
        )
      ])
    )
  ])
)

const policy = Command.make("policy").pipe(
  Command.withDescription("an agent's spend policy"),
  Command.withSubcommands([
    Command.make("get", { agentId, json: jsonTable }, (flags) => agentsCommand(flags.json, "policy-get", flags)).pipe(
      Command.withDescription("an agent's spend policy")
    ),
    Command.make("set", {
      agentId,
      policy: policyJson("the fields to change as a JSON object, e.g. '{\"daily_limit_usdg\":50}'"),
      json: jsonTable
    }, (flags) => agentsCommand(flags.json, "policy-set", flags)).pipe(
      Command.withDescription("change some of its fields (PATCH)")
    )
  ])
)

type WebhookAction = "create" | "list" | "get" | "update" | "delete" | "deliveries" | "replay" | "rotate-secret"
const webhooksCommand = (
  json: boolean,
  action: WebhookAction,
  fields: {
    readonly webhookId?: string
    readonly eventId?: string
    readonly url?: string | undefined
    readonly events?: string | undefined
    readonly enabled?: boolean | undefined
    readonly idempotencyKey?: Option.Option<string>
  } = {}
) =>
  keyed(Option.none(), fields.idempotencyKey, (settings, idempotencyKey) =>
    Commands.webhooks({
      ...settings,
      json,
      action,
      webhookId: fields.webhookId,
      eventId: fields.eventId,
      url: fields.url,
      events: fields.events,
      enabled: fields.enabled,
      idempotencyKey
    }))

const webhookId = id("ID", "the subscription's id (wh_...)")
/** A webhooks command that takes the subscription's id and nothing else. */
const webhookById = (action: "get" | "delete" | "deliveries", description: string) =>
  Command.make(action, { webhookId, json: jsonTable }, (flags) => webhooksCommand(flags.json, action, flags)).pipe(
    Command.withDescription(description)
  )

const webhooks = Command.make("webhooks").pipe(
  Command.withDescription("the account's webhook subscriptions (D33-D35)"),
  Command.withSubcommands([
    Command.make("create", {
      url: CommandLine.text("url", "URL", "where the events are delivered (https)"),
      events: CommandLine.text("events", "a,b", "the event types, comma-separated, e.g. transfer.confirmed"),
      idempotencyKey: idempotencyKey("subscribes"),
      json: jsonTable
    }, (flags) => webhooksCommand(flags.json, "create", flags)).pipe(
      Command.withDescription("a subscription; its secret is shown this once")
    ),
    Command.make("list", { json: jsonTable }, (flags) => webhooksCommand(flags.json, "list")).pipe(
      Command.withDescription("the subscriptions (no secrets)")
    ),
    webhookById("get", "one subscription (D59)"),
    Command.make("update", {
      webhookId,
      url: CommandLine.text("url", "URL", "a new URL").pipe(Flag.optional),
      events: CommandLine.text("events", "a,b", "the new event types, comma-separated").pipe(Flag.optional),
      enabled: CommandLine.choice("enabled", ["true", "false"], "false pauses its deliveries, true resumes them").pipe(Flag.optional),
      json: jsonTable
    }, (flags) =>
      webhooksCommand(flags.json, "update", {
        webhookId: flags.webhookId,
        url: Option.getOrUndefined(flags.url),
        events: Option.getOrUndefined(flags.events),
        enabled: Option.getOrUndefined(Option.map(flags.enabled, (value) => value === "true"))
      })).pipe(Command.withDescription("change its url, events or enabled (D59)")),
    webhookById("delete", "delete one"),
    webhookById("deliveries", "its deliveries, newest first"),
    Command.make("rotate-secret", { webhookId, idempotencyKey: idempotencyKey("rotates", "a rotation is not bound to it: a retry after a fault rotates again"), json: jsonTable }, (flags) =>
      webhooksCommand(flags.json, "rotate-secret", flags)).pipe(
      Command.withDescription("a new secret, shown this once")
    ),
    Command.make("replay", {
      webhookId,
      eventId: id("EVENT_ID", "the event's id (evt_...)"),
      idempotencyKey: idempotencyKey("delivers"),
      json: jsonTable
    }, (flags) =>
      webhooksCommand(flags.json, "replay", flags)).pipe(
      Command.withDescription("deliver one event to it again")
    )
  ])
)

const faucet = Command.make("faucet", {
  amount: CommandLine.text("amount", "DECIMAL", `how much test USDG (default ${faucetAmountDefault}, at most 1000000)`, amountCheck).pipe(
    Flag.withDefault(faucetAmountDefault)
  ),
  // The faucet grants USDG only: refused here, by the flag's name, rather than by the API's field.
  asset: CommandLine.choice("asset", ["USDG"], "the asset; the faucet grants USDG only", "USDG for the faucet").pipe(Flag.optional),
  idempotencyKey: idempotencyKey("grants"),
  json: jsonTable
}, (flags) =>
  keyed(Option.none(), flags.idempotencyKey, (settings, idempotencyKey) =>
    Commands.faucet({ ...settings, json: flags.json, amount: flags.amount, asset: Option.getOrUndefined(flags.asset), idempotencyKey }))).pipe(
  Command.withDescription("test USDG (default 100) shielded into the account (test keys only)")
)

const listen = Command.make("listen", {
  forwardTo: CommandLine.text("forward-to", "URL", "where each event is POSTed, signed as a webhook", {
    accepts: isHttpUrl,
    expected: "an http(s) URL such as http://127.0.0.1:3000/hook"
  }),
  events: CommandLine.text("events", "a,b", "only these event types, comma-separated (default all)").pipe(Flag.optional),
  printSecret: CommandLine.toggle("print-secret", "print the signing secret (stable for this account and mode on this machine) and exit"),
  json: CommandLine.json("print one JSON object a line (the secret, each delivery) instead of text")
}, (flags) => {
  if (flags.printSecret) {
    return perform(Option.none(), async (settings, invocation) => {
      const secret = await Commands.listenSecret(settings, invocation.homeDirectory)
      return flags.json ? `${JSON.stringify({ secret })}\n` : `${secret}\n`
    })
  }
  const stop = new Promise<void>((resolve) => {
    process.once("SIGINT", () => resolve())
    process.once("SIGTERM", () => resolve())
  })
  return perform(Option.none(), (settings, invocation) =>
    Commands.listenSecret(settings, invocation.homeDirectory).then((secret) =>
    Commands.listen({
      ...settings,
      json: flags.json,
      forwardTo: flags.forwardTo,
      events: Option.getOrUndefined(flags.events),
      secret,
      out: invocation.stdout,
      stop
    })))
}).pipe(
  Command.withDescription("receive the account's events live and forward each to URL,\nsigned with this account's listen secret it prints (Ctrl-C stops)")
)

const trigger = Command.make("trigger", {
  event: Argument.String("event").pipe(
    Argument.withMetavar("EVENT"),
    Argument.withDescription(`the event type to make happen, one of (transfer.failed is refused:\nonly the chain fails a transfer):\n${Trigger.triggerableTypes.join("\n")}`),
    // CommandLine completes the line: "EVENT must be <this>, not <value>".
    Argument.filterMap(
      (value) => Option.fromNullishOr(Trigger.triggerableTypes.find((type) => type === value)),
      () => `one of ${Trigger.triggerableTypes.join("|")}`
    )
  ),
  idempotencyKey: idempotencyKey("makes the event happen"),
  json: CommandLine.json("print one JSON object instead of lines")
}, (flags) => {
  // Each step's key is derived from this one (printed with the result), so a repeat acts once (D36).
  const { key, generated } = keyOf(flags.idempotencyKey)
  return perform(Option.none(), (settings, invocation) =>
    Trigger.trigger({
      ...settings,
      json: flags.json,
      event: flags.event,
      idempotencyKey: key,
      // The agent's requests are retried and told on stderr as the command's own are.
      connect: (apiKey) => Connection.make({ apiKey, baseUrl: settings.client.baseUrl, env: invocation.env, generatedKey: undefined, note: invocation.stderr })
    }), { generatedKey: generated })
}).pipe(
  Command.withDescription("make EVENT happen for real in test mode (D64): the account's agent `trigger`,\nfunded by the faucet, pays it, is held, approved, rejected, lapses or has its policy\nchanged, so the event is recorded, streamed and delivered; prints the ids (test keys only)")
)

const events = Command.make("events").pipe(
  Command.withDescription("the account's recorded events, within retention (D59)"),
  Command.withSubcommands([
    Command.make("list", {
      type: CommandLine.text("type", "a,b", "only these event types, comma-separated").pipe(Flag.optional),
      json: jsonTable
    }, (flags) =>
      perform(Option.none(), (settings) =>
        Commands.events({ ...settings, json: flags.json, action: "list", eventId: undefined, type: Option.getOrUndefined(flags.type), limit: 100 }))).pipe(
      Command.withDescription("the newest 100, newest first")
    ),
    Command.make("get", { eventId: id("EVENT_ID", "the event's id (evt_...)"), json: jsonTable }, (flags) =>
      perform(Option.none(), (settings) =>
        Commands.events({ ...settings, json: flags.json, action: "get", eventId: flags.eventId, type: undefined, limit: undefined }))).pipe(
      Command.withDescription("one event, its payload under data.object")
    )
  ])
)

const keys = Command.make("keys", { keyFile, json: jsonTable }, (flags) =>
  perform(flags.keyFile, (settings) => Commands.keys({ ...settings, json: flags.json }))).pipe(
  Command.withDescription("the account's API keys: last use, requests, decrypted totals")
)

const decryptTransfer = Command.make("decrypt-transfer", { transferId: id("ID", "the transfer's id (tr_...)"), keyFile, json: jsonTable }, (flags) =>
  perform(flags.keyFile, (settings) => Commands.decryptTransfer({ ...settings, json: flags.json, transferId: flags.transferId }))).pipe(
  Command.withDescription("a transfer's amount and memo, checked against the chain")
)

/** `HOST:PORT` of `mcp --http`: a loopback host (the server is the holder's, on its machine) and a port. */
const loopbackAddress = /^(127\.0\.0\.1|localhost):([1-9][0-9]{0,4})$/

const mcpTransport = (http: Option.Option<string>): McpEntry.Transport => {
  if (Option.isNone(http)) return { kind: "stdio" }
  const [, host, port] = loopbackAddress.exec(http.value) ?? []
  // The flag's check accepted the value, so it matches.
  return { kind: "http", host: host === "localhost" ? "localhost" : "127.0.0.1", port: Number(port) }
}

const mcp = Command.make("mcp", {
  http: CommandLine.text("http", "127.0.0.1:PORT", "serve Streamable HTTP on this loopback address instead of stdio,\nbehind a bearer token printed on stderr at start", {
    accepts: (value) => loopbackAddress.test(value) && Number(value.split(":")[1]) <= 65_535,
    expected: "127.0.0.1:PORT or localhost:PORT (a port from 1 to 65535)"
  }).pipe(Flag.optional),
  ownerWallet,
  keyFile,
  json: CommandLine.json("accepted; changes nothing (MCP's messages are JSON)")
}, (flags) =>
  perform(flags.keyFile, (settings, invocation) =>
    Commands.mcp({
      ...settings,
      ...sendChecks(invocation.env, Option.getOrUndefined(flags.ownerWallet)),
      transport: mcpTransport(flags.http)
    }))).pipe(
  Command.withDescription("an MCP server for AI agents (package @pps/mcp): pay, transfers,\nspend policy, approvals; balance with an account's key file")
)

const x402Fetch = Command.make("fetch", {
  url: id("URL", "the http(s) URL to GET"),
  max: CommandLine.text("max", "DECIMAL", "the most this request may cost, in USDG (e.g. 0.05)", amountCheck),
  ownerWallet,
  keyFile,
  json: CommandLine.json("print {status, content_type, transfer_id, body} as JSON")
}, (flags) =>
  perform(flags.keyFile, (settings, invocation) =>
    Commands.x402Fetch({
      ...settings,
      ...sendChecks(invocation.env, Option.getOrUndefined(flags.ownerWallet)),
      url: flags.url,
      max: flags.max,
      json: flags.json
    }))).pipe(
  Command.withDescription("GET a URL, paying its 402 with the confidential x402 scheme (pps-sealed,\npackage @pps/x402): sealed here, at most --max USDG, once for this request")
)

const x402 = Command.make("x402").pipe(
  Command.withSubcommands([x402Fetch]),
  Command.withDescription("HTTP 402 payments (x402) with the confidential scheme pps-sealed (D57)")
)

/**
 * The `pps` command tree, in the order the usage lists it.
 *
 * @since 0.5.0
 * @category commands
 */
export const pps = Command.make("pps").pipe(
  Command.withSubcommands([
    keygen,
    registerKey,
    rotateKey,
    balance,
    send,
    transfers,
    approvals,
    agents,
    policy,
    webhooks,
    events,
    faucet,
    listen,
    trigger,
    keys,
    decryptTransfer,
    mcp,
    x402
  ])
)
