/**
 * Group commit in the server: the writes asked for in the same turn share one
 * round trip into the database (issue 16: the cost per transfer is the number of
 * round trips and commits, not the work of each statement; docs/benchmarks.md,
 * "PGlite: what a statement costs").
 *
 * Callers ask with an Effect `Request`; the resolver built here gathers the requests
 * made in the same turn (up to `max`), writes them with one `write` (one SQL
 * transaction, or one statement) and answers each from its exit. When that shared
 * write fails, it writes and answers each request alone, so one request's fault
 * never becomes another's (as the guardian's group commit does).
 *
 * @since 0.7.0
 */
import { Context, Effect, Exit, type Request, RequestResolver } from "effect"
import type { SqlClient } from "effect/sql"

/**
 * A batch runs in its first asker's context: askers inside an SQL transaction share only
 * with askers in the same one (whose transaction they join, as a direct call would), never
 * with askers outside it, whose rows a rollback they did not ask for would take away.
 *
 * @since 0.7.0
 * @category constructors
 */
export const sharedWrites = <R extends Request.Any, A>(
  sql: SqlClient.SqlClient,
  write: (entries: ReadonlyArray<Request.Entry<R>>) => Effect.Effect<A, Request.Error<R>>,
  answer: (entries: ReadonlyArray<Request.Entry<R>>, exit: Exit.Exit<A, Request.Error<R>>) => void,
  max: number
): RequestResolver.RequestResolver<R> =>
  RequestResolver.batchN(
    RequestResolver.makeGrouped<R, unknown>({
      key: (entry) => Context.getOrUndefined(entry.context, sql.transactionService),
      resolver: (entries) =>
        Effect.exit(write(entries)).pipe(Effect.flatMap((exit) =>
          Exit.isSuccess(exit) || entries.length === 1
            ? Effect.sync(() => answer(entries, exit))
            : Effect.forEach(entries, (entry) => Effect.exit(write([entry])).pipe(Effect.map((alone) => answer([entry], alone))), {
              discard: true
            })
        ))
    }),
    max
  )
