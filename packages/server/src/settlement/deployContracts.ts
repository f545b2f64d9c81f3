/**
 * Deployment of the contracts through `@pps/contracts`, as an Effect.
 *
 * @since 0.1.0
 */
import { Deploy } from "@pps/contracts"
import { Effect } from "effect"
import type { LocalAccount, PublicClient } from "viem"
import { toEvmPoint } from "./calls.ts"


/**
 * Deploys whatever is not already on chain among `previous`, with `owner` as
 * deployer, owner and first USDG minter.
 *
 * @since 0.1.0
 * @category constructors
 */
export const deployContracts = (options: {
  readonly client: PublicClient
  readonly owner: LocalAccount
  readonly guardian: { readonly signerAddress: `0x${string}`; readonly encryptionKey: Uint8Array }
  readonly previous: Deploy.Addresses | undefined
  readonly replaceOlderVersions: boolean
}) =>
  Effect.tryPromise({
    try: () =>
      Deploy.deploy({
        client: options.client,
        deployer: options.owner,
        owner: options.owner.address,
        guardianSigner: options.guardian.signerAddress,
        guardianEncryptionKey: toEvmPoint(options.guardian.encryptionKey),
        previous: options.previous,
        replaceOlderVersions: options.replaceOlderVersions,
        receiptPollingMs: 50
      }),
    // The deployment's own error as it is: the caller tells an older recorded version from a fault.
    catch: (cause) => cause
  })
