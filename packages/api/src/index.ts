/**
 * The public API's contract, one module per concern: the server implements it
 * (`HttpApiBuilder.group(PublicApi, …)`), clients derive from it
 * (`HttpApiClient.make(PublicApi)`), and the OpenAPI document is generated from it.
 *
 * @since 0.4.0
 */

/** @since 0.4.0 */
export * as Api from "./Api.ts"
/** @since 0.4.0 */
export * as Errors from "./Errors.ts"
/** @since 0.4.0 */
export * as Accounts from "./Accounts.ts"
/** @since 0.4.0 */
export * as EncryptionKeys from "./EncryptionKeys.ts"
/** @since 0.4.0 */
export * as ApiKeys from "./ApiKeys.ts"
/** @since 0.4.0 */
export * as Balances from "./Balances.ts"
/** @since 0.4.0 */
export * as Transfers from "./Transfers.ts"
/** @since 0.4.0 */
export * as Agents from "./Agents.ts"
/** @since 0.4.0 */
export * as Webhooks from "./Webhooks.ts"
/** @since 0.4.0 */
export * as Events from "./Events.ts"
/** @since 0.4.0 */
export * as Faucet from "./Faucet.ts"
/** @since 0.4.0 */
export * as Chain from "./Chain.ts"
/** @since 0.4.0 */
export * as Page from "./Page.ts"
/** @since 0.4.0 */
export * as PathIds from "./PathIds.ts"
/** @since 0.4.0 */
export * as OpenApiDocument from "./OpenApiDocument.ts"
