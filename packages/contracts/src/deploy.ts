/**
 * Deploy: puts the service's contracts on a chain (the USDG test token, the wrapped-ether
 * token and one ConfidentialToken per asset) and returns their addresses.
 *
 * Idempotent given the record of an earlier run: a contract whose recorded address still has
 * code (and, for a ConfidentialToken, still wraps the current asset and has the guardian-rotation
 * timelock) is reused, anything else is deployed afresh. So a restart over a persisted chain
 * deploys nothing, and a restart after the chain was lost, or after a crash between two
 * deployments, deploys exactly what is missing. A ConfidentialToken from before the timelock
 * (its owner could rotate the guardian at once, and so sign away any balance) is never reused:
 * a new one replaces it, and whatever the old one holds stays there. A ConfidentialToken of an
 * older version (v1: debits without the account's co-signature, D51) is refused
 * (`OlderConfidentialTokenError`) unless `replaceOlderVersions` is set, since replacing it leaves
 * its balances behind: the operator's migration (D53, docs/operations.md) decides that.
 *
 * @since 0.1.0
 */
import {
  type Address,
  BaseError,
  ContractFunctionRevertedError,
  ContractFunctionZeroDataError,
  encodeDeployData,
  getAddress,
  type LocalAccount,
  type PublicClient
} from "viem"
import * as ConfidentialToken from "./artifacts/ConfidentialToken.ts"
import * as TestUSDG from "./artifacts/TestUSDG.ts"
import * as WrappedEther from "./artifacts/WrappedEther.ts"
import { makeSender, type Sender } from "./internal/transactions.ts"

/**
 * Addresses of the deployed contracts.
 *
 * @since 0.1.0
 * @category models
 */
export interface Addresses {
  readonly usdg: Address
  readonly weth: Address
  readonly confidentialUsdg: Address
  readonly confidentialEth: Address
}

/**
 * @since 0.1.0
 * @category models
 */
export interface DeployOptions {
  readonly client: PublicClient
  /** Pays for and sends the deployments. */
  readonly deployer: LocalAccount
  /**
   * Owner of USDG (and its first minter) and of each ConfidentialToken, where it can only
   * propose (and cancel) a guardian rotation that takes effect after the delay below.
   */
  readonly owner: Address
  /** Address of the guardian's secp256k1 attestation key. */
  readonly guardianSigner: Address
  /** The guardian's BN254 encryption key, EVM affine coordinates. */
  readonly guardianEncryptionKey: { readonly x: bigint; readonly y: bigint }
  /**
   * Seconds between a guardian rotation's proposal and its execution, fixed in each new
   * ConfidentialToken for good. Default `guardianRotationDelaySecondsFor(chainId)`: 48 hours on
   * mainnet, where the contract refuses anything shorter; 60 seconds on test chains.
   */
  readonly guardianRotationDelaySeconds?: bigint | undefined
  /** Addresses recorded by an earlier run, reused where their code is still on chain. */
  readonly previous?: Partial<Addresses> | undefined
  /** Receipt polling interval. Default 100 ms. */
  readonly receiptPollingMs?: number
  /**
   * Deploy a new ConfidentialToken in place of a recorded one of an older version (the
   * migration, D53). Without it such a record fails the deployment with `OlderConfidentialTokenError`.
   */
  readonly replaceOlderVersions?: boolean
}

/**
 * The ConfidentialToken version this package deploys (its `VERSION()` and EIP-712 domain version).
 *
 * @since 0.5.0
 * @category constants
 */
export const confidentialTokenVersion = "2"

/**
 * A recorded ConfidentialToken answers an older `VERSION()` than `confidentialTokenVersion`:
 * this release cannot use it, and replacing it is a migration the operator starts (D53).
 *
 * @since 0.5.0
 * @category errors
 */
export class OlderConfidentialTokenError extends Error {
  override readonly name = "OlderConfidentialTokenError"
  readonly token: Address
  readonly version: string
  constructor(token: Address, version: string) {
    super(`the recorded ConfidentialToken ${token} is version ${version}; this release needs version ${confidentialTokenVersion}`)
    this.token = token
    this.version = version
  }
}

/**
 * The service's mainnet chain id, where ConfidentialToken requires a rotation delay of at least
 * `mainnetGuardianRotationDelayMinSeconds`.
 *
 * @since 0.2.0
 * @category constants
 */
export const mainnetChainId = 4663

/**
 * 48 hours, ConfidentialToken's `MAINNET_ROTATION_DELAY_MIN_SECONDS`.
 *
 * @since 0.2.0
 * @category constants
 */
export const mainnetGuardianRotationDelayMinSeconds = 172_800n

/**
 * On test chains a minute: long enough to see a proposal and cancel it by hand, short enough
 * for a developer or a test to wait out. Test USDG is all a test chain's guardian guards.
 *
 * @since 0.2.0
 * @category constants
 */
