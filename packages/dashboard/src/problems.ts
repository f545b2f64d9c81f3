/**
 * What the page tells a person when something is refused: a sentence in their
 * words saying what is expected, next to the field it is about, with the API's
 * code kept in small type for support. The API's answers (D1: `code`, `param`,
 * `reason`) and the SDK's own refusals (sealing found the amount unusable, the
 * network failed) are mapped here; the inputs the page can judge itself
 * (an amount's form, an address's length) are checked here before anything is
 * sent, with the same words.
 */
import { Errors } from "@pps/sdk"
import { ApiProblem } from "./api.ts"

/** A refusal as the page shows it. */
export interface Problem {
  /** What the person reads: what went wrong and what is expected. */
  readonly message: string
  /** The field it is about (the API's `param`, or the page's own check's), when one is. */
  readonly field: string | undefined
  /** The API's code (or the SDK's reason), for support; undefined for the page's own checks. */
  readonly code: string | undefined
  readonly requestId: string | undefined
}

/** A refusal found by the page itself, before asking the server. */
export class InputProblem extends Error {
  override readonly name = "InputProblem"
  readonly field: string
  constructor(field: string, message: string) {
    super(message)
    this.field = field
  }
}

/** What an error says on the wire, whichever layer raised it. */
interface Said {
  readonly code: string | undefined
  readonly param: string | undefined
  readonly reason: string | undefined
  readonly message: string
  readonly requestId: string | undefined
}

const saidOf = (error: unknown): Said => {
  if (error instanceof ApiProblem) {
    return { code: error.code, param: error.param, reason: undefined, message: error.message, requestId: error.requestId }
  }
  if (error instanceof Errors.ApiError) {
    return {
      code: error.error?.code ?? `http_${error.status}`,
      param: error.param,
      reason: error.reason,
      message: error.error?.message ?? error.message,
      requestId: error.requestId
    }
  }
  if (error instanceof Errors.TransportError) {
    return { code: error.reason, param: undefined, reason: error.reason, message: error.message, requestId: undefined }
  }
  if (error instanceof Errors.ReasonedError) {
    return { code: String(error.reason), param: undefined, reason: String(error.reason), message: error.message, requestId: undefined }
  }
  if (error instanceof TypeError) {
    // What fetch throws when no answer came (offline, connection cut).
    return { code: "network_error", param: undefined, reason: "unreachable", message: error.message, requestId: undefined }
  }
  return { code: undefined, param: undefined, reason: undefined, message: error instanceof Error ? error.message : "Something went wrong.", requestId: undefined }
}

/** Whether no answer came back: the request may or may not have been done on the server. */
export const isNetworkFailure = (error: unknown): boolean => {
  const said = saidOf(error)
  return said.code === "network_error" || said.reason === "unreachable"
}

// ---------------------------------------------------------------------------------------------
// Amounts and recipients: the page's own checks, in the words every refusal of them uses
// ---------------------------------------------------------------------------------------------

const maxWholeDigits = 13

/**
 * What is wrong with an amount as typed, or undefined when it is a positive decimal with at
 * most `decimals` places (trimmed first). `zeroAllowed` for limits, where 0 means "none".
 */
export const amountTextProblem = (raw: string, options: { readonly decimals?: number; readonly zeroAllowed?: boolean; readonly what?: string } = {}): string | undefined => {
  const text = raw.trim()
  const decimals = options.decimals ?? 6
  const what = options.what ?? "an amount"
  if (text === "") return `Enter ${what}, like 2.50.`
  if (/^[-−]/.test(text)) return `Enter ${what} without a minus sign, like ${text.replace(/^[-−]\s*/, "") || "2.50"}: it cannot be negative.`
  if (text.startsWith("+")) return `Enter ${what} without a plus sign, like ${text.slice(1)}.`
  if (text.includes(",")) {
    const suggestion = /^\d+,\d+$/.test(text) && !/^\d{1,3}(,\d{3})+$/.test(text) ? `${text.replace(",", ".")}` : text.replaceAll(",", "")
    return `Use a dot for decimals and no thousands separators: write ${suggestion}.`
  }
  if (!/^\d+(\.\d+)?$/.test(text)) return `Enter ${what} in digits with an optional dot for decimals, like 2.50.`
  const [whole = "", fraction = ""] = text.split(".")
  if (fraction.length > decimals) return `USDG has at most ${decimals} decimal places: the smallest amount is 0.${"0".repeat(decimals - 1)}1.`
  if (whole.replace(/^0+/, "").length > maxWholeDigits - 1) return "That is more than one transfer can carry (at most 1,000,000,000,000 USDG)."
  if (!options.zeroAllowed && /^0*(\.0*)?$/.test(text)) return `Enter ${what} above 0: 0 USDG would send nothing.`
  return undefined
}

