/**
 * The fields that bind a sealed value or a ciphertext to the chain it lives on, as every
 * wire schema that carries one names them: the chain id, the asset's token contract, the
 * account's wallet. One definition each, so their documentation cannot drift apart.
 *
 * @since 0.4.0
 */
import { Schema } from "effect"

/**
 * The chain id of the key's mode (D9: test keys testnet, live keys mainnet).
 *
 * @since 0.4.0
 * @category schemas
 */
export const ChainId = Schema.Int.annotate({ description: "The chain of the key's mode." })

/**
 * The asset's ConfidentialToken contract (0x address).
 *
 * @since 0.4.0
 * @category schemas
 */
export const TokenContract = Schema.String.annotate({ description: "The asset's ConfidentialToken." })

/**
 * The account's custodial wallet (0x address).
 *
 * @since 0.4.0
 * @category schemas
 */
export const WalletAddress = Schema.String.annotate({ description: "The account's wallet address." })
