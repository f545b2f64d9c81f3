/**
 * Agents and spend policies: the rules that need no amount (D21-D25).
 *
 * - D22's validation of a spend policy, whole-object (create and PATCH share it),
 *   with the JSON-number limits converted exactly to USDG base units through
 *   their decimal text (D4, `parseUnits`), never through float arithmetic;
 * - D23's recipient matching (case-insensitive, optional `@`, `*.domain`
 *   wildcards that never match the bare domain);
 * - the active-hours window read in the policy's IANA time zone, with windows
 *   that wrap midnight;
 * - the wire forms of agents, policies and held transactions.
 *
 * The amount rules (per-transaction, daily, balance, approval threshold) are
 * decided by the guardian from a `PolicySnapshot` built here; the api server
 * never compares an amount with a limit.
 *
 * Pure: no HTTP, no SQL.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { Page } from "./Page.ts"
import { ChainId, TokenContract } from "./Chain.ts"
import { canonicalAccountHandle } from "./Accounts.ts"
import type { Mode } from "./ApiKeys.ts"
import type { EventInput } from "./Events.ts"
import { type Asset, AssetName, assets, formatAmount, parseUnits } from "./Transfers.ts"

// ---------------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------------

/**
 * Entries an allow-list may hold: bounded so a policy stays a small row and a
 * check stays a short loop.
 *
 * @since 0.1.0
 * @category constants
 */
export const allowedRecipientsMax = 100

/**
 * The longest allow-list entry: an agent handle (30 + 1 + 32 characters) and a
 * 0x address (42) both fit, with a leading `@`.
 *
 * @since 0.1.0
 * @category constants
 */
export const recipientEntryLengthMax = 80

/**
 * IANA zone names are short; the guardian accepts at most 64 characters.
 *
 * @since 0.1.0
 * @category constants
 */
export const timeZoneLengthMax = 64

/**
 * D22's defaults.
 *
 * @since 0.1.0
 * @category constants
 */
export const policyDefaults = {
  assets: ["USDG"] as ReadonlyArray<Asset>,
  activeHours: "00:00-24:00",
  timeZone: "UTC"
} as const

// ---------------------------------------------------------------------------------------------
// Models
// ---------------------------------------------------------------------------------------------

/**
 * `active_hours` parsed: minutes after local midnight, `[startMinute, endMinute)`;
 * a window with `startMinute > endMinute` wraps midnight.
 *
 * @since 0.1.0
 * @category models
 */
export interface ActiveHours {
  readonly text: string
  readonly startMinute: number
  /** 0..1440: `24:00` is 1440; `00:00` as an end means until midnight (the window wraps). */
  readonly endMinute: number
}

/**
 * The rules of a spend policy, limits in USDG base units (6 decimals).
 *
 * @since 0.1.0
 * @category models
 */
export interface PolicyRules {
  readonly dailyLimitUnits: bigint
  readonly perTransactionLimitUnits: bigint
  /** null: never hold. */
  readonly hitlThresholdUnits: bigint | null
  /** null: any recipient; empty: none. Canonical entries (lower-case, no `@`). */
  readonly allowedRecipients: ReadonlyArray<string> | null
  readonly assets: ReadonlyArray<Asset>
  readonly activeHours: ActiveHours
  /** Canonical IANA name (as Intl resolves it). */
  readonly timeZone: string
}

/**
 * A stored spend policy.
 *
 * @since 0.1.0
 * @category models
 */
export interface SpendPolicy extends PolicyRules {
  readonly policyId: string
  readonly agentAccountId: string
  readonly updatedAt: string
}

/**
 * Why a policy does not validate: the field (dotted path) and a message that
 * names the rule, never the value.
 *
 * @since 0.1.0
 * @category models
 */
export interface PolicyIssue {
  readonly param: string
  readonly message: string
}

/**
 * D25's amount-free refusals, checked by the api server before the guardian.
 *
 * @since 0.1.0
 * @category models
 */
export type AmountFreeViolation = "asset_not_allowed" | "recipient_not_allowed" | "outside_active_hours"

