/**
 * `@pps/x402`: the confidential x402 scheme of the Private Payments Service (D57, docs/x402.md).
 * x402's `exact` scheme puts amount, payer and payee on chain; this one pays through PPS, so
 * the chain shows neither the amount nor the memo that binds a payment to its request, and the
 * payee checks a payment by opening its own sealed copy.
 *
 * A package of its own: `@pps/sdk` does not depend on it, so an application that imports the
 * SDK installs none of x402.
 *
 * @since 0.1.0
 */

/**
 * The scheme's name, networks and asset.
 *
 * @since 0.1.0
 */
export * as Scheme from "./Scheme.ts"

/**
 * The payer: the scheme's client for `@x402/fetch`, and `paidFetch`.
 *
 * @since 0.1.0
 */
export * as Client from "./Client.ts"

/**
 * The resource server: the scheme's server for `@x402/express`, and `merchant`.
 *
 * @since 0.1.0
 */
export * as Server from "./Server.ts"

/**
 * The facilitator, run in the resource server's process.
 *
 * @since 0.1.0
 */
export * as Facilitator from "./Facilitator.ts"

/**
 * The replay store.
 *
 * @since 0.1.0
 */
export * as ReplayStore from "./ReplayStore.ts"

/**
 * The binding of a payment to its request (nonce, tag, memo, Idempotency-Key).
 *
 * @since 0.1.0
 */
export * as Binding from "./Binding.ts"

/**
 * What `pps x402 fetch` runs (the SDK loads this package by name for it).
 *
 * @since 0.1.0
 */
export { cliFetch } from "./CliEntry.ts"
