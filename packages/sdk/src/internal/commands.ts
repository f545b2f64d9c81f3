/**
 * The commands of `pnpm pps`, each a function from its settings to the text it
 * prints on stdout. They fail by throwing the SDK's errors; the entry point
 * (src/cli.ts) turns those into stderr lines and exit status 1, and a
 * `UsageMistake` (a command that cannot run as written, such as `keygen` with an
 * agent's key) into the usage and exit status 2. The outputs are a contract,
 * documented in docs/operations.md.
 *
 * @since 0.1.0
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { PolicyRule } from "@pps/api/Errors"
import { EncryptionKey } from "@pps/crypto"
import { Effect, Option } from "effect"
import { HttpClientResponse } from "effect/http"
import * as Account from "../Account.ts"
import * as Amount from "../Amount.ts"
import { networkFailure, UsageMistake } from "../cli/CommandLine.ts"
import * as ApiKeys from "../ApiKeys.ts"
import * as Client from "../Client.ts"
import * as Confidential from "../Confidential.ts"
import { ApiError } from "../Errors.ts"
import * as KeyFile from "../KeyFile.ts"
import { Pps } from "../Pps.ts"
import * as SealedTransfers from "../SealedTransfers.ts"
import * as Webhook from "../Webhook.ts"
import * as McpEntry from "../cli/McpEntry.ts"
import * as X402Entry from "../cli/X402Entry.ts"
import { createdTransfer } from "./created.ts"
import { run } from "./typedClient.ts"

/** A failure the user can act on, printed as `pps: <message>`. */
export class CommandError extends Error {
  override readonly name = "CommandError"
}

/**
 * What every command needs: the client, the key file named by --key-file (if any), the home
 * directory the default key file is under, and where to tell what is not the result (stderr).
 */
export interface Settings {
  readonly client: Client.Client
  readonly keyFilePath: string | undefined
  readonly homeDirectory: string
  readonly note: (text: string) => void
}

const json = (value: unknown) => `${JSON.stringify(value)}\n`

/** Left-aligned columns separated by two spaces. */
const table = (rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => row[column]?.length ?? 0))) ?? []
  return rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join("  ").trimEnd() + "\n").join("")
}

/** What an agent's key is told where an account's key file would be needed: there is none (D21). */
const agentsUseTheirOwnersKey = (account: Account.Account) =>
  `PPS_API_KEY is the key of agent ${account.handle}: agents use their owner's key, so an agent has no key file`

/** The key file of the API key's account, checked to belong to it; an agent has none. */
const accountKey = async (
  settings: Settings,
  known?: Account.Account
): Promise<{ readonly accountId: string; readonly keyFile: KeyFile.KeyFile }> => {
  const account = known ?? await Account.me(settings.client)
  if (account.type === "agent") {
    throw new CommandError(`${agentsUseTheirOwnersKey(account)}; this command needs it: run it with the owner's API key`)
  }
  const filePath = settings.keyFilePath ?? KeyFile.defaultPath(account.account_id, settings.homeDirectory)
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
  if (account.type === "agent") throw new UsageMistake(`${agentsUseTheirOwnersKey(account)}; keygen is for an account's key`)
  const filePath = settings.keyFilePath ?? KeyFile.defaultPath(account.account_id, settings.homeDirectory)
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
  const account = await Account.me(settings.client)
  if (account.type === "agent") throw new UsageMistake(`${agentsUseTheirOwnersKey(account)}; register-key is for an account's key`)
  const { accountId, keyFile } = await accountKey(settings, account)
  const registration = await Confidential.registerKey(settings.client, keyFile.keyPair)
  return json({ account_id: accountId, public_key: registration.public_key, confidential_ready: registration.confidential_ready })
}

/**
 * `rotate-key` (D55): a new key replaces the registered one and the balance is kept (the guardian
 * re-encrypts it). The old key is not needed, so this is also the recovery of a lost key. The new
 * key is written to `<key file>.next` before anything is sent (a run cut off reuses it), and only
 * once the service answers does it become the key file, the old one kept beside it as
 * `<key file>.replaced-<time>` (transfers sealed before the rotation open only with it).
 */