// ---------------------------------------------------------------------------------------------
// Time zones and active hours
// ---------------------------------------------------------------------------------------------

const clockFormatters = new Map<string, Intl.DateTimeFormat>()

const clockFormatterOf = (timeZone: string): Intl.DateTimeFormat | undefined => {
  const cached = clockFormatters.get(timeZone)
  if (cached !== undefined) return cached
  try {
    const formatter = new Intl.DateTimeFormat("en-US", { timeZone, hour: "2-digit", minute: "2-digit", hourCycle: "h23" })
    clockFormatters.set(timeZone, formatter)
    return formatter
  } catch {
    return undefined
  }
}

/**
 * The canonical IANA name of a zone Intl knows (`europe/paris` → `Europe/Paris`),
 * or undefined. The guardian reads the agent's day with the same Intl data.
 *
 * @since 0.1.0
 * @category parsing
 */
export const canonicalTimeZone = (text: string): string | undefined => {
  if (text.length === 0 || text.length > timeZoneLengthMax) return undefined
  const formatter = clockFormatterOf(text)
  return formatter?.resolvedOptions().timeZone
}

/**
 * `HH:MM-HH:MM`: hours 00-23 (and `24:00` as an end), minutes 00-59; start and
 * end must differ (an empty window is a mistake, a full day is `00:00-24:00`).
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseActiveHours = (text: string): ActiveHours | undefined => {
  const match = /^(\d{2}):(\d{2})-(\d{2}):(\d{2})$/.exec(text)
  if (match === null) return undefined
  const [startHour, startMinutes, endHour, endMinutes] = match.slice(1).map(Number) as [number, number, number, number]
  if (startHour > 23 || startMinutes > 59 || endMinutes > 59) return undefined
  if (endHour > 24 || (endHour === 24 && endMinutes !== 0)) return undefined
  const startMinute = startHour * 60 + startMinutes
  const endMinute = endHour * 60 + endMinutes
  if (startMinute === endMinute) return undefined
  return { text, startMinute, endMinute }
}

/**
 * Minutes after local midnight at an instant, on the wall clock of the zone.
 *
 * @since 0.1.0
 * @category time
 */
export const localMinuteOfDay = (nowMs: number, timeZone: string): number => {
  const formatter = clockFormatterOf(timeZone)
  // Zones are validated when a policy is written; one that stops resolving is a defect.
  if (formatter === undefined) throw new Error("time zone no longer resolves")
  let hour = 0
  let minute = 0
  for (const part of formatter.formatToParts(nowMs)) {
    if (part.type === "hour") hour = Number(part.value)
    else if (part.type === "minute") minute = Number(part.value)
  }
  return hour * 60 + minute
}

/**
 * Whether the local wall-clock time at `nowMs` is inside the window. A window
 * that wraps midnight (`22:00-06:00`) is active from its start until midnight
 * and from midnight until its end. Wall-clock times a DST change skips never
 * occur; times it repeats occur twice.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isWithinActiveHours = (hours: ActiveHours, timeZone: string, nowMs: number): boolean => {
  const minute = localMinuteOfDay(nowMs, timeZone)
  return hours.startMinute < hours.endMinute
    ? minute >= hours.startMinute && minute < hours.endMinute
    : minute >= hours.startMinute || minute < hours.endMinute
}

// ---------------------------------------------------------------------------------------------
// Recipients (D23)
// ---------------------------------------------------------------------------------------------

const addressPattern = /^0x[0-9a-f]{40}$/
const wildcardPattern = /^\*\.[a-z0-9_-]+(\.[a-z0-9_-]+)*$/

/**
 * An allow-list entry in canonical form (lower-case, no leading `@`), or
 * undefined: an exact handle (an agent's `owner/name` too), a 0x address, or
 * `*.<domain>`.
 *
 * @since 0.1.0
 * @category parsing
 */
