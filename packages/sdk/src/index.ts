/**
 * The Private Payments Service SDK.
 *
 * @since 0.1.0
 */

/**
 * Receiving webhook deliveries: verify, then parse.
 *
 * @since 0.1.0
 */
export * as Webhook from "./Webhook.ts"