export const rotateKey = async (settings: Settings): Promise<string> => {
  const account = await Account.me(settings.client)
  if (account.type === "agent") throw new UsageMistake(`${agentsUseTheirOwnersKey(account)}; rotate-key is for an account's key`)
  const status = await Confidential.encryptionKeyStatus(settings.client)
  if (status.public_key === null) {
    throw new CommandError(`account ${account.account_id} has no registered key to replace: use keygen and register-key`)
  }
  const filePath = settings.keyFilePath ?? KeyFile.defaultPath(account.account_id)
  const nextPath = `${filePath}.next`
  if (!fs.existsSync(nextPath)) KeyFile.write(nextPath, { accountId: account.account_id, keyPair: EncryptionKey.generate() }, { overwrite: false })
  const next = KeyFile.read(nextPath)
  if (next.accountId !== account.account_id) throw new CommandError(`${nextPath} holds another account's key; move it away first`)
  const rotated = await Confidential.rotateKey(settings.client, next.keyPair)
  const replacedPath = fs.existsSync(filePath) ? `${filePath}.replaced-${new Date().toISOString().replace(/[:.]/g, "-")}` : null
  if (replacedPath !== null) fs.renameSync(filePath, replacedPath)
  fs.renameSync(nextPath, filePath)
  return json({ account_id: account.account_id, public_key: rotated.public_key, key_file: filePath, replaced_key_file: replacedPath })
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

/** What a sealed `send` or `transfers refund` is checked against, and how to print it. */
type SealSettings = Settings & {
  readonly json: boolean
  readonly idempotencyKey: string
  readonly ownerWallet: string | undefined
  readonly rpcUrl: string | undefined
  readonly deployment: SealedTransfers.Deployment | undefined
  readonly trust: SealedTransfers.Trust | undefined
}

/** What `send` is given: the transfer, the checks of the deployment it seals against, and how to print. */
type SendSettings = SealSettings & {
  readonly to: string
  readonly amount: string
  readonly memo: string | undefined
  readonly asset: string | undefined
  readonly public: boolean
}

/** A standard transfer in the plain form: its amount is public on chain anyway. */
const sendPublic = async (settings: SendSettings): Promise<SealedTransfers.SentTransfer> => {
  const [body, response] = await run(settings.client, (api) =>
    api.transfers.create({
      payload: {
        to: settings.to,
        amount: settings.amount,
        confidential: false,
        ...(settings.memo === undefined ? {} : { memo: settings.memo }),
        ...(settings.asset === undefined ? {} : { asset: settings.asset })
      },
      responseMode: "decoded-and-response"
    }), settings.idempotencyKey)
  return { status: response.status, body }
}

/**
 * A transfer sealed here. An account's copy is sealed to its key file's key (the answer must
 * name it), and the same send retried with its idempotency key seals the very same request.
 * An agent has no key file (D21): its copy is sealed to its owner's key as the API answers
 * it, checked against the chain with --owner-wallet and PPS_RPC_URL.
 */
const sendSealed = async (settings: SendSettings): Promise<SealedTransfers.SentTransfer> => {
  const { options } = await sealOptionsOf(settings, "send")
  return SealedTransfers.send(settings.client, {
    to: settings.to,
    amount: settings.amount,
    ...(settings.memo === undefined ? {} : { memo: settings.memo }),
    ...(settings.asset === undefined ? {} : { asset: settings.asset })
  }, options)
}

/**
 * The key pair a sealed command seals with (an account's key file's; an agent has none, D21) and
 * the options it seals with: the account's copy sealed to its own key (the answer must name it),
 * the same request again with the same idempotency key, and the deployment's checks.
 */
const sealOptionsOf = async (settings: SealSettings, command: string) => {
  const account = await Account.me(settings.client)
  const isAgent = account.type === "agent"
  if (isAgent && settings.keyFilePath !== undefined) {
    throw new UsageMistake(`${agentsUseTheirOwnersKey(account)}; ${command} takes no --key-file with it (pin the owner's wallet with --owner-wallet)`)
  }
  const own = isAgent ? undefined : (await accountKey(settings, account)).keyFile.keyPair
  const options: SealedTransfers.SendOptions = {
    ...(own === undefined ? {} : { senderKey: own.publicKey, sealingSecret: own.secretKey }),
    idempotencyKey: settings.idempotencyKey,
    ...(settings.ownerWallet === undefined ? {} : { ownerWallet: settings.ownerWallet }),
    ...(settings.rpcUrl === undefined ? {} : { rpcUrl: settings.rpcUrl }),
    ...(settings.deployment === undefined ? {} : { deployment: settings.deployment }),
    ...(settings.trust === undefined ? {} : { trust: settings.trust })
  }
  return { own, options }
}

/** Each rule of D25 in a person's words (the API's `reason`; `param` names the policy field). */
const policyRuleWords: ReadonlyMap<string, string> = new Map(Object.entries({
  asset_not_allowed: "the agent may not pay in this asset",
  recipient_not_allowed: "the recipient is not one the agent may pay",
  outside_active_hours: "the agent may not pay at this hour",
  per_transaction_limit_exceeded: "the amount is above the agent's per-transaction limit",
  daily_limit_exceeded: "the amount would take the agent past its daily limit"
} satisfies Record<PolicyRule, string>))

/**
 * A 403 `policy_violation` said in a person's words, naming the rule and the policy field
 * (with --json, or for a rule this client does not know, the API's body as usual).
 */
const inWords = (json: boolean) => (error: unknown): never => {
  if (json || !(error instanceof ApiError) || error.code !== "policy_violation") throw error
  const words = policyRuleWords.get(error.reason ?? "")
  if (words === undefined) throw error
  throw new CommandError(
    `refused by the agent's spend policy: ${words} (rule ${error.reason}, policy field ${error.param ?? "unnamed"}); nothing was paid (request ${error.requestId ?? "unknown"})`
  )
}

/**
 * `send`: a transfer. Confidential by default and sealed here (`SealedTransfers.send`): no
 * request carries the amount or memo in clear. `public` sends a standard transfer in the
 * plain form (its amount is public on chain anyway). With `rpcUrl` and a pinned
 * `deployment` the chain, the contract and the guardian's and recipient's keys (and with
 * `ownerWallet` an agent's owner's) are checked before anything is sealed; without them the
 * api tier is trusted for the keys.
 */
export const send = async (settings: SendSettings): Promise<string> =>
  printCreated(await (settings.public ? sendPublic(settings) : sendSealed(settings)).catch(inWords(settings.json)), settings)

/** A create's or a refund's answer: the API's body with `json`, else the transfer (or the hold) as lines. */
const printCreated = (answer: SealedTransfers.SentTransfer, settings: { readonly json: boolean; readonly idempotencyKey: string }) => {
  if (settings.json) return json(answer.body)
  const created = createdTransfer(answer.body)
  // 202: an agent's transfer above its approval threshold waits for its owner (D26).
  if (created.kind === "held") {
    return table([
      ["transaction_id", created.held.transaction_id],
      ["status", created.held.status],
      ["expires_at", created.held.expires_at],
      ["idempotency_key", settings.idempotencyKey]
    ]) + `held: above the agent's approval threshold, waiting for the owner's approval until ${created.held.expires_at}\n`
  }
  return table([
    ["transfer_id", created.transfer.transfer_id],
    ["status", created.transfer.status],
    ["to", created.transfer.to],
    ["asset", created.transfer.asset],
    ["confidential", String(created.transfer.confidential)],
    ...(created.transfer.refund_of === null ? [] : [["refund_of", created.transfer.refund_of]]),
    ["idempotency_key", settings.idempotencyKey]
  ])
}

/**
 * `transfers refund ID`: sends up to a received transfer's amount back to its sender (D43),
 * sealed here as `send` is. Without `amount`, the whole amount, opened from the account's own
 * copy with its key file (an agent, whose copy is its owner's, names the amount).
 */
export const refund = async (
  settings: SealSettings & { readonly transferId: string; readonly amount: string | undefined; readonly memo: string | undefined }
): Promise<string> => {
  const { options, own } = await sealOptionsOf(settings, "transfers refund")
  const answer = await SealedTransfers.refund(settings.client, {
    transferId: settings.transferId,
    ...(settings.amount === undefined ? {} : { amount: settings.amount }),
    ...(settings.memo === undefined ? {} : { memo: settings.memo })
  }, { ...options, ...(own === undefined ? {} : { keyPair: own }) }).catch(inWords(settings.json))
  return printCreated(answer, settings)
}

/** `transfers list`: the newest transfers with their amounts and memos opened here. */
export const listTransfers = async (
  settings: Settings & { readonly json: boolean; readonly limit: number; readonly includeAgents: boolean }
): Promise<string> => {
  const { keyFile } = await accountKey(settings)
  const page = await run(settings.client, (api) =>
    api.transfers.list({ query: { limit: settings.limit, ...(settings.includeAgents ? { include_agents: true } : {}) } }))
  const rows = await Promise.all(page.data.map(async (transfer) => {
    // A copy that cannot be checked (a standard transfer's recipient) or opened is shown as such, never guessed.
    const opened = await Confidential.decryptTransfer(settings.client, keyFile.keyPair, transfer.transfer_id).then(
      (decrypted) => ({ amount: Amount.format(transfer.asset, decrypted.amount), memo: decrypted.memo }),
      (error: unknown) => ({ amount: error instanceof Confidential.ConfidentialError ? `(${error.reason})` : "(unavailable)", memo: "" })
    )
    return {
      transfer_id: transfer.transfer_id,
      status: transfer.status,
      direction: transfer.direction,
      from: transfer.from,
      to: transfer.to,
      asset: transfer.asset,
      amount: opened.amount,
      memo: opened.memo,
      created_at: transfer.created_at
    }
  }))
  if (settings.json) return json({ data: rows, has_more: page.has_more })
  return table([
    ["transfer_id", "status", "direction", "from", "to", "asset", "amount", "memo"],
    ...rows.map((row) => [row.transfer_id, row.status, row.direction, row.from, row.to, row.asset, row.amount, row.memo])
  ])
}

/** `approvals list`: the held transactions waiting for this owner, with the amount the guardian would pay. */
export const listApprovals = async (settings: Settings & { readonly json: boolean }): Promise<string> => {
  const { keyFile } = await accountKey(settings)
  const { pending } = await run(settings.client, (api) => api.agents.pending())
  const rows = await Promise.all(pending.map(async (held) => {
    const opened = await Confidential.openHeld(settings.client, keyFile.keyPair, held.transaction_id)
    return {
      transaction_id: held.transaction_id,
      agent: held.agent,
      to: held.to,
      asset: opened.asset,
      amount: Amount.format(opened.asset, opened.amount),
      memo: opened.memo,
      // The agent's own note stating another amount than the guardian would pay: never approve that.
      note_matches: opened.noteMatches,
      expires_at: held.expires_at
    }
  }))
  if (settings.json) return json({ pending: rows })
  return table([
    ["transaction_id", "agent", "to", "asset", "amount", "memo", "note", "expires_at"],
    ...rows.map((row) => [
      row.transaction_id,
      row.agent,
      row.to,
      row.asset,
      row.amount,
      row.memo,
      row.note_matches === false ? "MISMATCH: do not approve" : "ok",
      row.expires_at
    ])
  ])
}

/**
 * `approvals approve|reject ID`. An approval first opens the transaction here and refuses
 * one whose agent note disagrees with what the guardian would pay.
 */
export const decide = async (
  settings: Settings & {
    readonly json: boolean
    readonly transactionId: string
    readonly action: "approve" | "reject"
    readonly idempotencyKey: string | undefined
  }
): Promise<string> => {
  if (settings.action === "approve") {
    const { keyFile } = await accountKey(settings)
    const opened = await Confidential.openHeld(settings.client, keyFile.keyPair, settings.transactionId)
    if (opened.noteMatches === false) {
      throw new CommandError(
        `${settings.transactionId}: the agent's note states another amount than the ${opened.asset} the guardian would pay; not approved (reject it)`
      )
    }
  }
  const params = { transaction_id: settings.transactionId }
  const decided = await run(
    settings.client,
    (api) => settings.action === "approve" ? api.agents.approve({ params }) : api.agents.reject({ params }),
    settings.idempotencyKey
  ).catch(inWords(settings.json))
  if (settings.json) return json(decided)
  return table([
    ["transaction_id", decided.transaction_id],
    ["status", decided.status],
    ...(settings.action === "approve"
      ? [["transfer_id", decided.transfer_id ?? ""], ["transfer_status", decided.transfer_status ?? ""]]
      : [])
  ])
}

/** `keys`: the account's API keys with last use, request count and decrypted totals (D40). */
export const keys = async (settings: Settings & { readonly json: boolean }): Promise<string> => {
  const { keyFile } = await accountKey(settings)
  const listed = await ApiKeys.list(settings.client, keyFile.keyPair)
  const rows = listed.map((key) => ({
    key_id: key.keyId,
    name: key.name,
    key_hint: key.keyHint,
    last_used_at: key.lastUsedAt,
    request_count: key.requestCount,
    revoked_at: key.revokedAt,
    totals: key.totals.map((total) => ({ asset: total.asset, amount: total.amount, transfers: total.transfers.toString() }))
  }))
  if (settings.json) return json({ data: rows })
  return table([
    ["key_id", "name", "hint", "last_used_at", "requests", "total", "revoked_at"],
    ...rows.map((row) => [
      row.key_id,
      row.name,
      row.key_hint,
      row.last_used_at ?? "never",
      String(row.request_count),
      row.totals.length === 0 ? "0" : row.totals.map((total) => `${total.amount} ${total.asset}`).join(", "),
      row.revoked_at ?? ""
    ])
  ])
}

/** One server-sent event of the stream. */
interface StreamedEvent {
  readonly id: string
  readonly type: string
  readonly data: string
}

/** Splits server-sent-event text into events; returns them and what is left of an unfinished one. */
const parseEvents = (buffer: string): { readonly events: ReadonlyArray<StreamedEvent>; readonly rest: string } => {
  const events: Array<StreamedEvent> = []
  let rest = buffer
  let end: number
  while ((end = rest.indexOf("\n\n")) >= 0) {
    const block = rest.slice(0, end)
    rest = rest.slice(end + 2)
    let id: string | undefined
    let type = "message"
    const data: Array<string> = []
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue
      const colon = line.indexOf(":")
      const field = colon < 0 ? line : line.slice(0, colon)
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "")
      if (field === "id") id = value
      else if (field === "event") type = value
      else if (field === "data") data.push(value)
    }
    if (id !== undefined) events.push({ id, type, data: data.join("\n") })
  }
  return { events, rest }
}