const addressPattern = /^0x[0-9a-fA-F]{40}$/

/** What is wrong with a recipient as typed (an @handle or a 0x address), or undefined. */
export const recipientTextProblem = (raw: string): string | undefined => {
  const text = raw.trim()
  if (text === "") return "Enter who to pay: an @handle like @bob, or a 0x address."
  if (/^0x/i.test(text)) {
    if (addressPattern.test(text)) return undefined
    const digits = text.slice(2)
    return /^[0-9a-fA-F]*$/.test(digits)
      ? `This is not a whole address: an address is 0x followed by 40 hexadecimal characters, and this one has ${digits.length}. Paste it again in full.`
      : "This is not an address: an address is 0x followed by 40 hexadecimal characters (0-9, a-f)."
  }
  if (/\s/.test(text)) return "A handle has no spaces: write it like @bob."
  return undefined
}

/** The words for a spend-policy field the API refused (`param` without `spend_policy.`), given what was typed. */
export const policyFieldWords = (field: string, typed: { readonly raw: string; readonly daily: string }): string | undefined => {
  switch (field) {
    case "daily_limit_usdg":
    case "per_transaction_limit_usdg":
    case "hitl_threshold_usdg": {
      const what = field === "daily_limit_usdg" ? "the daily limit" : field === "per_transaction_limit_usdg" ? "the per-transaction limit" : "the approval threshold"
      const form = amountTextProblem(typed.raw, { zeroAllowed: true, what })
      if (form !== undefined) return form
      if (field === "per_transaction_limit_usdg" && amountTextProblem(typed.daily, { zeroAllowed: true }) === undefined && Number(typed.raw) > Number(typed.daily)) {
        return `The per-transaction limit cannot be above the daily limit (${typed.daily.trim()} USDG): lower it, or raise the daily limit.`
      }
      return `Enter ${what} in USDG: 0 or more, with a dot for decimals (at most 6), up to 1,000,000,000,000.`
    }
    case "allowed_recipients":
      return "Each allowed recipient is an @handle, an agent's @owner/name, a 0x address or *.domain (like *.example.com), separated by commas; leave it empty for anyone."
    case "active_hours":
      return "Write the active hours as HH:MM-HH:MM, like 09:00-17:30 (22:00-06:00 runs over midnight); start and end must differ."
    case "time_zone":
      return "Enter a time zone name such as UTC, Europe/Paris or America/New_York."
    case "name":
      return "Use 1 to 32 lowercase letters, digits and dashes, like shop-bot."
    case "assets":
      return "Supported assets are USDG and ETH."
    default:
      return undefined
  }
}

// ---------------------------------------------------------------------------------------------
// The API's and the SDK's refusals, in a person's words
// ---------------------------------------------------------------------------------------------

/** What the page knows of the request that failed, to word the refusal about it. */
export interface Attempt {
  /** The recipient as sent (a transfer). */
  readonly to?: string
  /** The field names of the form, by the API's `param` (a form whose fields differ from the wire). */
  readonly fieldOf?: (param: string) => string | undefined
  /** The form's own words for a field the API refused (it knows what was typed there). */
  readonly fieldWords?: (field: string) => string | undefined
}