export const canonicalRecipientEntry = (text: string): string | undefined => {
  if (text.length === 0 || text.length > recipientEntryLengthMax) return undefined
  const lowered = (text.startsWith("@") ? text.slice(1) : text).toLowerCase()
  if (addressPattern.test(lowered) || canonicalAccountHandle(lowered) === lowered || wildcardPattern.test(lowered)) return lowered
  return undefined
}

/**
 * D23 for one entry and one name (both canonical). `*.example.com` matches a
 * name that ends in `.example.com` after at least one non-empty label, so never
 * `example.com` itself nor `.example.com`.
 *
 * @since 0.1.0
 * @category predicates
 */
export const entryMatches = (entry: string, name: string): boolean => {
  if (!entry.startsWith("*.")) return entry === name
  const suffix = entry.slice(1)
  if (!name.endsWith(suffix)) return false
  const labels = name.slice(0, name.length - suffix.length)
  return labels.length > 0 && labels.split(".").every((label) => label.length > 0)
}

/**
 * Whether a recipient may be paid. `names` are every canonical name of the
 * recipient: its handle when it is one of our accounts, and its address; so an
 * entry `@shop` also allows a transfer to shop's address and the other way
 * round. A null list allows anyone, an empty list no one.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isRecipientAllowed = (
  allowedRecipients: ReadonlyArray<string> | null,
  names: ReadonlyArray<string>
): boolean =>
  allowedRecipients === null ||
  allowedRecipients.some((entry) => names.some((name) => entryMatches(entry, name.toLowerCase())))

/**
 * D25's amount-free checks in their order: asset, recipient, active hours.
 * `activeHoursAtMs` null skips the window: an owner's approval is not bound by
 * the hours in which the agent may act.
 *
 * @since 0.1.0
 * @category predicates
 */
export const amountFreeViolation = (
  rules: PolicyRules,
  attempt: {
    readonly asset: Asset
    readonly recipientNames: ReadonlyArray<string>
    readonly activeHoursAtMs: number | null
  }
): AmountFreeViolation | undefined => {
  if (!rules.assets.includes(attempt.asset)) return "asset_not_allowed"
  if (!isRecipientAllowed(rules.allowedRecipients, attempt.recipientNames)) return "recipient_not_allowed"
  if (
    attempt.activeHoursAtMs !== null &&
    !isWithinActiveHours(rules.activeHours, rules.timeZone, attempt.activeHoursAtMs)
  ) return "outside_active_hours"
  return undefined
}

/**
 * The policy as the guardian takes it for a transfer of `asset`: limits are
 * numbers of whole units of the asset being spent (no price conversion), so
 * they are scaled from USDG's 6 decimals to the asset's.
 *
 * @since 0.1.0
 * @category constructors
 */
export const policySnapshot = (rules: PolicyRules, asset: Asset) => {
  const scale = 10n ** BigInt(assets[asset] - assets.USDG)
  return {
    perTransactionLimit: rules.perTransactionLimitUnits * scale,
    dailyLimit: rules.dailyLimitUnits * scale,
    hitlThreshold: rules.hitlThresholdUnits === null ? null : rules.hitlThresholdUnits * scale,
    timeZone: rules.timeZone
  }
}

// ---------------------------------------------------------------------------------------------
// Validation (D22, D24)
// ---------------------------------------------------------------------------------------------

const fieldNames = [
  "daily_limit_usdg",
  "per_transaction_limit_usdg",
  "hitl_threshold_usdg",
  "allowed_recipients",
  "assets",
  "active_hours",
  "time_zone"
] as const

type Validated<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly issue: PolicyIssue }

const ok = <A>(value: A): Validated<A> => ({ ok: true, value })
const issue = (param: string, message: string): Validated<never> => ({ ok: false, issue: { param, message } })

const limitText = "must be a number >= 0 with at most 6 decimals, at most 1,000,000,000,000"

/** A JSON number converted through its shortest decimal text (exponent forms are out of range anyway). */
const parseLimit = (value: unknown, param: string): Validated<bigint> => {
  if (typeof value !== "number" || !Number.isFinite(value)) return issue(param, `\`${param}\` ${limitText}.`)
  const units = parseUnits(String(value), "USDG", { allowZero: true })
  return units === undefined ? issue(param, `\`${param}\` ${limitText}.`) : ok(units)
}

