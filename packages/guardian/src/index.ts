/**
 * @pps/guardian: the confidential ledger of the Private Payments Service. It holds the
 * plaintext balances (sealed at rest), answers the amount-dependent predicates, reserves
 * and signs the attestations the ConfidentialToken requires, and never returns an
 * amount. docs/guardian.md describes it; docs/security.md ("Guardian") its trust model.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as ChainReader from "./ChainReader.ts"

/** @since 0.12.0 */
export * as CommitDurability from "./CommitDurability.ts"

/** @since 0.1.0 */
export * as Domain from "./Domain.ts"

/** @since 0.1.0 */
export * as EmbeddedDatabase from "./EmbeddedDatabase.ts"

/** @since 0.1.0 */
export * as Guardian from "./Guardian.ts"

/** @since 0.1.0 */
export * as GuardianClient from "./GuardianClient.ts"

/** @since 0.1.0 */
export * as GuardianConfig from "./GuardianConfig.ts"

/** @since 0.1.0 */
export * as GuardianKeys from "./GuardianKeys.ts"

/** @since 0.1.0 */
export * as GuardianLive from "./GuardianLive.ts"

/** @since 0.1.0 */
export * as GuardianRpc from "./GuardianRpc.ts"

/** @since 0.1.0 */
export * as GuardianServer from "./GuardianServer.ts"

/** @since 0.12.0 */
export * as ProcessMemory from "./ProcessMemory.ts"

/** @since 0.7.0 */
export * as SqlValues from "./SqlValues.ts"

/** @since 0.8.0 */
export * as SpanLog from "./SpanLog.ts"

/**
 * @since 0.8.0
 */
export * as StatementLog from "./StatementLog.ts"