/**
 * One event forwarded to `forwardTo`, signed as a webhook delivery; the receiver's status, or
 * `failed: <why>` (refused, timed out, name not found), not only "fetch failed".
 */
const forward = async (forwardTo: string, secret: string, event: StreamedEvent): Promise<string> => {
  const headers = Webhook.signedHeaders({
    payload: event.data,
    secret,
    eventId: event.id,
    deliveryId: `dlv_local_${globalThis.crypto.randomUUID()}`,
    timestampSeconds: Math.floor(Date.now() / 1000)
  })
  return fetch(forwardTo, { method: "POST", headers, body: event.data }).then(
    (answer) => String(answer.status),
    (cause: unknown) => `failed: ${networkFailure(cause)}`
  )
}

/**
 * `listen --forward-to URL`: like `stripe listen`. Receives the account's events from the
 * live stream (`GET /v1/events/stream`) and forwards each to `forwardTo`, signed with a
 * local secret (printed first) exactly as a webhook delivery is, so the receiver's
 * `Webhook.verify` works unchanged; prints each delivery's status. Reconnects after any
 * interruption (a server restart) with `Last-Event-ID`, so no event is missed or repeated.
 * Runs until `stop` resolves (Ctrl-C).
 */
export const listen = async (
  settings: Settings & {
    readonly json: boolean
    readonly forwardTo: string
    readonly secret: string
    /** D58: only these event types (the stream filters them), comma-separated; all when undefined. */
    readonly events?: string | undefined
    readonly out: (line: string) => void
    readonly stop: Promise<void>
  }
): Promise<string> => {
  let lastEventId: string | undefined
  let stopped = false
  const abort = new AbortController()
  void settings.stop.then(() => {
    stopped = true
    abort.abort()
  })
  settings.out(settings.json
    ? json({ ready: true, forward_to: settings.forwardTo, secret: settings.secret })
    : `Ready: forwarding events to ${settings.forwardTo}\nSigning secret: ${settings.secret} (verify deliveries with Webhook.verify)\n`)
  // The request is the contract's (`events.stream`); its fetch also ends on Ctrl-C, both while
  // waiting for the answer and while reading the stream. Not the command's retrying fetch: this
  // loop reconnects by itself, for as long as it runs.
  const client = Client.make({
    apiKey: settings.client.apiKey,
    baseUrl: settings.client.baseUrl,
    fetch: (url, init) => globalThis.fetch(url, { ...init, signal: init.signal ? AbortSignal.any([init.signal, abort.signal]) : abort.signal })
  })
  let failures = 0
  while (!stopped) {
    try {
      // The answer as received (`response-only`): the SSE text is read here rather than as the
      // typed stream, which per SSE dispatches no event for the stream's starting cursor (an
      // `id:` without data), and that cursor is where a first connection resumes.
      const response = await run(client, (api) =>
        api.events.stream({
          query: settings.events === undefined ? {} : { types: settings.events },
          headers: lastEventId === undefined ? {} : { "last-event-id": lastEventId },
          responseMode: "response-only"
        }).pipe(Effect.map(HttpClientResponse.toWeb)))
      if (Option.isNone(response)) throw new Error("the event stream's answer is not a fetch Response")
      const answer = response.value
      if (answer.status !== 200 || answer.body === null) {
        const text = await answer.text()
        // A refusal (401, 403, 400) will not change by retrying: it ends the command. A 429
        // (the key's other streams fill its cap) may: retried with the backoff below.
        if (answer.status >= 400 && answer.status < 500 && answer.status !== 429) throw new CommandError(`the event stream was refused: ${text.trim()}`)
        throw new Error(`the event stream answered ${answer.status}`)
      }
      failures = 0
      const reader = answer.body.getReader()
      const decoder = new TextDecoder()
      let buffer = ""
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        const parsed = parseEvents(buffer + decoder.decode(value, { stream: true }))
        buffer = parsed.rest
        for (const event of parsed.events) {
          // A block without data (the stream's starting cursor) dispatches nothing (SSE) but is
          // where to resume, so events recorded before a first event arrives are not lost.
          if (event.data === "") {
            lastEventId = event.id
            continue
          }
          const status = await forward(settings.forwardTo, settings.secret, event)
          // Forwarded (whatever the receiver answered): the next connection resumes after it.
          lastEventId = event.id
          const at = new Date().toISOString()
          settings.out(settings.json
            ? json({ event_id: event.id, type: event.type, status, at })
            : `${at}  ${event.type.padEnd(34)} ${event.id}  -> ${status}\n`)
        }
      }
    } catch (error) {
      if (stopped) break
      if (error instanceof CommandError) throw error
      failures++
    }
    if (stopped) break
    const waitMs = Math.min(500 * 2 ** Math.min(failures, 5), 10_000)
    settings.out(settings.json
      ? json({ reconnecting: true, after: lastEventId ?? null })
      : `stream interrupted; reconnecting${lastEventId === undefined ? "" : ` after ${lastEventId}`}\n`)
    await new Promise((resolve) => setTimeout(resolve, waitMs))
  }
  return ""
}

