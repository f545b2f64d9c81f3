/**
 * `pps trigger EVENT` (D64): makes an event of the account happen for real, in test mode, through
 * the service's normal path, so it is recorded, streamed (`pps listen`) and delivered to the
 * account's webhooks like any other. The account acts through an agent of its own, `trigger`
 * (created on first use, with an API key the owner issues and this machine keeps), because most
 * events are an agent's doing (a hold, its decision, a policy change) and a transfer needs a payer
 * and a payee: the agent, funded by the test faucet, pays its owner. Nothing is synthetic: an
 * event no account can cause at will (`transfer.failed`: only the chain fails a transfer) is
 * refused with the reason, before any request.
 *
 * @since 0.11.0
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { type EventType, eventTypes } from "@pps/api/Events"
import { Schema } from "effect"
import * as Account from "../Account.ts"
import type * as Client from "../Client.ts"
import { ApiError } from "../Errors.ts"
import * as SealedTransfers from "../SealedTransfers.ts"
import { CommandError, type Settings } from "./commands.ts"
import { createdTransfer } from "./created.ts"
import { run } from "./typedClient.ts"

/** The agent's name: its handle is `@<owner>/trigger`. */
export const agentName = "trigger"

/**
 * What the agent pays its owner for a transfer's events: below the hold threshold, so it is not
 * held. Test USDG, granted by the faucet just before, so the agent's balance never runs short.
 */
const paidUsdg = "0.01"
/** What the agent asks to pay for a hold: above the threshold (`policy`), so it is held. */
const heldUsdg = "1"

/**
 * The agent's spend policy: it may pay its owner only, a hold above 0.5 USDG. The daily limit is
 * far above what triggers spend (a held transfer reserves nothing until approved).
 */
const policyOf = (ownerHandle: string) => ({
  daily_limit_usdg: 1_000,
  per_transaction_limit_usdg: 10,
  hitl_threshold_usdg: 0.5,
  allowed_recipients: [ownerHandle]
})

/** How long `agent.transaction.expired` waits for the server's sweep (APPROVAL_SWEEP_INTERVAL_MS is at most 50 s). */
const expiryWaitMsMax = 60_000
const expiryPollMs = 250

/**
 * What trigger does for each event type: the steps that make it happen, or why it cannot.
 *
 * @since 0.11.0
 * @category models
 */
export type Plan =
  | { readonly _tag: "Pay" }
  | { readonly _tag: "Hold"; readonly then: "none" | "approve" | "reject" | "expire" }
  | { readonly _tag: "PatchPolicy" }
  | { readonly _tag: "Refused"; readonly why: string }

/**
 * Each event type's plan (docs/cli.md "pps trigger" lists the same).
 *
 * @since 0.11.0
 * @category models
 */
export const plans: { readonly [Type in EventType]: Plan } = {
  "transfer.initiated": { _tag: "Pay" },
  "transfer.confirmed": { _tag: "Pay" },
  "transfer.failed": {
    _tag: "Refused",
    why: "a transfer fails only when the chain does not settle it (a revert, a submission that is never mined), " +
      "which no request of an account can cause; trigger makes no synthetic events, so this one is refused"
  },
  "agent.transaction.pending_approval": { _tag: "Hold", then: "none" },
  "agent.transaction.approved": { _tag: "Hold", then: "approve" },
  "agent.transaction.rejected": { _tag: "Hold", then: "reject" },
  "agent.transaction.expired": { _tag: "Hold", then: "expire" },
  "agent.policy.updated": { _tag: "PatchPolicy" }
}

/**
 * The event types the command takes, in the catalogue's order.
 *
 * @since 0.11.0
 * @category models
 */
export const triggerableTypes: ReadonlyArray<EventType> = eventTypes

/** The agent's key kept on this machine, with the secret its sealed transfers are sealed with (a repeat seals the same request). */
const KeptAgent = Schema.Struct({
  agent_id: Schema.String,
  key_id: Schema.String,
  api_key: Schema.String,
  sealing_secret: Schema.String
})
type KeptAgent = typeof KeptAgent.Type

/** Where the agent's key is kept: beside the key files, 0600 (it is an API key). Test mode only, so no mode in the name. */
const keptAgentPath = (homeDirectory: string, accountId: string) => path.join(homeDirectory, ".pps", `trigger-${accountId}.json`)

const readKept = (file: string): KeptAgent | undefined => {
  try {
    return Schema.decodeUnknownSync(Schema.fromJsonString(KeptAgent))(fs.readFileSync(file, "utf8"))
  } catch {
    // None yet, or unreadable: a new key is issued below.
    return undefined
  }
}