const policyRuleWords: Readonly<Record<string, string>> = {
  asset_not_allowed: "The agent's spend policy does not allow this asset.",
  recipient_not_allowed: "This recipient is not on the agent's list of allowed recipients.",
  outside_active_hours: "The agent's spend policy does not allow transfers at this hour (its active hours).",
  per_transaction_limit_exceeded: "This is more than the agent's per-transaction limit.",
  daily_limit_exceeded: "With this transfer the agent would go over its daily limit."
}

const sealingWords: Readonly<Record<string, { readonly field?: string; readonly message: string }>> = {
  amount_invalid: { field: "amount", message: "Enter an amount above 0 in digits with a dot for decimals (at most 6), like 2.50." },
  memo_too_long: { field: "memo", message: "The memo is too long: at most 512 bytes (fewer characters if it has accents or emoji)." },
  recipient_address_mismatch: { field: "to", message: "The address does not match the recipient: check it and try again." }
}

/** The person's words for a code of the API, when the page has better ones than the API's own message. */
const wordsOfCode = (said: Said, attempt: Attempt): string | undefined => {
  switch (said.code) {
    case "recipient_not_found":
      return attempt.to !== undefined && /^0x/i.test(attempt.to.trim())
        ? "No account of this service has this address. Check it, or pay the recipient's @handle."
        : `No account has the handle ${attempt.to?.trim() || "you entered"}. Check the spelling (handles look like @bob), or paste the recipient's 0x address.`
    case "recipient_not_confidential_ready":
      return "This recipient has not set up an encryption key yet, so they cannot receive a confidential transfer. Ask them to set one up, then send again."
    case "insufficient_balance":
      return "Your balance is too low for this amount. Send less, or add funds first."
    case "policy_violation":
      return policyRuleWords[said.reason ?? ""] ?? "The agent's spend policy does not allow this transfer."
    case "transaction_expired":
      return "The approval window has closed: this transfer will not be made. The agent can ask again."
    case "transaction_not_found":
      return "This transaction was already decided, or no longer waits for you. The list is up to date now."
    case "not_agent_owner":
      return "Only the agent's owner can do this."
    case "agent_name_taken":
      return "You already have an agent with this name: choose another."
    case "encryption_key_required":
      return "Register your encryption key first (Settings → Encryption key)."
    case "kyc_required":
      return "Your identity must be verified before this: see Settings → Identity verification."
    case "rate_limited":
      return "Too many requests just now: wait a few seconds and try again."
    case "service_unavailable":
      return "The service is briefly unavailable: try again in a moment. Nothing was lost."
    case "idempotency_key_in_progress":
      return "Your previous attempt is still being processed: wait a few seconds and press again. It cannot pay twice."
    case "idempotency_key_reused":
      return "This review was already used for a different request: go back, check the details and review again."
    case "unauthorized":
      return "Your session has ended: sign in again."
    case "reauthentication_failed":
      return "The passkey check did not succeed: try again with your passkey."
    default:
      return undefined
  }
}

/** Maps an error of any layer to what the page shows, and the field it belongs to. */
export const problemOf = (error: unknown, attempt: Attempt = {}): Problem => {
  if (error instanceof InputProblem) return { message: error.message, field: error.field, code: undefined, requestId: undefined }
  const said = saidOf(error)
  const fieldOfParam = (param: string | undefined) => param === undefined ? undefined : attempt.fieldOf?.(param) ?? param
  const sealing = said.reason === undefined ? undefined : sealingWords[said.reason]
  if (sealing !== undefined && !(error instanceof Errors.ApiError)) {
    return { message: sealing.message, field: sealing.field, code: said.code, requestId: undefined }
  }
  if (isNetworkFailure(error)) {
    return {
      message: "No answer came back from the server (the network or the server failed). Try again: a repeated request is answered once, never done twice.",
      field: undefined,
      code: said.code,
      requestId: undefined
    }
  }
  const words = wordsOfCode(said, attempt)
  const field = said.code === "insufficient_balance" ? fieldOfParam("amount") : fieldOfParam(said.param)
  const aboutField = field === undefined ? undefined : attempt.fieldWords?.(field)
  return { message: words ?? aboutField ?? said.message, field, code: said.code, requestId: said.requestId }
}
