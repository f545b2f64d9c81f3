/**
 * The payer half of the confidential x402 scheme (D57), for `@x402/fetch`'s
 * `wrapFetchWithPayment`: on a 402 naming the scheme, it pays `payTo` the required amount
 * through PPS with the caller's key (an account's, with its key pair, or an agent's), sealed on
 * this machine as `pps send` seals; the memo binds the payment to the requirement's resource,
 * nonce and expiry, and the Idempotency-Key is derived from the nonce, so a retried request
 * never pays twice. The payment payload names the transfer only.
 *
 * Limits: a maximum per request (mapped onto x402's spend controls for USDG, and checked again
 * here) and per session (this client's lifetime, counting payments in flight). An agent's
 * payment held for its owner's approval gets the requirement's expiry as its approval window;
 * the client waits up to the requirement's `maxTimeoutSeconds` for the decision, then fails
 * with `PaymentHeld`. An agent's spend policy refusing it fails with `PaymentRefused` naming
 * the rule. (`wrapFetchWithPayment` rethrows these as errors with the same message; the last
 * failure is also kept, typed, in `lastFailure`.)
 *
 * @since 0.1.0
 */
import { Amount, Errors, type Pps } from "@pps/sdk"
import { x402Client } from "@x402/core/client"
import type { PaymentPayloadContext, PaymentPayloadResult, PaymentRequirements, SchemeNetworkClient } from "@x402/core/types"
import { wrapFetchWithPayment } from "@x402/fetch"
import { parseAmount } from "@pps/api/Transfers"
import * as Binding from "./Binding.ts"
import * as Requirement from "./Requirement.ts"
import * as Scheme from "./Scheme.ts"

/**
 * The payer's settings.
 *
 * @since 0.1.0
 * @category models
 */
export interface PayerOptions {
  /** The caller's client: an account's key with its key pair, or an agent's key. */
  readonly payer: Pps
  /** The most one request may cost, a decimal in USDG ("0.05"). */
  readonly maxPerRequest: string
  /** The most this client pays in all (payments in flight and held ones count), a decimal in USDG. */
  readonly maxPerSession: string
  /** Default: the test network. */
  readonly network?: Scheme.SchemeNetwork
  /** How often a held payment's state is read. */
  readonly pollIntervalMs?: number
  /** Told when a payment is held, with its transaction id and the end of its window. */
  readonly onHeld?: (held: { readonly transactionId: string; readonly expiresAt: string }) => void
  readonly now?: () => number
}

/**
 * A payment held for the owner's approval that was not decided within the wait: nothing is paid
 * unless the owner approves before `expiresAt`; after it, never.
 *
 * @since 0.1.0
 * @category errors
 */
export class PaymentHeld extends Error {
  override readonly name = "PaymentHeld"
  readonly transactionId: string
  readonly expiresAt: string
  /** The window ended without an approval: final, never paid. Else the owner may still approve before `expiresAt`. */
  readonly expired: boolean
  constructor(transactionId: string, expiresAt: string, waitedSeconds: number, expired: boolean) {
    super(
      expired
        ? `payment held for the owner's approval (transaction ${transactionId}): its window ended at ${expiresAt} without an approval; nothing was paid`
        : `payment held for the owner's approval (transaction ${transactionId}): not approved within ${waitedSeconds} s; nothing is paid unless the owner approves before ${expiresAt}, and never after`
    )
    this.expired = expired
    this.transactionId = transactionId
    this.expiresAt = expiresAt
  }
}

/**
 * A payment refused before any money moved: by the agent's spend policy (`rule` is D25's
 * reason, `field` the policy field), by PPS (`rule` is the API's code), or by this client's
 * own limits (`rule` `max_per_request` / `max_per_session` / `requirement_expired` / ...).
 *
 * @since 0.1.0
 * @category errors
 */
export class PaymentRefused extends Error {
  override readonly name = "PaymentRefused"
  readonly rule: string
  readonly field: string | undefined
  constructor(rule: string, field: string | undefined, detail: string) {
    super(`payment refused (${rule}${field === undefined ? "" : `, ${field}`}): ${detail}; nothing was paid`)
    this.rule = rule
    this.field = field
  }
}