const parseRecipients = (value: unknown, param: string): Validated<ReadonlyArray<string> | null> => {
  if (value === null) return ok(null)
  if (!Array.isArray(value)) return issue(param, `\`${param}\` must be an array of names, or null for any recipient.`)
  if (value.length > allowedRecipientsMax) {
    return issue(param, `\`${param}\` holds at most ${allowedRecipientsMax} entries.`)
  }
  const entries: Array<string> = []
  for (const [index, entry] of value.entries()) {
    const canonical = typeof entry === "string" ? canonicalRecipientEntry(entry) : undefined
    if (canonical === undefined) {
      return issue(
        `${param}.${index}`,
        "Each entry is an @handle, an agent's @owner/name, a 0x address, or *.<domain>."
      )
    }
    if (!entries.includes(canonical)) entries.push(canonical)
  }
  return ok(entries)
}

const parseAssets = (value: unknown, param: string): Validated<ReadonlyArray<Asset>> => {
  if (value === null) return ok(policyDefaults.assets)
  if (!Array.isArray(value)) return issue(param, `\`${param}\` must be an array of asset names.`)
  const list: Array<Asset> = []
  for (const [index, entry] of value.entries()) {
    if (typeof entry !== "string" || !(entry in assets)) {
      return issue(`${param}.${index}`, `Supported assets are ${Object.keys(assets).join(" and ")}.`)
    }
    if (!list.includes(entry as Asset)) list.push(entry as Asset)
  }
  return ok(list)
}

/**
 * D22 and D24 in one: applies the fields present in `input` to `base` (none on
 * create), then validates the result as a whole. On create the two limits are
 * required; null clears an optional field to its default. Unknown fields and
 * every failed rule name their `param` (prefixed with `paramPrefix`, e.g.
 * `spend_policy.`).
 *
 * @since 0.1.0
 * @category validation
 */
export const validatePolicy = (
  input: unknown,
  base: PolicyRules | undefined,
  paramPrefix: string
): Validated<PolicyRules> => {
  const name = (field: string) => `${paramPrefix}${field}`
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    return issue(paramPrefix === "" ? "body" : paramPrefix.slice(0, -1), "The spend policy must be a JSON object.")
  }
  const fields = input as Record<string, unknown>
  for (const key of Object.keys(fields)) {
    if (!(fieldNames as ReadonlyArray<string>).includes(key)) {
      return issue(name(key), `\`${key}\` is not a spend policy field (read-only fields cannot be set).`)
    }
  }
  const has = (field: (typeof fieldNames)[number]) => Object.hasOwn(fields, field)

  const limit = (field: "daily_limit_usdg" | "per_transaction_limit_usdg", current: bigint | undefined) => {
    if (!has(field)) {
      return current === undefined ? issue(name(field), `\`${name(field)}\` is required.`) : ok(current)
    }
    return parseLimit(fields[field], name(field))
  }
  const daily = limit("daily_limit_usdg", base?.dailyLimitUnits)
  if (!daily.ok) return daily
  const perTransaction = limit("per_transaction_limit_usdg", base?.perTransactionLimitUnits)
  if (!perTransaction.ok) return perTransaction

  let hitlThreshold: bigint | null = base?.hitlThresholdUnits ?? null
  if (has("hitl_threshold_usdg")) {
    const value = fields["hitl_threshold_usdg"]
    if (value === null) hitlThreshold = null
    else {
      const parsed = parseLimit(value, name("hitl_threshold_usdg"))
      if (!parsed.ok) return parsed
      hitlThreshold = parsed.value
    }
  }

  let allowedRecipients: ReadonlyArray<string> | null = base?.allowedRecipients ?? null
  if (has("allowed_recipients")) {
    const parsed = parseRecipients(fields["allowed_recipients"], name("allowed_recipients"))
    if (!parsed.ok) return parsed
    allowedRecipients = parsed.value
  }

  let assetList: ReadonlyArray<Asset> = base?.assets ?? policyDefaults.assets
  if (has("assets")) {
    const parsed = parseAssets(fields["assets"], name("assets"))
    if (!parsed.ok) return parsed
    assetList = parsed.value
  }

  let activeHours: ActiveHours = base?.activeHours ?? parseActiveHours(policyDefaults.activeHours)!
  if (has("active_hours")) {
    const value = fields["active_hours"]
    const parsed = value === null
      ? parseActiveHours(policyDefaults.activeHours)
      : typeof value === "string"
      ? parseActiveHours(value)
      : undefined
    if (parsed === undefined) {
      return issue(
        name("active_hours"),
        `\`${name("active_hours")}\` must be HH:MM-HH:MM (00:00 to 24:00), start and end different; it may wrap midnight.`
      )
    }
    activeHours = parsed
  }

  let timeZone: string = base?.timeZone ?? policyDefaults.timeZone
  if (has("time_zone")) {
    const value = fields["time_zone"]
    const parsed = value === null ? policyDefaults.timeZone : typeof value === "string" ? canonicalTimeZone(value) : undefined
    if (parsed === undefined) return issue(name("time_zone"), `\`${name("time_zone")}\` must be an IANA time zone name.`)
    timeZone = parsed
  }

  if (perTransaction.value > daily.value) {
    return issue(
      name("per_transaction_limit_usdg"),
      `\`${name("per_transaction_limit_usdg")}\` must not exceed \`${name("daily_limit_usdg")}\`.`
    )
  }
  return ok({
    dailyLimitUnits: daily.value,
    perTransactionLimitUnits: perTransaction.value,
    hitlThresholdUnits: hitlThreshold,
    allowedRecipients,
    assets: assetList,
    activeHours,
    timeZone
  })
}

