/**
 * The resource-server half of the confidential x402 scheme (D57), for `@x402/express` (or
 * `@x402/core`'s `x402ResourceServer`): prices in USDG, and per 402 answer a fresh nonce, an
 * expiry and a tag in the requirement's `extra` (x402's dynamic extra fields), with the
 * resource the answer is for. The flow is x402's `authorization`: verify before the handler,
 * the handler's answer held back by the middleware until settlement (the transfer confirmed).
 *
 * A request whose handler fails (throws, or answers 400 or more) after its payment checked out
 * leaves the payment redeemable: the same PAYMENT-SIGNATURE is served by a later request for
 * the same resource until the requirement's expiry. With `onHandlerFailure: "refund"` the
 * merchant gives it back at once instead; `refund(nonce)` does so for one it chooses later.
 *
 * @since 0.1.0
 */
import { parseAmount } from "@pps/api/Transfers"
import type { Pps } from "@pps/sdk"
import { x402ResourceServer } from "@x402/core/server"
import type {
  AssetAmount,
  Network,
  PaymentRequirements,
  Price,
  SchemeNetworkServer,
  SchemePaymentRequiredContext,
  SchemeServerHooks,
  SupportedKind,
  VerifiedPaymentCanceledContext
} from "@x402/core/types"
import * as Binding from "./Binding.ts"
import * as Facilitator from "./Facilitator.ts"
import * as ReplayStore from "./ReplayStore.ts"
import * as Requirement from "./Requirement.ts"
import * as Scheme from "./Scheme.ts"

/**
 * The merchant's settings.
 *
 * @since 0.1.0
 * @category models
 */
export interface MerchantOptions {
  /** The payee's client: its API key and its key pair (the key never leaves this process). */
  readonly payee: Pps
  /** The payee's handle (`@shop`): what requirements name as `payTo`. */
  readonly payTo: string
  /** At least 32 bytes only this server knows: the key of the tags. */
  readonly secret: Uint8Array
  /** How long a 402's requirement stays payable; a held payment's approval window. Default 300 s. */
  readonly validitySeconds?: number
  /** `"keep"` (default): a payment whose request failed stays redeemable until expiry; `"refund"`: sent back at once. */
  readonly onHandlerFailure?: "keep" | "refund"
  readonly store?: ReplayStore.ReplayStore
  readonly settleTimeoutMs?: number
  readonly now?: () => number
}

/** Below this the tag would be guessable in principle; the merchant's secret is a key, not a password. */
const secretBytesMin = 32

/**
 * The scheme's server (`SchemeNetworkServer`).
 *
 * @since 0.1.0
 * @category constructors
 */
export class PpsSealedServer implements SchemeNetworkServer {
  readonly scheme = Scheme.scheme
  readonly defaultAssetTransferMethod = "default"
  readonly paymentFlows = { default: { supported: ["authorization"], default: "authorization" } } as const
  readonly dynamicExtraFields = [...Scheme.dynamicExtraFields]
  readonly schemeHooks: SchemeServerHooks
  readonly #secret: Uint8Array
  readonly #validityMs: number
  readonly #now: () => number

  constructor(options: {
    readonly secret: Uint8Array
    readonly validitySeconds?: number
    readonly now?: () => number
    readonly onCanceled: (context: VerifiedPaymentCanceledContext) => Promise<void>
  }) {
    if (options.secret.length < secretBytesMin) throw new RangeError(`the scheme's secret must be at least ${secretBytesMin} bytes`)
    this.#secret = options.secret
    this.#validityMs = (options.validitySeconds ?? Scheme.defaultValiditySeconds) * 1000
    this.#now = options.now ?? Date.now
    this.schemeHooks = { onVerifiedPaymentCanceled: options.onCanceled }
  }