/** Settled by the owner one way or the other, or still waiting. */
type HeldOutcome = { readonly transferId: string } | { readonly ended: "rejected" | "expired" } | undefined

/** A held payment's state is a read of one row; once a second keeps an owner's approval prompt. */
const pollIntervalMsDefault = 1_000

/**
 * The scheme's client (`SchemeNetworkClient`).
 *
 * @since 0.1.0
 * @category constructors
 */
export class PpsSealedClient implements SchemeNetworkClient {
  readonly scheme = Scheme.scheme
  readonly #options: PayerOptions
  readonly #maxPerRequest: bigint
  readonly #maxPerSession: bigint
  /** Paid or in flight in this session, in base units. */
  #committed = 0n
  /** The transfer of the last payment this client made (or was approved). */
  lastTransferId: string | undefined
  /** The last failure, typed (x402's fetch wrapper keeps only its message). */
  lastFailure: PaymentHeld | PaymentRefused | undefined

  constructor(options: PayerOptions) {
    this.#options = options
    this.#maxPerRequest = decimal("maxPerRequest", options.maxPerRequest)
    this.#maxPerSession = decimal("maxPerSession", options.maxPerSession)
  }

  /** The per-request maximum in base units, for x402's spend controls. */
  get maxPerRequestUnits(): bigint {
    return this.#maxPerRequest
  }

  /** What this session paid or has in flight, in base units. */
  get committedUnits(): bigint {
    return this.#committed
  }

  async createPaymentPayload(x402Version: number, requirements: PaymentRequirements, context?: PaymentPayloadContext): Promise<PaymentPayloadResult> {
    try {
      const transferId = await this.#pay(requirements, context)
      this.lastTransferId = transferId
      return { x402Version, payload: { transferId } }
    } catch (error) {
      if (error instanceof PaymentHeld || error instanceof PaymentRefused) this.lastFailure = error
      throw error
    }
  }