// ---------------------------------------------------------------------------------------------
// Wire forms
// ---------------------------------------------------------------------------------------------

const usdgNumber = (units: bigint): number => Number(formatAmount(units, "USDG"))

/**
 * The spend policy object (GET, PATCH's answer), SPEC's fields plus `time_zone`
 * (ext). Allow-list entries are shown in canonical form (lower-case, no `@`
 * for addresses and wildcards, `@` for handles).
 *
 * @since 0.1.0
 * @category models
 */
export const SpendPolicyRecord = Schema.Struct({
  policy_id: Schema.String.annotate({ description: "`pol_` + ULID." }),
  daily_limit_usdg: Schema.Finite.annotate({ description: "Most the agent may send per day in its time zone, in USDG." }),
  per_transaction_limit_usdg: Schema.Finite.annotate({ description: "Most one transfer may send, in USDG." }),
  hitl_threshold_usdg: Schema.NullOr(Schema.Finite).annotate({ description: "Transfers above it wait for the owner's approval (D26); null: never held." }),
  allowed_recipients: Schema.NullOr(Schema.Array(Schema.String)).annotate({ description: "Handles, 0x addresses and `*.domain` wildcards (D23); null: anyone." }),
  assets: Schema.Array(AssetName).annotate({ description: "Assets the agent may send (default USDG)." }),
  active_hours: Schema.String.annotate({ description: "`HH:MM-HH:MM` in `time_zone`; may wrap midnight (default 00:00-24:00)." }),
  time_zone: Schema.String.annotate({ description: "IANA zone of the day and the hours (default UTC)." }),
  updated_at: Schema.String.annotate({ description: "ISO 8601 UTC." })
}).annotate({
  identifier: "SpendPolicy",
  description: "D22: an agent's spend policy. The amount rules are decided by the guardian, which alone reads amounts.",
  examples: [{
    policy_id: "pol_01JAZ3Y8X6Q4M2N7P5R9S0T1V2",
    daily_limit_usdg: 100,
    per_transaction_limit_usdg: 20,
    hitl_threshold_usdg: 10,
    allowed_recipients: ["@bob", "*.shop"],
    assets: ["USDG"],
    active_hours: "09:00-18:00",
    time_zone: "Europe/Paris",
    updated_at: "2026-11-25T01:00:00.000Z"
  }]
})
export type SpendPolicyRecord = typeof SpendPolicyRecord.Type

