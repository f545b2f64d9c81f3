/**
 * The Private Payments Service SDK: two client surfaces over one contract (`@pps/api`).
 *
 * - **Promise** users hold a `Pps` (its types in `PpsTypes`): every resource, sealing and
 *   decryption, idempotent retries; failures are `Errors`' classes.
 * - **Effect** users use `ApiClient`: the client derived from the contract with
 *   `HttpApiClient`, as a service and a layer; failures are the contract's error classes.
 *
 * Beside them: `Errors` (the Promise surface's errors, `Errors.Code` the contract's codes),
 * `Amount` (base units as decimals), `KeyFile` (the key file) and `Webhook` (verifying
 * deliveries). Nothing else is exported; the modules under `src/` that are not named here are
 * the surfaces' internals.
 *
 * @since 0.1.0
 */

/**
 * The Promise surface: every resource, idempotent retries, typed errors, sealing and decryption here.
 *
 * @since 0.3.0
 */
export { Pps } from "./Pps.ts"

/**
 * The Promise surface's types: its options, what its methods take and answer (the
 * contract's wire types, `CreatedTransfer`, the decrypted views).
 *
 * @since 0.3.0
 */
export type * as PpsTypes from "./Pps.ts"

/**
 * The Effect surface: the typed client derived from the contract (`@pps/api`) with
 * `HttpApiClient`, its service, layer and `withIdempotencyKey`.
 *
 * @since 0.4.0
 */
export * as ApiClient from "./ApiClient.ts"

/**
 * The Promise surface's errors: `ApiError` and one class per API code, `Errors.Code` (the
 * contract's union of codes), `TransportError`, `ConfidentialError`, `SealedTransferError`.
 *
 * @since 0.3.0
 */
export * as Errors from "./Errors.ts"

/**
 * Amounts in base units as the shortest exact decimal strings.
 *
 * @since 0.1.0
 */
export * as Amount from "./Amount.ts"

/**
 * The file holding an account's encryption key.
 *
 * @since 0.1.0
 */
export * as KeyFile from "./KeyFile.ts"

/**
 * Receiving webhook deliveries: verify, then parse.
 *
 * @since 0.1.0
 */
export * as Webhook from "./Webhook.ts"
