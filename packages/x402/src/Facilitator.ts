/**
 * The facilitator half of the confidential x402 scheme (D57), run **on the resource server**:
 * `verify` opens the payee's own sealed copy of the transfer a payment names, with the payee's
 * key, which never leaves this process; `settle` waits for the transfer to be confirmed on chain.
 * PPS's api tier answers the copy sealed, so it learns no amount here either.
 *
 * verify, in order (the first failure is the 402's reason):
 * 1. the payload names a transfer, the requirement carries the scheme's issued fields;
 * 2. the tag: the nonce, expiry and resource were issued by this server for these terms;
 * 3. the expiry has not passed;
 * 4. the replay store gives the nonce to this request (not in use, served or refunded);
 * 5. the transfer was received by this payee, confidential, in USDG, not failed;
 * 6. the opened amount is the requirement's and the opened memo binds this resource, nonce
 *    and expiry.
 * A failure after step 4 forgets the claim, so the payer can still present a good payment.
 *
 * @since 0.1.0
 */
import { Errors, type Pps, type PpsTypes } from "@pps/sdk"
import { x402Facilitator } from "@x402/core/facilitator"
import type { FacilitatorClient } from "@x402/core/server"
import type {
  Network,
  PaymentPayload,
  PaymentRequirements,
  SchemeNetworkFacilitator,
  SettleResponse,
  SupportedResponse,
  VerifyResponse
} from "@x402/core/types"
import * as Binding from "./Binding.ts"
import type { ReplayStore } from "./ReplayStore.ts"
import * as Requirement from "./Requirement.ts"
import * as Scheme from "./Scheme.ts"

/**
 * What the facilitator needs: the payee's client (its API key and key pair), the secret the
 * server scheme tags with, the replay store both share, and how long `settle` waits.
 *
 * @since 0.1.0
 * @category models
 */
export interface FacilitatorOptions {
  readonly payee: Pps
  readonly secret: Uint8Array
  readonly store: ReplayStore
  /** How long `settle` waits for `confirmed` before answering `settlement_timeout` (the payment stays redeemable). */
  readonly settleTimeoutMs?: number
  /** How often `settle` reads the transfer's status. */
  readonly pollIntervalMs?: number
  readonly now?: () => number
}

/** Confirmation takes a few blocks; a minute covers a loaded chain without holding a request for ever. */
const settleTimeoutMsDefault = 60_000
const pollIntervalMsDefault = 250

type Checked = { readonly ok: true; readonly payer: string } | { readonly ok: false; readonly reason: string }

const invalid = (reason: string, message: string, payer?: string): VerifyResponse => ({
  isValid: false,
  invalidReason: reason,
  invalidMessage: message,
  ...(payer === undefined ? {} : { payer })
})

/**
 * The scheme's facilitator (`SchemeNetworkFacilitator`).
 *
 * @since 0.1.0
 * @category constructors
 */
export class PpsSealedFacilitator implements SchemeNetworkFacilitator {
  readonly scheme = Scheme.scheme
  readonly caipFamily = "eip155:*"
  readonly #options: FacilitatorOptions

  constructor(options: FacilitatorOptions) {
    this.#options = options
  }

  getExtra(_network: Network): Record<string, unknown> | undefined {
    return undefined
  }

  /** Nobody signs for the payer here: the payer's own client paid through PPS. */
  getSigners(_network: string): Array<string> {
    return []
  }