const displayEntry = (entry: string) => entry.startsWith("0x") || entry.startsWith("*.") ? entry : `@${entry}`

/**
 * @since 0.1.0
 * @category constructors
 */
export const toSpendPolicyRecord = (policy: SpendPolicy): SpendPolicyRecord => ({
  policy_id: policy.policyId,
  // Exact: formatAmount gives the shortest decimal text, which Number reads back to the same value.
  daily_limit_usdg: usdgNumber(policy.dailyLimitUnits),
  per_transaction_limit_usdg: usdgNumber(policy.perTransactionLimitUnits),
  hitl_threshold_usdg: policy.hitlThresholdUnits === null ? null : usdgNumber(policy.hitlThresholdUnits),
  allowed_recipients: policy.allowedRecipients === null ? null : policy.allowedRecipients.map(displayEntry),
  assets: [...policy.assets],
  active_hours: policy.activeHours.text,
  time_zone: policy.timeZone,
  updated_at: policy.updatedAt
})

/**
 * SPEC's agent account.
 *
 * @since 0.1.0
 * @category models
 */
export const AgentRecord = Schema.Struct({
  account_id: Schema.String.annotate({ description: "The agent account's id." }),
  handle: Schema.String.annotate({ description: "`@owner/name`." }),
  public_key: Schema.String.annotate({ description: "The agent's custodial wallet address." }),
  status: Schema.Literal("active").annotate({ description: "Agents are active from creation." }),
  spend_policy_id: Schema.String.annotate({ description: "Its spend policy (GET /v1/agents/{account_id}/spend-policy)." })
}).annotate({
  identifier: "Agent",
  description: "D21: an agent account, owned by the caller's account.",
  examples: [{
    account_id: "acct_01JAZ3Y8X6Q4M2N7P5R9S0T1V3",
    handle: "@alice/bot",
    public_key: "0x2546BcD3c84621e976D8185a91A922aE77ECEc30",
    status: "active",
    spend_policy_id: "pol_01JAZ3Y8X6Q4M2N7P5R9S0T1V2"
  }]
})
export type AgentRecord = typeof AgentRecord.Type

/**
 * @since 0.1.0
 * @category models
 */
export const AgentList = Schema.Struct({ agents: Schema.Array(AgentRecord).annotate({ description: "Oldest first." }) }).annotate({ identifier: "AgentList" })

/**
 * D61: a page of the caller's agents (`GET /v1/agents`), oldest first, in D16's envelope.
 *
 * @since 0.11.0
 * @category models
 */
export const AgentPage = Page(AgentRecord).annotate({ identifier: "AgentPage", description: "D61: a page of the caller's agents, oldest first." })

// A spend policy as a client writes it. The schema leaves it open (`Unknown`) on purpose:
// `validatePolicy` checks the whole object so every failure answers 400 `invalid_policy`
// naming its field, where a typed schema would answer `invalid_request` (SPEC's table).
const spendPolicyInputDescription =
  "A spend policy (D22), validated whole (400 invalid_policy naming the field): daily_limit_usdg and per_transaction_limit_usdg (numbers >= 0, required on create), hitl_threshold_usdg (number or null), allowed_recipients (array of handles, 0x addresses, *.domain; or null), assets (array of USDG/ETH), active_hours (HH:MM-HH:MM), time_zone (IANA name)."

/**
 * The body of `POST /v1/accounts/me/agents`. The policy is validated by
 * `validatePolicy` (400 `invalid_policy` with `param`), not by this Schema, so
 * every policy failure answers the same code.
 *
 * @since 0.1.0
 * @category models
 */