  async #pay(requirements: PaymentRequirements, context: PaymentPayloadContext | undefined): Promise<string> {
    const issued = Requirement.issuedOf(requirements)
    if (requirements.asset !== Scheme.asset) throw new PaymentRefused("asset_not_supported", "asset", `the scheme pays in ${Scheme.asset}, not ${requirements.asset}`)
    if (issued === undefined || !/^\d+$/.test(requirements.amount)) throw new PaymentRefused("invalid_requirement", undefined, "the 402 lacks the scheme's resource, nonce, expiry or tag")
    const expiresAtMs = Requirement.expiryMsOf(issued.expiresAt)
    if (!(expiresAtMs > this.#now())) throw new PaymentRefused("requirement_expired", "expiresAt", `the requirement expired at ${issued.expiresAt}`)
    const amount = BigInt(requirements.amount)
    const cap = context?.maxAmountPerPayment === undefined ? this.#maxPerRequest : min(this.#maxPerRequest, BigInt(context.maxAmountPerPayment))
    if (amount > cap) throw new PaymentRefused("max_per_request", "maxPerRequest", `${usdg(amount)} USDG is above this client's ${usdg(cap)} USDG per request`)
    if (this.#committed + amount > this.#maxPerSession) {
      throw new PaymentRefused("max_per_session", "maxPerSession", `${usdg(amount)} USDG would take this session above its ${usdg(this.#maxPerSession)} USDG`)
    }
    this.#committed += amount
    try {
      return await this.#transfer(requirements, issued, amount)
    } catch (error) {
      // Refused before any money moved: the session's share is given back. A held payment keeps
      // it: the owner may still approve it before its expiry.
      if (!(error instanceof PaymentHeld)) this.#committed -= amount
      throw error
    }
  }

  async #transfer(requirements: PaymentRequirements, issued: Requirement.Issued, amount: bigint): Promise<string> {
    const { payer } = this.#options
    const created = await payer.transfers.create(
      {
        to: requirements.payTo,
        amount: usdg(amount),
        memo: Binding.memoOf(issued.resource, issued.nonce, issued.expiresAt),
        asset: Scheme.asset,
        approvalExpiresAt: issued.expiresAt
      },
      { idempotencyKey: Binding.idempotencyKeyOf(requirements.network, issued.nonce) }
    ).catch((error: unknown) => Promise.reject(refusalOf(error)))
    if (created.kind === "transfer") return created.transfer.transfer_id
    const { transaction_id: transactionId, expires_at: expiresAt } = created.held
    this.#options.onHeld?.({ transactionId, expiresAt })
    const waitedSeconds = Math.min(requirements.maxTimeoutSeconds, Math.max(0, Math.ceil((Date.parse(expiresAt) - this.#now()) / 1000)))
    const outcome = await this.#awaitDecision(transactionId, this.#now() + waitedSeconds * 1000)
    if (outcome === undefined) throw new PaymentHeld(transactionId, expiresAt, waitedSeconds, false)
    if ("ended" in outcome) {
      if (outcome.ended === "expired") throw new PaymentHeld(transactionId, expiresAt, waitedSeconds, true)
      throw new PaymentRefused("held_rejected", undefined, `the owner rejected transaction ${transactionId}`)
    }
    return outcome.transferId
  }

  async #awaitDecision(transactionId: string, deadlineMs: number): Promise<HeldOutcome> {
    for (;;) {
      const held = await this.#options.payer.agents.transactions.get(transactionId)
      if (held.status === "approved" && held.transfer_id !== null) return { transferId: held.transfer_id }
      if (held.status === "rejected" || held.status === "expired") return { ended: held.status }
      if (this.#now() >= deadlineMs) return undefined
      await new Promise((resolve) => setTimeout(resolve, Math.min(this.#options.pollIntervalMs ?? pollIntervalMsDefault, Math.max(1, deadlineMs - this.#now()))))
    }
  }

  #now(): number {
    return (this.#options.now ?? Date.now)()
  }
}

/** An API refusal as the client tells it: the policy's rule and field, or the API's code. */
const refusalOf = (error: unknown): unknown => {
  if (!(error instanceof Errors.ApiError) || error.status >= 500) return error
  const code = error.error?.code ?? `http_${error.status}`
  if (code === "policy_violation") {
    return new PaymentRefused(error.reason ?? code, error.param, `the agent's spend policy refused it (policy_violation ${error.reason ?? ""}, request ${error.requestId ?? "?"})`)
  }
  return new PaymentRefused(code, error.param, `${error.error?.message ?? error.message} (request ${error.requestId ?? "?"})`)
}

const decimal = (name: string, text: string): bigint => {
  const units = parseAmount(text, Scheme.asset)
  if (units === undefined) throw new RangeError(`${name} must be a positive decimal in ${Scheme.asset}, not ${JSON.stringify(text)}`)
  return units
}

const usdg = (units: bigint): string => Amount.format(Scheme.asset, units)
const min = (a: bigint, b: bigint): bigint => a < b ? a : b

/**
 * What `paidFetch` answers: the wrapped fetch, and the scheme client (its session total, its
 * last failure).
 *
 * @since 0.1.0
 * @category models
 */
export interface PaidFetch {
  readonly fetch: (input: RequestInfo | URL, init?: RequestInit) => Promise<Response>
  readonly scheme: PpsSealedClient
  readonly client: x402Client
}

/**
 * `fetch` that pays 402s naming the scheme: an `x402Client` with the scheme registered on the
 * network, x402's spend controls set to USDG with `maxPerRequest` as its atomic cap (and no other
 * asset), wrapped by `@x402/fetch`'s `wrapFetchWithPayment`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const paidFetch = (options: PayerOptions, fetchImpl: typeof globalThis.fetch = globalThis.fetch): PaidFetch => {
  const network = options.network ?? Scheme.networks.test
  const scheme = new PpsSealedClient(options)
  const client = new x402Client()
    .register(network, scheme)
    .setSpendControls({
      maxAmountPerPayment: false,
      allowedAssets: [{ network, asset: Scheme.asset, maxAmountPerPayment: scheme.maxPerRequestUnits.toString() }]
    })
  return { fetch: wrapFetchWithPayment(fetchImpl, client), scheme, client }
}
