/**
 * Internal, for this workspace only (the server's tests and benchmarks, which drive the
 * API through the SDK's own steps): the modules under the two surfaces. Not part of the
 * published package (`publishConfig.exports` has no `./internal`) and not documented as
 * API: Promise users hold a `Pps`, Effect users an `ApiClient` (`@pps/sdk`).
 *
 * @since 0.5.0
 * @internal
 */

/** @internal */
export * as Account from "./Account.ts"

/** @internal */
export * as ApiKeys from "./ApiKeys.ts"

/** @internal */
export * as Client from "./Client.ts"

/** @internal */
export * as Confidential from "./Confidential.ts"

/** @internal */
export * as SealedTransfers from "./SealedTransfers.ts"
