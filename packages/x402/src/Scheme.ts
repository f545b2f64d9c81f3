/**
 * The confidential x402 scheme's names and fixed values (D57): the scheme, the networks it
 * runs on, its asset, and the `extra` fields of a requirement it owns.
 *
 * @since 0.1.0
 */

/**
 * The scheme's name on the wire (`accepts[].scheme`). One scheme, registered once per network.
 *
 * @since 0.1.0
 * @category constants
 */
export const scheme = "pps-sealed"

/**
 * The networks (CAIP-2): the test chain (`hc_test_` keys) and the main chain (`hc_live_`).
 *
 * @since 0.1.0
 * @category constants
 */
export const networks = { test: "eip155:46630", main: "eip155:4663" } as const

/**
 * A network of the scheme.
 *
 * @since 0.1.0
 * @category models
 */
export type SchemeNetwork = (typeof networks)[keyof typeof networks]

/**
 * The network of an API key, told by its prefix (SPEC "Authentication").
 *
 * @since 0.1.0
 * @category constructors
 */
export const networkOfApiKey = (apiKey: string): SchemeNetwork => apiKey.startsWith("hc_live_") ? networks.main : networks.test

/**
 * The one asset the scheme pays in, as requirements name it, and its decimals (D4).
 *
 * @since 0.1.0
 * @category constants
 */
export const asset = "USDG"

/**
 * USDG's decimals: a requirement's `amount` is in millionths.
 *
 * @since 0.1.0
 * @category constants
 */
export const assetDecimals = 6

/**
 * The `extra` fields the resource server fills in per 402 answer (x402's dynamic extra
 * fields): they differ between the 402 a client paid for and the requirements rebuilt for its
 * paid request, so x402's matching leaves them out and `verify` checks them instead.
 * `resource` is not among them: it is rebuilt from the request, so a payment made for another
 * resource matches no requirement.
 *
 * @since 0.1.0
 * @category constants
 */
export const dynamicExtraFields = ["nonce", "expiresAt", "tag"] as const

/**
 * How long a requirement stays payable after its 402 (and a held payment approvable) unless
 * the merchant says otherwise: long enough for an owner to approve from a phone.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultValiditySeconds = 300
