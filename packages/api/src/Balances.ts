/**
 * The wire form of balances (D19, D20) and sealed statements (ext).
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { ChainId, TokenContract, WalletAddress } from "./Chain.ts"

/**
 * D19 (`non_zero`, without a proof) or D20 (`amount`, with one).
 *
 * @since 0.1.0
 * @category models
 */
export const BalancesResponse = Schema.Struct({
  balances: Schema.Array(Schema.Union([
    Schema.Struct({
      asset: Schema.String.annotate({ description: "USDG or ETH." }),
      non_zero: Schema.Boolean.annotate({ description: "Whether the balance is above zero (the guardian's answer, D19)." })
    }).annotate({ identifier: "BalanceNonZero" }),
    Schema.Struct({
      asset: Schema.String.annotate({ description: "USDG or ETH." }),
      amount: Schema.String.annotate({ description: "The amount the caller proved with its decryption proof (D20), as a decimal string." }),
      as_of_block: Schema.Int.annotate({
        description: "(ext, D63) The block whose balance ciphertext the proof was checked against: the latest, or a recent one when a confirmation replaced the ciphertext after the proof was made. The amount is the balance as of that block."
      })
    }).annotate({ identifier: "BalanceProven" })
  ]))
}).annotate({
  identifier: "Balances",
  description: "Per asset: without a decryption proof whether it is non-zero (D19); with one, the proven amount (D20) and the block it is as of (D63).",
  examples: [{ balances: [{ asset: "USDG", non_zero: true }, { asset: "ETH", non_zero: false }] }]
})

/**
 * @since 0.1.0
 * @category models
 */
export const SealedBalances = Schema.Struct({
  balances: Schema.Array(Schema.Struct({
    asset: Schema.String.annotate({ description: "USDG or ETH." }),
    chain_id: ChainId,
    contract: TokenContract,
    account: WalletAddress,
    sealed_statement: Schema.String.annotate({ description: "Hex: the guardian's balance statement, sealed to the account's key." }),
    statement_version: Schema.String.annotate({ description: "The statement's version." }),
    commitment: Schema.String.annotate({ description: "The on-chain balance commitment ΣC." }),
    handle: Schema.String.annotate({ description: "The account's on-chain decryption handle ΣD." }),
    ciphertext_version: Schema.String.annotate({ description: "The on-chain ciphertext's version, bound into a decryption proof." })
  }).annotate({
    identifier: "SealedBalance",
    description: "The guardian's statement of one balance, sealed to the account's key, with the on-chain ciphertext (commitment and handle) to check it against and to prove."
  }))
}).annotate({ identifier: "SealedBalances" })