/** `events list|get` (D59): the account's recorded events, within retention; no amounts. */
export const events = async (
  settings: Settings & {
    readonly json: boolean
    readonly action: "list" | "get"
    readonly eventId: string | undefined
    readonly type: string | undefined
    readonly limit: number | undefined
  }
): Promise<string> => {
  if (settings.action === "get") {
    const event = await run(settings.client, (api) => api.events.get({ params: { event_id: settings.eventId ?? "" } }))
    return json(event)
  }
  const query = { ...(settings.type === undefined ? {} : { type: settings.type }), ...(settings.limit === undefined ? {} : { limit: settings.limit }) }
  const page = await run(settings.client, (api) => api.events.list({ query }))
  return settings.json
    ? json(page)
    : table([["id", "type", "created_at"], ...page.data.map((event) => [event.id, event.type, event.created_at])])
}

/**
 * D58: `listen`'s signing secret, stable per account and mode on this machine: kept beside the
 * key files (`~/.pps/listen-<account_id>-<mode>.secret`, 0600), drawn on first use, so a
 * receiver configured once keeps verifying across runs (`listen --print-secret`).
 */
export const listenSecret = async (settings: Settings, homeDirectory: string = os.homedir()): Promise<string> => {
  const me = await Account.me(settings.client)
  const mode = settings.client.apiKey.startsWith("hc_live_") ? "live" : "test"
  const file = path.join(homeDirectory, ".pps", `listen-${me.account_id}-${mode}.secret`)
  try {
    const kept = fs.readFileSync(file, "utf8").trim()
    if (kept.startsWith("whsec_")) return kept
  } catch {
    // None yet: drawn below.
  }
  const secret = Webhook.generateSecret()
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 })
  fs.writeFileSync(file, `${secret}\n`, { mode: 0o600 })
  return secret
}