  async verify(payload: PaymentPayload, requirements: PaymentRequirements): Promise<VerifyResponse> {
    const transferId = Requirement.transferIdOf(payload)
    if (transferId === undefined) return invalid("invalid_payload", "the payment names no transfer (payload.transferId)")
    const issued = Requirement.issuedOf({ extra: { ...payload.accepted.extra, resource: requirements.extra["resource"] } })
    if (issued === undefined) return invalid("invalid_payload", "the payment lacks the requirement's resource, nonce, expiry or tag")
    if (!Binding.tagMatches(this.#options.secret, Requirement.boundOf(requirements, issued), issued.tag)) {
      return invalid("binding_invalid", "the nonce, expiry or resource were not issued by this server for these terms")
    }
    const expiresAtMs = Requirement.expiryMsOf(issued.expiresAt)
    if (!(expiresAtMs > this.#now())) return invalid("payment_expired", `the requirement expired at ${issued.expiresAt}`)
    const refused = await this.#options.store.claim(issued.nonce, transferId, expiresAtMs)
    if (refused !== undefined) return invalid(refused, claimMessages[refused])
    const checked = await this.#check(transferId, requirements, issued).catch((cause: unknown): Checked => ({ ok: false, reason: readFailure(cause) }))
    if (!checked.ok) {
      await this.#options.store.release(issued.nonce, "forget")
      return invalid(checked.reason, `transfer ${transferId} does not pay this requirement (${checked.reason})`)
    }
    return { isValid: true, payer: checked.payer }
  }

  async settle(payload: PaymentPayload, requirements: PaymentRequirements): Promise<SettleResponse> {
    const transferId = Requirement.transferIdOf(payload)
    const nonce = Requirement.issuedOf({ extra: { ...payload.accepted.extra, resource: "-" } })?.nonce
    const failed = (errorReason: string, errorMessage: string): SettleResponse => ({
      success: false,
      errorReason,
      errorMessage,
      transaction: "",
      network: requirements.network
    })
    if (transferId === undefined || nonce === undefined) return failed("invalid_payload", "the payment names no transfer or nonce")
    const deadline = this.#now() + (this.#options.settleTimeoutMs ?? settleTimeoutMsDefault)
    for (;;) {
      const transfer = await this.#options.payee.transfers.get(transferId)
      if (transfer.status === "confirmed") {
        await this.#options.store.release(nonce, "served")
        return { success: true, transaction: transfer.tx_hash ?? "", network: requirements.network, payer: transfer.from }
      }
      if (transfer.status === "failed") {
        await this.#options.store.release(nonce, "forget")
        return failed("transfer_failed", `transfer ${transferId} failed on chain: nothing was paid`)
      }
      if (this.#now() > deadline) {
        await this.#options.store.release(nonce, "unserved")
        return failed("settlement_timeout", `transfer ${transferId} is not confirmed yet; the payment stays redeemable until its expiry`)
      }
      await new Promise((resolve) => setTimeout(resolve, this.#options.pollIntervalMs ?? pollIntervalMsDefault))
    }
  }

  #now(): number {
    return (this.#options.now ?? Date.now)()
  }

  /** Steps 5 and 6: the payee's view of the transfer, and its own copy opened. */
  async #check(transferId: string, requirements: PaymentRequirements, issued: Requirement.Issued): Promise<Checked> {
    const transfer = await this.#options.payee.transfers.get(transferId)
    if (transfer.direction !== "received") return { ok: false, reason: "wrong_payee" }
    if (!transfer.confidential) return { ok: false, reason: "not_confidential" }
    if (transfer.asset !== requirements.asset) return { ok: false, reason: "wrong_asset" }
    if (transfer.status === "failed") return { ok: false, reason: "transfer_failed" }
    const opened: PpsTypes.DecryptedTransfer = await this.#options.payee.transfers.decrypt(transferId)
    if (opened.amount !== BigInt(requirements.amount)) return { ok: false, reason: "wrong_amount" }
    if (opened.memo !== Binding.memoOf(issued.resource, issued.nonce, issued.expiresAt)) return { ok: false, reason: "binding_mismatch" }
    return { ok: true, payer: transfer.from }
  }
}

const claimMessages: Record<NonNullable<Awaited<ReturnType<ReplayStore["claim"]>>>, string> = {
  payment_in_use: "this payment is being redeemed by another request right now",
  payment_already_used: "this payment was already used for a request",
  payment_refunded: "this payment was refunded",
  payment_bound_to_another_transfer: "this request's nonce was paid with another transfer",
  transfer_already_used: "this transfer paid for another request"
}

/** A failure to read or open the transfer, as a reason: the API's code, or the SDK's own. */
const readFailure = (cause: unknown): string =>
  cause instanceof Errors.TransferNotFound
    ? "transfer_not_found"
    : cause instanceof Errors.ConfidentialError
    ? "sealed_copy_invalid"
    : cause instanceof Errors.ApiError
    ? `api_${cause.code ?? cause.status}`
    : "transfer_unreadable"

/**
 * A facilitator client that calls an in-process facilitator: the payee's key stays in the
 * resource server, so verification never goes over the network to a third party.
 *
 * @since 0.1.0
 * @category constructors
 */
export const localClient = (facilitator: x402Facilitator): FacilitatorClient => ({
  verify: (payload, requirements) => facilitator.verify(payload, requirements),
  settle: (payload, requirements) => facilitator.settle(payload, requirements),
  getSupported: () => Promise.resolve(facilitator.getSupported() as SupportedResponse)
})

/**
 * An x402 facilitator with the scheme registered on both networks.
 *
 * @since 0.1.0
 * @category constructors
 */
export const facilitator = (options: FacilitatorOptions): x402Facilitator =>
  new x402Facilitator().register([Scheme.networks.test, Scheme.networks.main], new PpsSealedFacilitator(options))
