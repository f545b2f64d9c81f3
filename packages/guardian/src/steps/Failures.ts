/**
 * The guardian's operating failures, typed: what its steps answer when a dependency fails
 * (`GuardianError`, which says whether a retry can help), never a defect. Defects are kept for
 * broken invariants (internal/Invariant.ts).
 *
 * @since 0.5.0
 */
import { Effect } from "effect"
import type { SqlError } from "effect/sql"
import { GuardianError } from "../Domain.ts"

/**
 * A storage failure as the guardian answers it. Its retryability is the driver's (a lost
 * connection or a deadlock is worth a retry, a refused statement is not); the message keeps the
 * driver's first line only.
 *
 * @since 0.5.0
 * @category constructors
 */
export const storageFailure = (error: SqlError.SqlError): GuardianError =>
  new GuardianError({
    reason: "storage",
    message: `guardian storage failed: ${error.message.split("\n")[0]}`,
    retryable: error.isRetryable
  })

/**
 * Types the storage failures of `self` as `GuardianError`.
 *
 * @since 0.5.0
 * @category combinators
 */
export const storage = <A, R>(self: Effect.Effect<A, SqlError.SqlError, R>): Effect.Effect<A, GuardianError, R> =>
  Effect.mapError(self, storageFailure)

/**
 * The answer for a chain the guardian has no RPC endpoint for.
 *
 * @since 0.5.0
 * @category constructors
 */
export const noEndpoint = (chainId: bigint | string): GuardianError =>
  new GuardianError({ reason: "chain", message: `no RPC endpoint for chain ${chainId}` })