/** A JSON object given on the command line (`--policy '{"daily_limit_usdg":100}'`). */
const jsonObjectFlag = (flag: string, text: string): Record<string, unknown> => {
  try {
    const value: unknown = JSON.parse(text)
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Record<string, unknown>
  } catch {
    // Reported below.
  }
  throw new CommandError(`--${flag} must be a JSON object, e.g. '{"daily_limit_usdg":100,"per_transaction_limit_usdg":20}'`)
}

const lines = (fields: ReadonlyArray<readonly [string, unknown]>) =>
  table(fields.map(([name, value]) => [name, typeof value === "string" ? value : JSON.stringify(value)]))

/** An agent's spend policy; without an id, that of the key's own account (an agent key reads its own, D42). */
const spendPolicy = async (settings: Settings, agentId: string | undefined) => {
  const accountId = agentId ?? (await Account.me(settings.client)).account_id
  return run(settings.client, (api) => api.agents.getPolicy({ params: { account_id: accountId } }))
}

/** `agents create|list` and `policy get|set`: the owner's agent accounts and their spend policies (D21-D24). */
export const agents = async (
  settings: Settings & {
    readonly json: boolean
    readonly action: "create" | "list" | "policy-get" | "policy-set"
    readonly name: string | undefined
    readonly agentId: string | undefined
    readonly policy: string | undefined
    readonly idempotencyKey: string | undefined
    readonly limit?: number | undefined
    readonly offset?: number | undefined
  }
): Promise<string> => {
  switch (settings.action) {
    case "create": {
      if (settings.name === undefined || settings.policy === undefined) throw new CommandError("agents create needs --name and --policy")
      const payload = { name: settings.name, spend_policy: jsonObjectFlag("policy", settings.policy) }
      const agent = await run(settings.client, (api) => api.agents.create({ payload }), settings.idempotencyKey)
      return settings.json ? json(agent) : lines(Object.entries(agent))
    }
    case "list": {
      // D61: one page of GET /v1/agents; the table says how to ask for the next.
      const page = await run(settings.client, (api) => api.agents.page({
        query: {
          ...(settings.limit === undefined ? {} : { limit: settings.limit }),
          ...(settings.offset === undefined ? {} : { offset: settings.offset })
        }
      }))
      if (settings.json) return json(page)
      const rows = table([["account_id", "handle", "status"], ...page.data.map((agent) => [agent.account_id, agent.handle, agent.status])])
      return page.has_more ? `${rows}more: --offset ${page.offset + page.limit}\n` : rows
    }
    case "policy-get": {
      const policy = await spendPolicy(settings, settings.agentId ?? "")
      return settings.json ? json(policy) : lines(Object.entries(policy))
    }
    case "policy-set": {
      if (settings.policy === undefined) throw new CommandError("policy set needs --policy (the fields to change, as JSON)")
      const patch = jsonObjectFlag("policy", settings.policy)
      const policy = await run(settings.client, (api) => api.agents.patchPolicy({ params: { account_id: settings.agentId ?? "" }, payload: patch }))
      return settings.json ? json(policy) : lines(Object.entries(policy))
    }
  }
}

