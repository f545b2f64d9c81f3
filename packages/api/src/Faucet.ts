/**
 * The wire form of the test faucet (ext).
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { Page } from "./Page.ts"

/**
 * @since 0.1.0
 * @category models
 */
export const FaucetRequest = Schema.Struct({
  asset: Schema.optionalKey(Schema.String.annotate({ description: "`USDG` (default)." })),
  amount: Schema.String.annotate({ description: "Whole or decimal USDG, up to the faucet's cap." })
}).annotate({ identifier: "FaucetRequest", examples: [{ amount: "100" }] })

/**
 * The grant is public (a shield's amount is visible on chain), so the answer repeats it.
 *
 * @since 0.1.0
 * @category models
 */
export const FaucetGrant = Schema.Struct({
  asset: Schema.String.annotate({ description: "USDG." }),
  amount: Schema.String.annotate({ description: "The amount granted, as a decimal string." }),
  tx_hash: Schema.String.annotate({ description: "The shielding chain transaction." })
}).annotate({
  identifier: "FaucetGrant",
  description: "The grant, shielded into the caller's confidential balance (public on chain, so repeated here)."
})

/**
 * One grant as the list shows it (ext, D50): the account's own record of a public shield, so a
 * holder can explain its balance from its history.
 *
 * @since 0.9.0
 * @category models
 */
export const FaucetGrantRecord = Schema.Struct({
  grant_id: Schema.String.annotate({ description: "The grant (`grant_<ULID>`)." }),
  asset: Schema.String.annotate({ description: "USDG." }),
  amount: Schema.String.annotate({ description: "The amount granted, as a decimal string (public on chain)." }),
  tx_hash: Schema.String.annotate({ description: "The shielding chain transaction." }),
  created_at: Schema.String.annotate({ description: "When the grant was asked for (D5)." })
}).annotate({ identifier: "FaucetGrantRecord", description: "A test faucet grant sent to the chain." })

/**
 * @since 0.9.0
 * @category models
 */
export const FaucetGrantPage = Page(FaucetGrantRecord).annotate({
  identifier: "FaucetGrantPage",
  description: "(ext, D50) The caller's faucet grants, newest first."
})

/**
 * Largest grant, in whole USDG: a faucet is for testing, not for minting fortunes.
 *
 * @since 0.1.0
 * @category constants
 */
export const grantWholeUnitsMax = 1_000_000n
