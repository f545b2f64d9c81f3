/**
 * Group commit (the throughput work): the guardian's decisions and settlements queue here and run
 * one after the other inside one SQL transaction per group, so N concurrent calls cost
 * one BEGIN/COMMIT (and one write-ahead-log flush) instead of N. The profile showed the
 * guardian's CPU going mostly to PGlite, and a commit with its file-system calls is the
 * dearest statement (docs/guardian.md, "Group commit").
 *
 * Guarantees, the same as one transaction per call:
 * - a caller is answered only after the COMMIT that holds its effect (its Deferred is
 *   completed after `withTransaction` returns), so an answered authorization survives a
 *   SIGKILL right after the answer;
 * - units of a group run in sequence in one transaction, each seeing the writes of those
 *   before it, and each takes its balance rows with SELECT … FOR UPDATE as before: the
 *   balance checks are the same checks on the same rows;
 * - when any unit of a group fails (a typed failure, a defect, a storage error), the whole
 *   group is rolled back and every unit of it runs again alone, in its own transaction,
 *   so one caller's failure never becomes another's, nor leaves a partial write.
 *
 * Units must therefore be re-runnable: plain Effect descriptions whose only writes are
 * SQL statements (a log line inside a unit may repeat when its group is re-run).
 *
 * One group runs at a time; callers arriving meanwhile form the next group. There is no
 * added wait: a lone call on an idle guardian is its own group at once.
 */
import { Cause, Deferred, Effect, Exit, Option, Predicate, Queue, type Scope } from "effect"
import { type SqlError, SqlClient } from "effect/sql"

/** What ended a group: a typed failure's tag, or "defect", or "interrupted". */
const failureKind = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.findErrorOption(cause)
  if (Option.isSome(error)) {
    const tag = Predicate.hasProperty(error.value, "_tag") ? error.value._tag : undefined
    return typeof tag === "string" ? tag : "failure"
  }
  return Cause.hasDies(cause) ? "defect" : "interrupted"
}

/** Units per group: bounds one transaction's length and its row locks. */
const groupMax = 64

/** One caller's unit, with its answer closed over (the queue holds units of every type). */
interface Pending<H> {
  /** What the unit will lock, for the group's prefetch (none: the unit reads its own rows). */
  readonly hint: H | undefined
  /** Runs the unit inside the group's transaction and keeps its value for `answer`. */
  readonly step: Effect.Effect<void, unknown>
  /** Answers the caller with the kept value (after the group committed). */
  readonly answer: () => void
  /** Runs the unit in a transaction of its own and answers the caller with its outcome. */
  readonly alone: Effect.Effect<void>
  /** Answers the caller with an interruption (the guardian is shutting down). */
  readonly abandon: () => void
}

export interface GroupCommit<H> {
  /**
   * Runs `unit` in the next group's transaction; answers once that transaction committed.
   * `hint` says what it will lock: the group reads those rows first, together.
   */
  readonly run: <A, E>(unit: Effect.Effect<A, E>, hint?: H) => Effect.Effect<A, E | SqlError.SqlError>
  /**
   * Runs `units` in the next groups, in their order and with nothing queued between them (one
   * actor's turn, D73): each sees the writes of those before it. Answers each unit's outcome once
   * the transaction holding it committed; one unit's failure is its own (its group runs again,
   * unit by unit, in the same order).
   */
  readonly runAll: <A, E>(
    units: ReadonlyArray<{ readonly unit: Effect.Effect<A, E>; readonly hint: H | undefined }>
  ) => Effect.Effect<ReadonlyArray<Exit.Exit<A, E | SqlError.SqlError>>>
  /** Units queued for the next group (for tests: to know a group's callers have all arrived). */
  readonly queued: Effect.Effect<number>
}

/** Wraps the units of one transaction, inside it (the store's held balances). */
type Session = <A, E>(body: Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError.SqlError>

/**
 * The committer's context, built once by `make`: the transaction's client, the store's session
 * and prefetch, the queue of units, and the committer's state.
 */
interface Committer<H> {
  readonly sql: SqlClient.SqlClient
  readonly session: Session
  readonly prefetch: (hints: ReadonlyArray<H>) => Effect.Effect<void, SqlError.SqlError>
  readonly queue: Queue.Queue<Pending<H>>
  /** The group being run: answered with an interruption too if the committer stops mid-group. */
  running: ReadonlyArray<Pending<H>>
  /** Set when the committer has stopped: nothing would take a unit queued after that. */
  stopped: boolean
}

/**
 * Starts the group committer for the scope's life. At the scope's end, callers still
 * waiting (queued, or in the group that was running) are interrupted: their units may or
 * may not have committed, as with a call cut by a shutdown.
 */
export const make = <H = never>(
  session: Session,
  /**
   * Reads, inside the session and before a group runs, the rows its units' hints name (one
   * statement per kind instead of one per unit and row). A failure fails the group: its units
   * then run alone, unhinted, as after any failure.
   */
  prefetch: (hints: ReadonlyArray<H>) => Effect.Effect<void, SqlError.SqlError> = () => Effect.void
): Effect.Effect<GroupCommit<H>, never, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function*() {
    const committer: Committer<H> = {
      sql: yield* SqlClient.SqlClient,
      session,
      prefetch,
      queue: yield* Queue.unbounded<Pending<H>>(),
      running: [],
      stopped: false
    }
    yield* Queue.takeBetween(committer.queue, 1, groupMax).pipe(
      Effect.flatMap((group) => runGroup(committer, group)),
      Effect.forever,
      Effect.onExit(() => stop(committer)),
      Effect.forkScoped
    )
    return {
      run: <A, E>(unit: Effect.Effect<A, E>, hint?: H) => enqueue(committer, unit, hint),
      runAll: (units) => enqueueAll(committer, units),
      queued: Queue.size(committer.queue)
    }
  })

