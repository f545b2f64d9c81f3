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
