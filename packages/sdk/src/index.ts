/**
 * The Private Payments Service SDK.
 *
 * @since 0.1.0
 */

/**
 * The account of an API key.
 *
 * @since 0.1.0
 */
export * as Account from "./Account.ts"

/**
 * Amounts in base units as the shortest exact decimal strings.
 *
 * @since 0.1.0
 */
export * as Amount from "./Amount.ts"

/**
 * A connection to the API, and the errors of a call.
 *
 * @since 0.1.0
 */
export * as Client from "./Client.ts"

/**
 * What only the key holder can do: register the key, decrypt transfers, read balances by proof.
 *
 * @since 0.1.0
 */
export * as Confidential from "./Confidential.ts"

/**
 * The file holding an account's encryption key.
 *
 * @since 0.1.0
 */
export * as KeyFile from "./KeyFile.ts"

/**
 * Receiving webhook deliveries: verify, then parse.
 *
 * @since 0.1.0
 */
export * as Webhook from "./Webhook.ts"

/**
 * Transfers sealed in this process: the amount and memo leave it only sealed, to keys checked against the pinned deployment or trusted to the API (`trust`).
 *
 * @since 0.1.0
 */
export * as SealedTransfers from "./SealedTransfers.ts"

/**
 * The holder's API keys: last use, request count and each key's decrypted total (D40).
 *
 * @since 0.1.0
 */
export * as ApiKeys from "./ApiKeys.ts"

/**
 * One error class per API code.
 *
 * @since 0.3.0
 */
export * as Errors from "./Errors.ts"

/**
 * The typed client for Effect programs, derived from the contract (`@pps/api`) with
 * `HttpApiClient`.
 *
 * @since 0.4.0
 */
export * as ApiClient from "./ApiClient.ts"

/**
 * The Promise facade: every resource, idempotent retries, typed errors, sealing and decryption here.
 *
 * @since 0.3.0
 */
export { Pps } from "./Pps.ts"
export type * as PpsTypes from "./Pps.ts"
