/**
 * Group commit in the server: the writes (and the point reads) asked for in the same
 * turn share one round trip into the database (measured: the cost per transfer is the
 * number of round trips and commits, not the work of each statement; docs/benchmarks.md,
 * "PGlite: what a statement costs").
 *
 * Callers ask with an Effect `Request`; the resolver built here gathers the requests
 * made in the same turn (up to `max`), runs them with one `run` (one SQL transaction, or
 * one statement) and answers each from its exit. When a shared write fails, it runs and
 * answers each request alone, so one request's fault never becomes another's (as the
 * guardian's group commit does); a shared read's failure is everyone's.
 *
 * @since 0.7.0
 */
import { Context, Effect, Exit, type Request, RequestResolver } from "effect"
import type { SqlClient } from "effect/sql"

// Batches are grouped by a number per transaction, never by the transaction's own value: the
// grouping hashes its keys structurally (Effect's `Equal`), and hashing a connection walked the
// whole client, forever, at full CPU (found when a read was first asked inside a transaction).
const transactionNumbers = new WeakMap<object, number>()
let lastTransactionNumber = 0
const transactionNumber = (transaction: object | undefined): number => {
  if (transaction === undefined) return 0
  let number = transactionNumbers.get(transaction)
  if (number === undefined) {
    number = ++lastTransactionNumber
    transactionNumbers.set(transaction, number)
  }
  return number
}

/**
 * A batch runs in its first asker's context: askers inside an SQL transaction share only
 * with askers in the same one (whose transaction they join, as a direct call would), never
 * with askers outside it, whose rows a rollback they did not ask for would take away.
 *
 * @since 0.7.0
 * @category constructors
 */
export const sharedStatements = <R extends Request.Any, A>(
  sql: SqlClient.SqlClient,
  run: (entries: ReadonlyArray<Request.Entry<R>>) => Effect.Effect<A, Request.Error<R>>,
  answer: (entries: ReadonlyArray<Request.Entry<R>>, exit: Exit.Exit<A, Request.Error<R>>) => void,
  max: number,
  /**
   * Reads pass false: a shared SELECT does not fail for one asker's sake, so running each alone
   * would only repeat the failure (a database down: one timeout per asker, in turn).
   */
  retryAlone = true
): RequestResolver.RequestResolver<R> =>
  RequestResolver.batchN(
    RequestResolver.makeGrouped<R, number>({
      key: (entry) => transactionNumber(Context.getOrUndefined(entry.context, sql.transactionService)),
      resolver: (entries) =>
        Effect.exit(run(entries)).pipe(Effect.flatMap((exit) =>
          Exit.isSuccess(exit) || entries.length === 1 || !retryAlone
            ? Effect.sync(() => answer(entries, exit))
            : Effect.forEach(entries, (entry) => Effect.exit(run([entry])).pipe(Effect.map((alone) => answer([entry], alone))), {
              discard: true
            })
        ))
    }),
    max
  )
