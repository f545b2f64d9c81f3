/**
 * The wire form of balances (D19, D20) and sealed statements (ext).
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * D19 (`non_zero`, without a proof) or D20 (`amount`, with one).
 *
 * @since 0.1.0
 * @category models
 */
export const BalancesResponse = Schema.Struct({
  balances: Schema.Array(Schema.Union([
    Schema.Struct({ asset: Schema.String, non_zero: Schema.Boolean }),
    Schema.Struct({ asset: Schema.String, amount: Schema.String })
  ]))
})

/**
 * @since 0.1.0
 * @category models
 */
export const SealedBalances = Schema.Struct({
  balances: Schema.Array(Schema.Struct({
    asset: Schema.String,
    chain_id: Schema.Number,
    contract: Schema.String,
    account: Schema.String,
    sealed_statement: Schema.String,
    statement_version: Schema.String,
    commitment: Schema.String,
    handle: Schema.String,
    ciphertext_version: Schema.String
  }))
})