const writeKept = (file: string, kept: KeptAgent) => {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 })
  fs.writeFileSync(file, `${JSON.stringify(kept)}\n`, { mode: 0o600 })
}

const hex = (bytes: Uint8Array) => Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("")
const bytesOf = (text: string) => Uint8Array.from(text.match(/../g) ?? [], (pair) => Number.parseInt(pair, 16))

/** Handles compare without the `@` and case (D23's canonical form). */
const sameHandle = (a: string, b: string) => a.replace(/^@/, "").toLowerCase() === b.replace(/^@/, "").toLowerCase()

/**
 * The account's `trigger` agent, created on first use (no event: only a policy change is one).
 * Looked up by handle among the account's agents, since another machine may have created it.
 */
const ensureAgent = async (settings: Settings, owner: Account.Account, idempotencyKey: string, done: Array<readonly [string, string]>) => {
  const handle = `${owner.handle}/${agentName}`
  for (let offset = 0;; offset += 100) {
    const page = await run(settings.client, (api) => api.agents.page({ query: { limit: 100, offset } }))
    const found = page.data.find((agent) => sameHandle(agent.handle, handle))
    if (found !== undefined) return found
    if (!page.has_more) break
  }
  const created = await run(
    settings.client,
    (api) => api.agents.create({ payload: { name: agentName, spend_policy: policyOf(owner.handle) } }),
    `${idempotencyKey}.agent`
  )
  done.push(["agent_created", created.account_id])
  return created
}

/**
 * The agent's key this machine keeps, checked to still act for it (a revoked one answers 401:
 * another is issued). Issued by the owner (D44); its value is shown once, so it is kept here, and
 * issued with a key of its own rather than the command's: a repeat could not show it again.
 */
const agentKey = async (
  settings: Settings,
  owner: Account.Account,
  agentId: string,
  connect: (apiKey: string) => Client.Client
): Promise<{ readonly client: Client.Client; readonly kept: KeptAgent }> => {
  const file = keptAgentPath(settings.homeDirectory, owner.account_id)
  const kept = readKept(file)
  if (kept !== undefined && kept.agent_id === agentId) {
    const client = connect(kept.api_key)
    const valid = await Account.me(client).then(
      (me) => me.account_id === agentId,
      (error: unknown) => {
        if (error instanceof ApiError && error.status === 401) return false
        throw error
      }
    )
    if (valid) return { client, kept }
  }
  const issued = await run(settings.client, (api) =>
    api.agents.createKey({ params: { account_id: agentId }, payload: { name: "pps trigger" } }), `pps-${globalThis.crypto.randomUUID()}`)
  const fresh: KeptAgent = {
    agent_id: agentId,
    key_id: issued.key_id,
    api_key: issued.api_key,
    sealing_secret: hex(globalThis.crypto.getRandomValues(new Uint8Array(32)))
  }
  writeKept(file, fresh)
  return { client: connect(fresh.api_key), kept: fresh }
}

/** What the steps share. */
interface Run {
  readonly settings: Settings
  readonly owner: Account.Account
  readonly agent: { readonly client: Client.Client; readonly kept: KeptAgent }
  readonly idempotencyKey: string
  readonly done: Array<readonly [string, string]>
}

/** Test USDG for the agent, so it can pay `amount` (the guardian checks the balance before a hold, too). */
const grant = async (context: Run, amount: string) => {
  const granted = await run(context.agent.client, (api) => api.test.faucet({ payload: { amount } }), `${context.idempotencyKey}.grant`)
  context.done.push(["faucet_grant", `${granted.amount} ${granted.asset} to the agent, ${granted.tx_hash}`])
}

/** The agent pays its owner `amount`, sealed here as `pps send` seals an agent's transfer (its copy to the owner's key). */
const pay = (context: Run, amount: string, approvalExpiresAt?: string) =>
  SealedTransfers.send(context.agent.client, {
    to: context.owner.handle,
    amount,
    ...(approvalExpiresAt === undefined ? {} : { approvalExpiresAt })
  }, { idempotencyKey: `${context.idempotencyKey}.pay`, sealingSecret: bytesOf(context.agent.kept.sealing_secret) }).then((sent) => createdTransfer(sent.body))

const payNow = async (context: Run) => {
  await grant(context, paidUsdg)
  const created = await pay(context, paidUsdg)
  if (created.kind === "held") throw new CommandError(`the agent's transfer was held (${created.held.transaction_id}): its policy was changed; set hitl_threshold_usdg back to 0.5`)
  context.done.push(["transfer_id", created.transfer.transfer_id], ["transfer_status", created.transfer.status])
}

