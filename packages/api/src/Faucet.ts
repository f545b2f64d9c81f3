/**
 * The wire form of the test faucet (ext).
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * @since 0.1.0
 * @category models
 */
export const FaucetRequest = Schema.Struct({
  asset: Schema.optionalKey(Schema.String),
  amount: Schema.String
})

/**
 * The grant is public (a shield's amount is visible on chain), so the answer repeats it.
 *
 * @since 0.1.0
 * @category models
 */
export const FaucetGrant = Schema.Struct({ asset: Schema.String, amount: Schema.String, tx_hash: Schema.String })

/**
 * Largest grant, in whole USDG: a faucet is for testing, not for minting fortunes.
 *
 * @since 0.1.0
 * @category constants
 */
export const grantWholeUnitsMax = 1_000_000n
