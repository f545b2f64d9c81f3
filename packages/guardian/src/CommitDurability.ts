/**
 * Which commits wait for the disk. Every commit does (PostgreSQL's default, and the embedded
 * database's since it syncs its WAL: `DurableNodeFS`), except those this module's combinators
 * run. In this package, which the server's and the guardian's stores both depend on; the server
 * re-exports it from `platform/CommitDurability.ts`.
 *
 * @since 0.12.0
 */
import { Effect, Option } from "effect"
import type { SqlClient, Statement } from "effect/sql"

/**
 * Runs one statement in its implicit transaction with a commit that does not wait for the disk
 * (`synchronous_commit = off`, set for this transaction only), without BEGIN, SET and COMMIT
 * round trips (on the embedded database each is a call on the caller's thread): `statement`
 * places the fragment where it is evaluated once before the commit (a one-row subquery in its
 * FROM, a CTE it reads).
 *
 * Only for writes whose loss in a host crash is harmless because they are done again (the relay's
 * mark: the events are published again and deduplicated by id; the guardian's settlement mark: the
 * recovery round settles again, and the guardian decides a transfer once; the webhook worker's
 * leases and results, D72; the idempotency claim: a retry runs a claim that names no operation, D80;
 * the guardian's chain cursors: the logs are read again and booked once by their (tx hash, log index)). Every other commit waits for its WAL to reach the disk, and the WAL is
 * one sequence: the next such commit makes this one durable too. A crash loses it only if none
 * came after (in the embedded database, a kill -9 as well: with no WAL writer process, its WAL
 * waits in memory for that next commit). Inside a caller's transaction the fragment sets nothing
 * (it reads the setting back), so the caller's commit is never weakened. `waitForDisk` keeps the
 * default: a caller that relaxes only some of its writes (the webhook result writer) passes it.
 * Why: one sync of the WAL per commit is the embedded mode's largest cost of durability
 * (docs/benchmarks.md, "Durable commits").
 *
 * @since 0.12.0
 * @category combinators
 */
export const statementWithoutWaitingForDisk = <A, E, R>(
  sql: SqlClient.SqlClient,
  statement: (commitSetting: Statement.Fragment) => Effect.Effect<A, E, R>,
  waitForDisk = false
) => unsafeStatementWithoutWaitingForDisk(sql, (commitSetting) => statement(sql.literal(commitSetting)), waitForDisk)

/**
 * `statementWithoutWaitingForDisk` for a statement written as text (`sql.unsafe`, a VALUES list of
 * as many rows as asked): `commitSetting` is the expression's SQL text.
 *
 * @since 0.12.0
 * @category combinators
 */
export const unsafeStatementWithoutWaitingForDisk = <A, E, R>(
  sql: SqlClient.SqlClient,
  statement: (commitSetting: string) => Effect.Effect<A, E, R>,
  waitForDisk = false
) =>
  Effect.serviceOption(sql.transactionService).pipe(
    Effect.flatMap((transaction) =>
      statement(
        Option.isSome(transaction) || waitForDisk
          ? "current_setting('synchronous_commit')"
          : "set_config('synchronous_commit', 'off', true)"
      )
    )
  )
