/**
 * Operating errors of the dependencies a request needs (the database, the guardian, the chain,
 * the event bus), typed, and how they reach a client: 503 `service_unavailable` with
 * `Retry-After`, in D1's envelope.
 *
 * Why: an outage is not a fault of ours nor of the caller's. A client that is told 503 and when to
 * come back retries with the same Idempotency-Key and gets exactly one effect (D36); a 500 tells
 * it nothing. Stores keep failing with what their adapter says (`SqlError`, whose `isRetryable`
 * says whether trying again can help); a service turns that into {@link DependencyUnavailable} at
 * the step that needed the dependency, and the step's caller in the HTTP layer answers it with
 * {@link answerServiceUnavailable}. What the outbox decouples (NATS, webhook delivery) never
 * reaches a request and keeps answering as before.
 *
 * @since 0.5.0
 */
import { Effect, Schema } from "effect"
import { SqlError } from "effect/sql"
import { ServiceUnavailable } from "@pps/api/Errors"

/**
 * How long a client is asked to wait before retrying after a 503 that names no wait of its own.
 * Why 2: a PostgreSQL reconnect, a guardian takeover in the distributed mode and an embedded
 * guardian's restart each take about a second; a shorter wait only adds retries that fail.
 *
 * @since 0.5.0
 * @category constants
 */
export const retryAfterSecondsDefault = 2

/**
 * The dependencies whose outage a request can meet.
 *
 * @since 0.5.0
 * @category models
 */
export const Dependency = Schema.Literals(["database", "guardian", "chain", "bus"])
export type Dependency = typeof Dependency.Type

/**
 * A dependency failed to do what a step needed. `retryable` says whether the same call can
 * succeed later (a lost connection, a deadlock, a timeout) or not (a refused statement).
 * `operation` names the step, for the log; neither field ever holds an amount or a memo.
 *
 * @since 0.5.0
 * @category errors
 */
export class DependencyUnavailable extends Schema.TaggedError<DependencyUnavailable>()("DependencyUnavailable", {
  dependency: Dependency,
  operation: Schema.String,
  retryable: Schema.Boolean,
  detail: Schema.String
}) {}

/**
 * The typed form of a SQL failure met in `operation`. `detail` is the reason's tag (e.g.
 * `ConnectionError`), never the statement or its parameters.
 *
 * @since 0.5.0
 * @category constructors
 */
export const fromSqlError = (operation: string) => (error: SqlError.SqlError): DependencyUnavailable =>
  new DependencyUnavailable({
    dependency: "database",
    operation,
    retryable: error.isRetryable,
    detail: error.reason._tag
  })

/**
 * Types the SQL failures of `self` as the database being unavailable to `operation`.
 *
 * @since 0.5.0
 * @category combinators
 */
export const database = (operation: string) =>
<A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, Exclude<E, Extract<E, SqlError.SqlError>> | DependencyUnavailable, R> =>
  self.pipe(Effect.catchIf(
    (error): error is Extract<E, SqlError.SqlError> => SqlError.isSqlError(error),
    (error) => Effect.fail(fromSqlError(operation)(error)),
    Effect.fail
  ))

const messages: Record<Dependency, string> = {
  database: "The database is unavailable; retry after the number of seconds in Retry-After, with the same Idempotency-Key.",
  guardian: "The guardian is unavailable; retry after the number of seconds in Retry-After, with the same Idempotency-Key.",
  chain: "The chain is unavailable; retry after the number of seconds in Retry-After, with the same Idempotency-Key.",
  bus: "The event bus is unavailable; retry after the number of seconds in Retry-After."
}

/**
 * The 503 a client is given for a dependency's outage. The envelope middleware adds
 * `Retry-After` ({@link retryAfterSecondsDefault}) to every 503 that has none.
 *
 * @since 0.5.0
 * @category constructors
 */
export const toServiceUnavailable = (error: DependencyUnavailable): ServiceUnavailable =>
  ServiceUnavailable.of(messages[error.dependency])

/**
 * Answers {@link DependencyUnavailable} with 503 `service_unavailable`, logging which dependency
 * failed in which step (and whether a retry can help) for the operator.
 *
 * @since 0.5.0
 * @category combinators
 */
export const answerServiceUnavailable = <A, E, R>(
  self: Effect.Effect<A, E, R>
): Effect.Effect<A, Exclude<E, Extract<E, DependencyUnavailable>> | ServiceUnavailable, R> =>
  self.pipe(Effect.catchIf(
    (error): error is Extract<E, DependencyUnavailable> => error instanceof DependencyUnavailable,
    (error) =>
      Effect.logWarning("dependency unavailable").pipe(
        Effect.annotateLogs({
          dependency: error.dependency,
          operation: error.operation,
          retryable: error.retryable,
          detail: error.detail
        }),
        Effect.andThen(Effect.fail(toServiceUnavailable(error)))
      ),
    Effect.fail
  ))
