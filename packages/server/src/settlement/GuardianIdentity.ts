/**
 * What settlement must know of the guardian to deploy the contracts: the
 * address of its attestation (secp256k1) key and its BN254 encryption key, whose
 * handle every balance on chain carries. Provided by the guardian's client.
 *
 * @since 0.1.0
 */
import { Context } from "effect"
import type { Address } from "viem"

/**
 * @since 0.1.0
 * @category services
 */
export class GuardianIdentity extends Context.Service<GuardianIdentity, {
  readonly signerAddress: Address
  /** EVM encoding, x ‖ y, 64 bytes. */
  readonly encryptionKey: Uint8Array
}>()("server/settlement/GuardianIdentity") {}