export const CreateAgentRequest = Schema.Struct({
  name: Schema.String.annotate({ description: "1-32 characters of `a-z 0-9 -`; the agent is `@owner/name` (D21)." }),
  spend_policy: Schema.optionalKey(Schema.Unknown.annotate({ description: spendPolicyInputDescription }))
}).annotate({
  identifier: "CreateAgentRequest",
  examples: [{ name: "shopper", spend_policy: { daily_limit_usdg: 100, per_transaction_limit_usdg: 20, hitl_threshold_usdg: 10 } }]
})

/**
 * The body of `PATCH /v1/agents/{account_id}/spend-policy`: any subset of the
 * policy fields (validated by `validatePolicy`).
 *
 * @since 0.1.0
 * @category models
 */
export const PatchSpendPolicyRequest = Schema.Record(Schema.String, Schema.Unknown).annotate({
  identifier: "SpendPolicyPatch",
  description: `D24: any subset of the policy's fields; null clears an optional one. ${spendPolicyInputDescription}`,
  examples: [{ daily_limit_usdg: 50, hitl_threshold_usdg: null }]
})

/**
 * States of a held agent transaction (D26, D27).
 *
 * @since 0.1.0
 * @category models
 */
export const AgentTransactionStatus = Schema.Literals(["pending_approval", "approved", "rejected", "expired"]).annotate({
  identifier: "HeldTransactionStatus"
})
export type AgentTransactionStatus = typeof AgentTransactionStatus.Type

/**
 * One representation of a held agent transaction, everywhere (the 202 of
 * `POST /v1/transfers`, approve, reject): D26's and D27's fields, with null
 * for those not reached yet. Never an amount.
 *
 * @since 0.1.0
 * @category models
 */
export const AgentTransactionRecord = Schema.Struct({
  transaction_id: Schema.String.annotate({ description: "`atx_` + ULID." }),
  status: AgentTransactionStatus,
  agent: Schema.String.annotate({ description: "The agent's handle." }),
  to: Schema.String.annotate({ description: "The recipient, as the agent named it." }),
  asset: AssetName,
  confidential: Schema.Boolean.annotate({ description: "Whether the transfer would be confidential." }),
  requested_at: Schema.String.annotate({ description: "ISO 8601 UTC." }),
  expires_at: Schema.String.annotate({ description: "End of the approval window (D27)." }),
  decided_at: Schema.NullOr(Schema.String).annotate({ description: "When the owner approved or rejected it." }),
  transfer_id: Schema.NullOr(Schema.String).annotate({ description: "The transfer made on approval." }),
  transfer_status: Schema.NullOr(Schema.Literals(["pending", "confirmed", "failed"])).annotate({ description: "That transfer's status." }),
  tx_hash: Schema.NullOr(Schema.String).annotate({ description: "That transfer's chain transaction." })
}).annotate({
  identifier: "HeldTransaction",
  description: "D26/D27: an agent's transfer held for its owner's approval. Never an amount (the owner opens it from GET /v1/agents/transactions/{transaction_id}/sealed)."
})
export type AgentTransactionRecord = typeof AgentTransactionRecord.Type

/**
 * D28's list entry: SPEC's fields, plus `asset` and `confidential` (ext).
 *
 * @since 0.1.0
 * @category models
 */
export const PendingAgentTransaction = Schema.Struct({
  transaction_id: Schema.String.annotate({ description: "`atx_` + ULID." }),
  agent: Schema.String.annotate({ description: "The agent's handle." }),
  to: Schema.String.annotate({ description: "The recipient, as the agent named it." }),
  asset: AssetName,
  confidential: Schema.Boolean.annotate({ description: "Whether the transfer would be confidential." }),
  requested_at: Schema.String.annotate({ description: "ISO 8601 UTC." }),
  expires_at: Schema.String.annotate({ description: "End of the approval window (D27)." })
}).annotate({ identifier: "PendingHeldTransaction", description: "D28: a held transaction awaiting a decision." })

/**
 * @since 0.1.0
 * @category models
 */
export const PendingAgentTransactions = Schema.Struct({ pending: Schema.Array(PendingAgentTransaction).annotate({ description: "Oldest first." }) }).annotate({
  identifier: "PendingHeldTransactions"
})