/**
 * `agents keys create|list|revoke|rotate` (D44, D56): the owner's keys for one of its agents.
 * `create` and `rotate` print the key's value this once (nothing keeps it), with the owner's
 * wallet address, which an agent's client pins to check its owner's key against the chain
 * (`PPS_TRUST=chain`); `rotate` revokes the old key in the same transaction.
 */
export const agentKeys = async (
  settings: Settings & {
    readonly json: boolean
    readonly action: "create" | "list" | "revoke" | "rotate"
    readonly agentId: string
    readonly name: string | undefined
    readonly keyId: string | undefined
    readonly idempotencyKey: string | undefined
  }
): Promise<string> => {
  const params = { account_id: settings.agentId }
  switch (settings.action) {
    case "create": {
      if (settings.name === undefined) throw new CommandError("agents keys create needs --name")
      const payload = { name: settings.name }
      const created = await run(settings.client, (api) => api.agents.createKey({ params, payload }), settings.idempotencyKey)
      return settings.json ? json(created) : lines(Object.entries(created))
    }
    case "list": {
      const listed = await run(settings.client, (api) => api.agents.listKeys({ params }))
      return settings.json ? json(listed) : table([
        ["key_id", "name", "mode", "key", "last_used_at", "requests", "revoked_at"],
        ...listed.data.map((key) => [
          key.key_id,
          key.name,
          key.mode,
          `…${key.key_hint}`,
          key.last_used_at ?? "never",
          String(key.request_count),
          key.revoked_at ?? ""
        ])
      ])
    }
    case "revoke": {
      const revoked = await run(
        settings.client,
        (api) => api.agents.revokeKey({ params: { ...params, key_id: settings.keyId ?? "" } }),
        settings.idempotencyKey
      )
      return settings.json ? json(revoked) : `revoked ${revoked.key_id}\n`
    }
    case "rotate": {
      const payload = settings.name === undefined ? {} : { name: settings.name }
      const rotated = await run(
        settings.client,
        (api) => api.agents.rotateKey({ params: { ...params, key_id: settings.keyId ?? "" }, payload }),
        settings.idempotencyKey
      )
      return settings.json ? json(rotated) : lines(Object.entries(rotated))
    }
  }
}