export const testChainGuardianRotationDelaySeconds = 60n

/**
 * The rotation delay a deployment on `chainId` gets unless told otherwise: the mainnet
 * minimum on mainnet, a minute elsewhere.
 *
 * @since 0.2.0
 * @category constructors
 */
export const guardianRotationDelaySecondsFor = (chainId: number): bigint =>
  chainId === mainnetChainId ? mainnetGuardianRotationDelayMinSeconds : testChainGuardianRotationDelaySeconds

/**
 * Gas limits given explicitly to each deployment, about 1.45 times the measured use (a test
 * deploys with these limits, so a contract outgrowing its limit fails the tests, not a run).
 */
const deployGas = {
  testUsdg: 1_300_000n,
  wrappedEther: 1_100_000n,
  confidentialToken: 4_700_000n
} as const

/** `address` (checksummed) when code is deployed there, otherwise undefined. */
const withCode = async (client: PublicClient, address: Address | undefined): Promise<Address | undefined> => {
  if (address === undefined) return undefined
  const code = await client.getCode({ address })
  return code === undefined || code === "0x" ? undefined : getAddress(address)
}

const deployContract = async (sender: Sender, data: `0x${string}`, gas: bigint): Promise<Address> => {
  const receipt = await sender.send({ to: null, data, gas })
  if (receipt.contractAddress == null) throw new Error(`deployment ${receipt.transactionHash} created no contract`)
  return getAddress(receipt.contractAddress)
}

const wrapsAsset = async (client: PublicClient, token: Address, asset: Address): Promise<boolean> => {
  const wrapped = await client.readContract({ address: token, abi: ConfidentialToken.abi, functionName: "asset" })
  return getAddress(wrapped) === asset
}

/**
 * The `VERSION()` of the ConfidentialToken at `token` (every version answers it).
 *
 * @since 0.5.0
 * @category getters
 */
export const versionOf = (client: PublicClient, token: Address): Promise<string> =>
  client.readContract({ address: token, abi: ConfidentialToken.abi, functionName: "VERSION" })

/**
 * Whether the ConfidentialToken at `token` has the rotation timelock. One from before it has no
 * `rotationDelaySeconds`, so the call reverts; a node fault is not read as "no".
 */
const hasRotationTimelock = async (client: PublicClient, token: Address): Promise<boolean> => {
  try {
    await client.readContract({ address: token, abi: ConfidentialToken.abi, functionName: "rotationDelaySeconds" })
    return true
  } catch (error) {
    const refused = error instanceof BaseError && error.walk((cause) =>
      cause instanceof ContractFunctionRevertedError || cause instanceof ContractFunctionZeroDataError
    ) !== null
    if (refused) return false
    throw error
  }
}

/**
 * Deploys whatever of the four contracts is not already on chain and returns all addresses.
 *
 * @since 0.1.0
 * @category constructors
 */
export const deploy = async (options: DeployOptions): Promise<Addresses> => {
  const { client, previous } = options
  const sender = makeSender(client, options.deployer, options.receiptPollingMs ?? 100)
  const rotationDelaySeconds = options.guardianRotationDelaySeconds ??
    guardianRotationDelaySecondsFor(await client.getChainId())

  const usdg = (await withCode(client, previous?.usdg)) ??
    await deployContract(
      sender,
      encodeDeployData({ abi: TestUSDG.abi, bytecode: TestUSDG.bytecode, args: [options.owner] }),
      deployGas.testUsdg
    )
  const weth = (await withCode(client, previous?.weth)) ??
    await deployContract(
      sender,
      encodeDeployData({ abi: WrappedEther.abi, bytecode: WrappedEther.bytecode }),
      deployGas.wrappedEther
    )

  const confidentialFor = async (asset: Address, recorded: Address | undefined): Promise<Address> => {
    const existing = await withCode(client, recorded)
    if (
      existing !== undefined && (await wrapsAsset(client, existing, asset)) &&
      (await hasRotationTimelock(client, existing))
    ) {
      const version = await versionOf(client, existing)
      if (version === confidentialTokenVersion) return existing
      if (options.replaceOlderVersions !== true) throw new OlderConfidentialTokenError(existing, version)
    }
    return deployContract(
      sender,
      encodeDeployData({
        abi: ConfidentialToken.abi,
        bytecode: ConfidentialToken.bytecode,
        args: [asset, options.owner, options.guardianSigner, options.guardianEncryptionKey, rotationDelaySeconds]
      }),
      deployGas.confidentialToken
    )
  }
  const confidentialUsdg = await confidentialFor(usdg, previous?.confidentialUsdg)
  const confidentialEth = await confidentialFor(weth, previous?.confidentialEth)
  return { usdg, weth, confidentialUsdg, confidentialEth }
}