/**
 * (ext) What the owner's client needs to open the held amount and memo: the
 * box sealed to the owner's key (the agent's sender copy) and its binding.
 *
 * @since 0.1.0
 * @category models
 */
export const SealedAgentTransaction = Schema.Struct({
  transaction_id: Schema.String.annotate({ description: "The held transaction." }),
  transfer_id: Schema.String.annotate({ description: "The transfer id the boxes are bound to." }),
  asset: AssetName,
  chain_id: ChainId,
  contract: TokenContract,
  binding_id: Schema.String.annotate({ description: "The 32-byte transfer id (0x hex), the boxes' associated data." }),
  /** The agent's note {amount, memo}, sealed to the owner's key by whoever sealed the transfer. */
  sealed_note: Schema.String.annotate({ description: "Hex: the agent's {amount, memo}, sealed to the owner's key." }),
  /**
   * The amount the guardian read and will pay, sealed by the guardian to the owner's key
   * (`Note.openHeldAmount`): decide on this one. Null for transactions held before it existed.
   */
  guardian_amount: Schema.NullOr(Schema.String).annotate({
    description: "Hex: the amount the guardian would pay, sealed by it to the owner's key; null for transactions held before it existed."
  })
}).annotate({
  identifier: "SealedHeldTransaction",
  description: "(ext) The held amount and memo sealed to the owner's key: `guardian_amount` is what the guardian would pay (decide on it), `sealed_note` the agent's note."
})

/**
 * The fields of a held transaction the wire forms and events show.
 *
 * @since 0.1.0
 * @category models
 */
export interface HeldTransactionView {
  readonly transaction_id: string
  readonly mode: Mode
  readonly owner_account_id: string
  readonly status: AgentTransactionStatus
  /** Canonical agent handle, `owner/name`. */
  readonly agent_handle: string
  readonly recipient_display: string
  readonly asset: Asset
  readonly confidential: boolean
  readonly requested_at: string
  readonly expires_at: string
  readonly decided_at: string | null
}

/**
 * The transfer an approval created, as far as a held transaction shows it.
 *
 * @since 0.1.0
 * @category models
 */
export interface ApprovedTransferView {
  readonly transfer_id: string
  readonly status: "pending" | "confirmed" | "failed"
  readonly tx_hash: string | null
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const toAgentTransactionRecord = (
  held: HeldTransactionView,
  transfer: ApprovedTransferView | null
): AgentTransactionRecord => ({
  transaction_id: held.transaction_id,
  status: held.status,
  agent: `@${held.agent_handle}`,
  to: held.recipient_display,
  asset: held.asset,
  confidential: held.confidential,
  requested_at: held.requested_at,
  expires_at: held.expires_at,
  decided_at: held.decided_at,
  transfer_id: transfer?.transfer_id ?? null,
  transfer_status: transfer?.status ?? null,
  tx_hash: transfer?.tx_hash ?? null
})

/**
 * An `agent.transaction.*` event (D30): to the owner's subscriptions, `account`
 * and `agent` the agent's handle. No amount: the payload Schema has no such field.
 *
 * @since 0.1.0
 * @category constructors
 */
export const agentTransactionEvent = (
  event: "agent.transaction.pending_approval" | "agent.transaction.approved" | "agent.transaction.rejected" | "agent.transaction.expired",
  held: HeldTransactionView,
  transfer: { readonly transfer_id: string; readonly tx_hash: string | null } | null
): EventInput => ({
  mode: held.mode,
  recipientAccountId: held.owner_account_id,
  payload: {
    event,
    account: `@${held.agent_handle}`,
    agent: `@${held.agent_handle}`,
    transaction_id: held.transaction_id,
    to: held.recipient_display,
    asset: held.asset,
    confidential: held.confidential,
    requested_at: held.requested_at,
    expires_at: held.expires_at,
    transfer_id: transfer?.transfer_id ?? null,
    tx_hash: transfer?.tx_hash ?? null
  }
})
