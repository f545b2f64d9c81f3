/**
 * What settlement must know of the guardian to deploy the contracts: the
 * address of its attestation (secp256k1) key and its BN254 encryption key, whose
 * handle every balance on chain carries. Read from the guardian at start.
 *
 * @since 0.1.0
 */
import { GuardianClient } from "@pps/guardian"
import { Context, Effect, Layer } from "effect"
import type { Address } from "viem"

/**
 * @since 0.1.0
 * @category services
 */
export class GuardianIdentity extends Context.Service<GuardianIdentity, {
  readonly signerAddress: Address
  /** EVM encoding, x ‖ y, 64 bytes. */
  readonly encryptionKey: Uint8Array
}>()("server/settlement/GuardianIdentity") {
  /** Asks the guardian (in process or remote) for its public identity. */
  static readonly layer = Layer.effect(
    GuardianIdentity,
    Effect.gen(function*() {
      const guardian = yield* GuardianClient.GuardianClient
      const info = yield* guardian.info
      return {
        signerAddress: info.signer as Address,
        encryptionKey: new Uint8Array(Buffer.from(info.encryptionKey.slice(2), "hex"))
      }
    })
  )
}
