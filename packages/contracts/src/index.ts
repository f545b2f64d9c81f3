/**
 * @pps/contracts: the Solidity contracts' typed artifacts, their EIP-712 types, deployment,
 * the testnet faucet and the anvil launcher.
 *
 * This module never imports solc (scripts/build.ts does): solc installs a global
 * unhandledRejection handler that must not reach the server process.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as Anvil from "./anvil.ts"

/** @since 0.1.0 */
export * as ConfidentialTokenArtifact from "./artifacts/ConfidentialToken.ts"

/** @since 0.1.0 */
export * as Deploy from "./deploy.ts"

/** @since 0.1.0 */
export * as Faucet from "./faucet.ts"

/** @since 0.1.0 */
export * as TestUsdgArtifact from "./artifacts/TestUSDG.ts"

/** @since 0.1.0 */
export * as TypedData from "./typedData.ts"

/** @since 0.1.0 */
export * as WrappedEtherArtifact from "./artifacts/WrappedEther.ts"

/** @since 0.4.0 */
export * as RpcTransport from "./rpcTransport.ts"

/** @since 0.7.0 */
export * as RootHints from "./rootHints.ts"
