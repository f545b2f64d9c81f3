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
  public_key: HexBytes.annotate({ description: "The BN254 public key, 0x hex (64-byte x ‖ y, or 33-byte compressed)." }),
  proofs: Schema.Struct({ USDG: HexBytes, ETH: HexBytes }).annotate({ description: "Per asset contract, the 96-byte proof of possession (docs/crypto.md)." })
}).annotate({ identifier: "RegisterEncryptionKeyRequest" })

/**
 * @since 0.1.0
 * @category models
 */
export const RegisteredEncryptionKey = Schema.Struct({
  public_key: Schema.String.annotate({ description: "The registered key." }),
  confidential_ready: Schema.Literal(true).annotate({ description: "The account can now send and receive confidential transfers." })
}).annotate({ identifier: "RegisteredEncryptionKey" })

/**
 * What a client needs to make its proofs of possession, and whether the account
 * is confidential-ready.
 *
 * @since 0.1.0
 * @category models
 */
export const EncryptionKeyStatus = Schema.Struct({
  account_address: Schema.String.annotate({ description: "The account's wallet, bound into each proof." }),
  chain_id: Schema.Int.annotate({ description: "The chain of the key's mode, bound into each proof." }),
  contracts: Schema.Struct({ USDG: Schema.String, ETH: Schema.String }).annotate({ description: "Each asset's ConfidentialToken, one proof per contract." }),
  public_key: Schema.NullOr(Schema.String).annotate({ description: "The registered key, or null." }),
  confidential_ready: Schema.Boolean.annotate({ description: "Whether the account can send and receive confidential transfers." })
}).annotate({ identifier: "EncryptionKeyStatus", description: "The registered key, if any, and what a proof of possession binds." })