  /** `"$0.01"`, `"0.01"`, `0.01` or `"0.01 USDG"` as USDG base units; an `AssetAmount` must name USDG. */
  parsePrice(price: Price, _network: Network): Promise<AssetAmount> {
    if (typeof price === "object") {
      if (price.asset !== Scheme.asset) return Promise.reject(new RangeError(`the ${Scheme.scheme} scheme pays in ${Scheme.asset} only`))
      return Promise.resolve({ asset: Scheme.asset, amount: price.amount })
    }
    const text = String(price).trim().replace(/^\$/, "").replace(/\s*USDG$/i, "")
    const amount = parseAmount(text, Scheme.asset)
    return amount === undefined
      ? Promise.reject(new RangeError(`not a price in ${Scheme.asset}: ${JSON.stringify(price)}`))
      : Promise.resolve({ asset: Scheme.asset, amount: amount.toString() })
  }

  getAssetDecimals(asset: string, _network: Network): number | undefined {
    return asset === Scheme.asset ? Scheme.assetDecimals : undefined
  }

  enhancePaymentRequirements(requirements: PaymentRequirements, _kind: SupportedKind, _extensions: Array<string>): Promise<PaymentRequirements> {
    return Promise.resolve(requirements)
  }

  /** Per 402 answer: the resource, a fresh nonce, the expiry and their tag, on this scheme's requirements. */
  enrichPaymentRequiredResponse(context: SchemePaymentRequiredContext): Promise<Array<PaymentRequirements>> {
    const expiresAt = new Date(this.#now() + this.#validityMs).toISOString()
    const resource = context.resourceInfo.url
    return Promise.resolve(context.requirements.map((requirements) => {
      if (requirements.scheme !== this.scheme) return requirements
      const nonce = Binding.newNonce()
      const tag = Binding.tagOf(this.#secret, Requirement.boundOf(requirements, { resource, nonce, expiresAt }))
      return { ...requirements, extra: { ...requirements.extra, resource, nonce, expiresAt, tag } }
    }))
  }
}

/**
 * What `merchant` builds: the resource server for `paymentMiddleware`, and the refund of an
 * unserved payment.
 *
 * @since 0.1.0
 * @category models
 */
export interface Merchant {
  readonly resourceServer: x402ResourceServer
  readonly store: ReplayStore.ReplayStore
  /** Sends an unserved payment back to its payer (D43); false when the nonce has no unserved payment. */
  readonly refund: (nonce: string) => Promise<{ readonly refunded: false } | { readonly refunded: true; readonly refundId: string }>
}

/**
 * A resource server with the scheme registered on both networks and its facilitator in this
 * process. Pass `resourceServer` to `@x402/express`'s `paymentMiddleware`, and name the scheme
 * in a route's `accepts` (`{ scheme: "pps-sealed", network: "eip155:46630", payTo, price }`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const merchant = (options: MerchantOptions): Merchant => {
  const store = options.store ?? ReplayStore.memory(options.now)
  const refund = async (nonce: string) => {
    const entry = await store.get(nonce)
    if (entry === undefined || !(await store.markRefunded(nonce))) return { refunded: false } as const
    const created = await options.payee.transfers.refund(entry.transferId, {}, { idempotencyKey: `x402_refund_${nonce}` })
    return { refunded: true, refundId: created.kind === "transfer" ? created.transfer.transfer_id : created.held.transaction_id } as const
  }
  const onCanceled = async (context: VerifiedPaymentCanceledContext) => {
    const nonce = Requirement.issuedOf({ extra: { ...context.paymentPayload.accepted.extra, resource: "-" } })?.nonce
    if (nonce === undefined) return
    await store.release(nonce, "unserved")
    if (options.onHandlerFailure === "refund") await refund(nonce)
  }
  const server = new PpsSealedServer({
    secret: options.secret,
    onCanceled,
    ...(options.validitySeconds === undefined ? {} : { validitySeconds: options.validitySeconds }),
    ...(options.now === undefined ? {} : { now: options.now })
  })
  const facilitator = Facilitator.facilitator({
    payee: options.payee,
    secret: options.secret,
    store,
    ...(options.settleTimeoutMs === undefined ? {} : { settleTimeoutMs: options.settleTimeoutMs }),
    ...(options.now === undefined ? {} : { now: options.now })
  })
  const resourceServer = new x402ResourceServer(Facilitator.localClient(facilitator))
    .register(Scheme.networks.test, server)
    .register(Scheme.networks.main, server)
  return { resourceServer, store, refund }
}
