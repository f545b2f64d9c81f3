/**
 * The wire form of encryption key registration (D12, ext).
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

const HexBytes = Schema.String.check(Schema.isPattern(/^0x[0-9a-fA-F]+$/))

/**
 * `public_key`: the BN254 key, 64-byte EVM encoding (x ‖ y) or 33-byte compressed,
 * 0x hex. `proofs`: per asset, the 96-byte proof of possession bound to the
 * chain id, that asset's ConfidentialToken and the account's address
 * (docs/crypto.md), 0x hex.
 *
 * @since 0.1.0
 * @category models
 */
export const RegisterEncryptionKeyRequest = Schema.Struct({
  public_key: HexBytes,
  proofs: Schema.Struct({ USDG: HexBytes, ETH: HexBytes })
})

/**
 * @since 0.1.0
 * @category models
 */
export const RegisteredEncryptionKey = Schema.Struct({
  public_key: Schema.String,
  confidential_ready: Schema.Literal(true)
})

/**
 * What a client needs to make its proofs of possession, and whether the account
 * is confidential-ready.
 *
 * @since 0.1.0
 * @category models
 */
export const EncryptionKeyStatus = Schema.Struct({
  account_address: Schema.String,
  chain_id: Schema.Number,
  contracts: Schema.Struct({ USDG: Schema.String, ETH: Schema.String }),
  public_key: Schema.NullOr(Schema.String),
  confidential_ready: Schema.Boolean
})