/** Runs one group in one transaction; when it fails, each of its units again, alone. */
const runGroup = <H>(committer: Committer<H>, group: ReadonlyArray<Pending<H>>) =>
  Effect.gen(function*() {
    committer.running = group
    // A lone unit that names no rows has nothing to prefetch: its own transaction, at once. One
    // that names rows runs as a group of one, so that its rows are read together too (a chain
    // follower's step names every log's reservation and credit: one read each instead of one a log).
    if (group.length === 1 && group[0]!.hint === undefined) return yield* group[0]!.alone
    const hints = group.flatMap((pending) => (pending.hint === undefined ? [] : [pending.hint]))
    const together = yield* Effect.exit(committer.sql.withTransaction(committer.session(
      Effect.andThen(committer.prefetch(hints), Effect.forEach(group, (pending) => pending.step, { discard: true }))
    )))
    if (Exit.isSuccess(together)) {
      for (const pending of group) pending.answer()
      return
    }
    // Rolled back as a whole: each unit again, alone, so only the failing one fails. Said at
    // debug level (the callers' answers come from the re-runs): a group that keeps failing is
    // the one sign of a fault in what the group holds in memory. The reason names a kind, never
    // values (a storage error's text could name rows).
    yield* Effect.logDebug("group rolled back: its units run again alone").pipe(
      Effect.annotateLogs({ units: group.length, reason: failureKind(together.cause) })
    )
    for (const pending of group) yield* pending.alone
  })

/** Marks the committer stopped and interrupts the callers still waiting: queued, or in the running group. */
const stop = <H>(committer: Committer<H>) =>
  Effect.sync(() => {
    committer.stopped = true
  }).pipe(
    Effect.andThen(Queue.clear(committer.queue)),
    Effect.flatMap((left) => Effect.sync(() => [...committer.running, ...left].forEach((pending) => pending.abandon())))
  )

/** Queues one caller's unit for the next group; answers once the transaction holding it committed. */
const enqueue = <H, A, E>(committer: Committer<H>, unit: Effect.Effect<A, E>, hint: H | undefined): Effect.Effect<A, E | SqlError.SqlError> =>
  Effect.suspend(() => {
    // A call after shutdown is answered as one cut by it, instead of waiting for ever.
    if (committer.stopped) return Effect.interrupt
    const { done, pending } = pendingOf(committer, unit, hint)
    return Queue.offer(committer.queue, pending).pipe(Effect.andThen(Deferred.await(done)))
  })

/** Queues `units` together, in their order (one offer: no other caller's unit between them); answers each one's outcome. */
const enqueueAll = <H, A, E>(
  committer: Committer<H>,
  units: ReadonlyArray<{ readonly unit: Effect.Effect<A, E>; readonly hint: H | undefined }>
): Effect.Effect<ReadonlyArray<Exit.Exit<A, E | SqlError.SqlError>>> =>
  Effect.suspend(() => {
    if (committer.stopped) return Effect.interrupt
    const queued = units.map(({ hint, unit }) => pendingOf(committer, unit, hint))
    return Queue.offerAll(committer.queue, queued.map(({ pending }) => pending)).pipe(
      Effect.andThen(Effect.forEach(queued, ({ done }) => Effect.exit(Deferred.await(done))))
    )
  })

/** One unit's place in the queue and the Deferred its caller awaits. */
const pendingOf = <H, A, E>(committer: Committer<H>, unit: Effect.Effect<A, E>, hint: H | undefined) => {
  const done = Deferred.makeUnsafe<A, E | SqlError.SqlError>()
  let kept: Exit.Exit<A> | undefined
  const pending: Pending<H> = {
    hint,
    step: Effect.map(unit, (value) => {
      kept = Exit.succeed(value)
    }),
    answer: () => {
      if (kept !== undefined) Deferred.doneUnsafe(done, kept)
    },
    alone: Effect.exit(committer.sql.withTransaction(committer.session(unit))).pipe(Effect.map((exit) => {
      Deferred.doneUnsafe(done, exit)
    })),
    // A no-op for a caller already answered (its Deferred is done).
    abandon: () => {
      Deferred.doneUnsafe(done, Exit.failCause(Cause.interrupt()))
    }
  }
  return { done, pending }
}