/**
 * `agents policy [AGENT_ID]` (D42): an agent's spend policy; without an id, that of the key's
 * own account (an agent key reads its own policy, never another's, and changes none).
 */
export const agentPolicy = async (settings: Settings & { readonly json: boolean; readonly agentId: string | undefined }): Promise<string> => {
  const policy = await spendPolicy(settings, settings.agentId)
  return settings.json ? json(policy) : lines(Object.entries(policy))
}

/**
 * `agents transactions get ID` (D42): a held transaction's state (pending_approval, approved with
 * its transfer, rejected, expired) for the agent's key or its owner's; never an amount.
 */
export const agentTransaction = async (settings: Settings & { readonly json: boolean; readonly transactionId: string }): Promise<string> => {
  const held = await run(settings.client, (api) => api.agents.getTransaction({ params: { transaction_id: settings.transactionId } }))
  return settings.json ? json(held) : lines(Object.entries(held))
}

/** `webhooks create|list|delete|deliveries|replay|rotate-secret` (D33-D35). */
export const webhooks = async (
  settings: Settings & {
    readonly json: boolean
    readonly action: "create" | "list" | "get" | "update" | "delete" | "deliveries" | "replay" | "rotate-secret"
    readonly webhookId: string | undefined
    readonly eventId: string | undefined
    readonly url: string | undefined
    readonly events: string | undefined
    readonly enabled?: boolean | undefined
    readonly idempotencyKey: string | undefined
  }
): Promise<string> => {
  const params = { webhook_id: settings.webhookId ?? "" }
  const webhookId = params.webhook_id
  const key = settings.idempotencyKey
  switch (settings.action) {
    case "create": {
      if (settings.url === undefined || settings.events === undefined) throw new CommandError("webhooks create needs --url and --events")
      const payload = { url: settings.url, events: settings.events.split(",").map((event) => event.trim()) }
      const created = await run(settings.client, (api) => api.webhooks.create({ payload }), key)
      // The secret is shown this once (D33).
      return settings.json ? json(created) : lines(Object.entries(created))
    }
    case "list": {
      const listed = await run(settings.client, (api) => api.webhooks.list())
      return settings.json
        ? json(listed)
        : table([
          ["webhook_id", "url", "events", "enabled"],
          ...listed.data.map((hook) => [hook.webhook_id, hook.url, hook.events.join(","), String(hook.enabled)])
        ])
    }
    case "get": {
      const hook = await run(settings.client, (api) => api.webhooks.get({ params }))
      return settings.json ? json(hook) : lines(Object.entries(hook))
    }
    case "update": {
      // D59: only the flags given change.
      const payload = {
        ...(settings.url === undefined ? {} : { url: settings.url }),
        ...(settings.events === undefined ? {} : { events: settings.events.split(",").map((event) => event.trim()) }),
        ...(settings.enabled === undefined ? {} : { enabled: settings.enabled })
      }
      if (Object.keys(payload).length === 0) throw new CommandError("webhooks update needs --url, --events or --enabled")
      const hook = await run(settings.client, (api) => api.webhooks.update({ params, payload }))
      return settings.json ? json(hook) : lines(Object.entries(hook))
    }
    case "delete":
      await run(settings.client, (api) => api.webhooks.remove({ params }))
      return settings.json ? json({ webhook_id: webhookId, deleted: true }) : `deleted ${webhookId}\n`
    case "deliveries": {
      const page = await run(settings.client, (api) => api.webhooks.deliveries({ params, query: { limit: 100 } }))
      return settings.json
        ? json(page)
        : table([
          ["delivery_id", "event_id", "status", "retries", "response_status", "failure_reason"],
          ...page.data.map((delivery) => [
            delivery.delivery_id,
            delivery.event_id,
            delivery.status,
            String(delivery.retry_count),
            String(delivery.response_status_code ?? ""),
            delivery.failure_reason ?? ""
          ])
        ])
    }
    case "replay": {
      const replayed = await run(settings.client, (api) => api.webhooks.replay({ params: { ...params, event_id: settings.eventId ?? "" } }), key)
      return settings.json ? json(replayed) : lines(Object.entries(replayed))
    }
    case "rotate-secret": {
      const rotated = await run(settings.client, (api) => api.webhooks.rotateSecret({ params }), key)
      return settings.json ? json(rotated) : lines(Object.entries(rotated))
    }
  }
}