/** The server's sweep records an expiry (with its event) within its interval; the read answers `expired` before, `decided_at` once recorded. */
const awaitExpiry = async (context: Run, transactionId: string) => {
  const deadline = Date.now() + expiryWaitMsMax
  while (Date.now() < deadline) {
    const held = await run(context.settings.client, (api) => api.agents.getTransaction({ params: { transaction_id: transactionId } }))
    if (held.status === "expired" && held.decided_at !== null) return held.decided_at
    await new Promise((resolve) => setTimeout(resolve, expiryPollMs))
  }
  throw new CommandError(`${transactionId} expired, but the server's sweep has not recorded it within ${expiryWaitMsMax / 1000} s; its event comes when it does`)
}

/** A hold for the owner's approval, then what the event asks: nothing, approve, reject, or its window's end. */
const holdThen = async (context: Run, then: "none" | "approve" | "reject" | "expire") => {
  await grant(context, heldUsdg)
  // D57: the agent may end the window early; a second from now, so the hold lapses at once.
  const endsAt = then === "expire" ? new Date(Date.now() + 1_000).toISOString() : undefined
  const created = await pay(context, heldUsdg, endsAt)
  if (created.kind !== "held") throw new CommandError(`the agent's transfer was not held (${created.transfer.transfer_id}): its policy was changed; set hitl_threshold_usdg back to 0.5`)
  const transactionId = created.held.transaction_id
  context.done.push(["transaction_id", transactionId])
  if (then === "none") {
    context.done.push(["expires_at", created.held.expires_at])
    return
  }
  if (then === "expire") {
    context.done.push(["expired_at", await awaitExpiry(context, transactionId)])
    return
  }
  const decided = await run(
    context.settings.client,
    (api) => then === "approve" ? api.agents.approve({ params: { transaction_id: transactionId } }) : api.agents.reject({ params: { transaction_id: transactionId } }),
    `${context.idempotencyKey}.decide`
  )
  context.done.push(["status", decided.status])
  if (decided.transfer_id !== null) context.done.push(["transfer_id", decided.transfer_id])
}

/** A PATCH of the agent's policy to the values trigger gives it: a change is an event even when nothing differs. */
const patchPolicy = async (context: Run) => {
  const updated = await run(context.settings.client, (api) =>
    api.agents.patchPolicy({ params: { account_id: context.agent.kept.agent_id }, payload: { hitl_threshold_usdg: policyOf(context.owner.handle).hitl_threshold_usdg } }))
  context.done.push(["policy_id", updated.policy_id], ["updated_at", updated.updated_at])
}

/**
 * `trigger EVENT`: the account's test-mode actions that make EVENT happen, and the ids of what
 * they created, with the idempotency key (each step's key is derived from it, so a repeat after a
 * lost answer acts once: the grant, the payment and the decision are replayed, D36).
 *
 * @since 0.11.0
 * @category commands
 */
export const trigger = async (
  settings: Settings & {
    readonly json: boolean
    readonly event: EventType
    readonly idempotencyKey: string
    /** The connection of another API key (the agent's), told on stderr as the command's own. */
    readonly connect: (apiKey: string) => Client.Client
  }
): Promise<string> => {
  if (settings.client.apiKey.startsWith("hc_live_")) {
    throw new CommandError("trigger acts in test mode only, and PPS_API_KEY is a live key (hc_live_): it would move real money; use the account's hc_test_ key")
  }
  const plan = plans[settings.event]
  if (plan._tag === "Refused") throw new CommandError(`${settings.event} cannot be triggered: ${plan.why}`)
  const owner = await Account.me(settings.client)
  if (owner.type === "agent") {
    throw new CommandError(`PPS_API_KEY is the key of agent ${owner.handle}: trigger acts as the account (it creates and uses an agent of its own); run it with the owner's API key`)
  }
  const done: Array<readonly [string, string]> = [["event", settings.event]]
  const agentRecord = await ensureAgent(settings, owner, settings.idempotencyKey, done)
  done.push(["agent", `${agentRecord.account_id} (${agentRecord.handle})`])
  const context: Run = {
    settings,
    owner,
    agent: await agentKey(settings, owner, agentRecord.account_id, settings.connect),
    idempotencyKey: settings.idempotencyKey,
    done
  }
  if (plan._tag === "Pay") await payNow(context)
  else if (plan._tag === "Hold") await holdThen(context, plan.then)
  else await patchPolicy(context)
  done.push(["idempotency_key", settings.idempotencyKey])
  if (settings.json) return `${JSON.stringify(Object.fromEntries(done))}\n`
  const width = Math.max(...done.map(([field]) => field.length))
  return done.map(([field, value]) => `${field.padEnd(width)}  ${value}\n`).join("")
}
