/**
 * The Idempotency-Key a POST carries: the caller's choice (`IdempotencyKey`, which
 * `ApiClient` exports), or, when its caller chose none, a fresh one: one rule for the
 * facade's transport, `ApiClient`'s and the sealed transfer's steps.
 *
 * @since 0.4.0
 */
import { Context } from "effect"

/**
 * The Idempotency-Key the POSTs of an effect send, when the caller chose it
 * (`ApiClient.withIdempotencyKey`); otherwise each POST draws its own. Declared here, not in
 * ApiClient.ts, so the steps under the surfaces (the typed client's runner, the sealed
 * transfer) read it without importing the surface that exports them.
 */
export const IdempotencyKey = Context.Reference<string | undefined>("@pps/sdk/ApiClient/IdempotencyKey", {
  defaultValue: () => undefined
})

/** A random idempotency key: 128 bits from the platform's CSPRNG (never `Math.random`). */
export const newIdempotencyKey = (): string => `pps_${globalThis.crypto.randomUUID()}`