/**
 * `faucet`: test USDG for the account (ext, test keys only), shielded into its confidential
 * balance. The grant is public on chain, so it is printed as the API answers it.
 */
export const faucet = async (
  settings: Settings & { readonly json: boolean; readonly amount: string; readonly asset: string | undefined; readonly idempotencyKey: string | undefined }
): Promise<string> => {
  const payload = { amount: settings.amount, ...(settings.asset === undefined ? {} : { asset: settings.asset }) }
  const granted = await run(settings.client, (api) => api.test.faucet({ payload }), settings.idempotencyKey)
  return settings.json ? json(granted) : lines(Object.entries(granted))
}

/** The key's mode, told by its prefix (SPEC "Authentication"). */
const modeOfKey = (apiKey: string): "test" | "live" => apiKey.startsWith("hc_live_") ? "live" : "test"

/** `send`'s checks of the keys it seals to, from the environment and `--owner-wallet`. */
interface HolderChecks {
  readonly ownerWallet: string | undefined
  readonly rpcUrl: string | undefined
  readonly deployment: SealedTransfers.Deployment | undefined
  readonly trust: SealedTransfers.Trust | undefined
}

/** The holder's client for a command that pays or serves as the key's holder: an account with its key pair, or an agent. */
const holderClient = async (
  settings: Settings & HolderChecks,
  what: string
): Promise<{ readonly pps: Pps; readonly account: Account.Account; readonly kind: "agent" | "account" }> => {
  const account = await Account.me(settings.client)
  const kind = account.type === "agent" ? "agent" : "account"
  if (kind === "agent" && settings.keyFilePath !== undefined) {
    throw new UsageMistake(`${agentsUseTheirOwnersKey(account)}; ${what} takes no --key-file with it (pin the owner's wallet with --owner-wallet)`)
  }
  const keyPair = kind === "agent" ? undefined : (await accountKey(settings, account)).keyFile.keyPair
  const pps = new Pps({
    apiKey: settings.client.apiKey,
    baseUrl: settings.client.baseUrl,
    ...(keyPair === undefined ? {} : { keyPair }),
    ...(settings.ownerWallet === undefined ? {} : { ownerWallet: settings.ownerWallet }),
    ...(settings.rpcUrl === undefined ? {} : { rpcUrl: settings.rpcUrl }),
    ...(settings.deployment === undefined ? {} : { deployment: settings.deployment }),
    ...(settings.trust === undefined ? {} : { trust: settings.trust })
  })
  return { pps, account, kind }
}

/**
 * `x402 fetch URL --max AMOUNT` (D57): a GET that pays a 402 of the confidential x402 scheme
 * (package `@pps/x402`, loaded by name) at most AMOUNT USDG; prints the answer's body, and on
 * stderr its status and the transfer that paid for it.
 */
export const x402Fetch = async (
  settings: Settings & HolderChecks & { readonly url: string; readonly max: string; readonly json: boolean }
): Promise<string> => {
  const entry = await X402Entry.load()
  const { pps } = await holderClient(settings, "x402 fetch")
  const answer = await entry.cliFetch({ pps, url: settings.url, max: settings.max, mode: modeOfKey(settings.client.apiKey) }).catch((error: unknown) => {
    throw new CommandError(error instanceof Error ? error.message.replace(/^Failed to create payment payload: /, "") : String(error))
  })
  if (settings.json) {
    return json({ status: answer.status, content_type: answer.contentType, transfer_id: answer.transferId ?? null, body: answer.body })
  }
  settings.note(`pps: HTTP ${answer.status}${answer.transferId === undefined ? ", nothing paid" : `, paid by transfer ${answer.transferId}`}\n`)
  return answer.body.endsWith("\n") ? answer.body : `${answer.body}\n`
}

/**
 * `mcp`: the MCP server (`@pps/mcp`) for the key's holder. An agent's key needs nothing else
 * (its transfers are sealed to its owner's key as the API answers it, checked against the chain
 * with --owner-wallet and PPS_RPC_URL, as `send` does); an
 * account's key needs its key file, for sealing and for the balances it decrypts. Serves until
 * the client leaves or the process is stopped, and prints nothing on stdout (stdio's protocol
 * owns it); where to reach an HTTP server is said on stderr.
 */
export const mcp = async (
  settings: Settings & HolderChecks & { readonly transport: McpEntry.Transport }
): Promise<string> => {
  // The server's package first: without it nothing is asked of the API.
  const entry = await McpEntry.load()
  const { pps, account, kind } = await holderClient(settings, "mcp")
  await entry.serve({
    pps,
    holder: { kind, accountId: account.account_id, handle: account.handle, mode: modeOfKey(settings.client.apiKey) },
    transport: settings.transport,
    announce: settings.note
  })
  return ""
}
