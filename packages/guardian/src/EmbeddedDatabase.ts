/**
 * Embedded PostgreSQL (PGlite) as the guardian and the server run it, with every parameterized
 * statement prepared once and then executed in one call into PGlite.
 *
 * Why: PGlite's `query(sql, params)` drives the extended protocol one message per call into its
 * WebAssembly (Parse, Describe statement, Bind, Describe portal, Execute, Sync: six calls, each
 * with its JavaScript framing and result parsing), and an unnamed statement is parsed, analysed
 * and planned again on every execution. The throughput profiles of issue 16 put PGlite at about
 * half of both processes' CPU per transfer, dominated by that per-call cost rather than by the
 * work of the statements (docs/benchmarks.md, "PGlite: what a statement costs"). Here a statement
 * text is prepared once under a name (Parse + Describe + Sync, one call; its parameter types and
 * row description kept), and each execution is Bind + Execute + Sync in one call. PostgreSQL then
 * plans a named statement as it would over a driver's prepared statements (custom plans first, a
 * generic plan once it is no dearer), so a repeated statement is neither parsed nor, usually,
 * planned again.
 *
 * Behaviour is PGlite's own `query`: the same serializers (by the parameter types PostgreSQL
 * reports), the same parsers and result shape (`parse.parseResults`), the same error (the
 * `DatabaseError`, with the query attached), the same mutual exclusion. Statements that fail
 * are forgotten (prepared again on next use), so a statement made stale by a schema change is
 * prepared afresh; one whose result type a migration changed ("cached plan must not change
 * result type") is prepared again and run once more at once, outside a transaction. Texts are
 * bounded: past `maxPreparedStatements` the oldest half is closed. Query options this path does
 * not implement (`blob`, `paramTypes`, `onNotice`; the service sets none) go PGlite's own way.
 *
 * @since 0.1.0
 */
import { PGlite, parse, protocol, type QueryOptions, type Results } from "@electric-sql/pglite"
import { PgliteClient } from "@effect/sql-pglite"
import { Cause, Clock, Duration, Effect } from "effect"

type BackendMessage = Awaited<ReturnType<PGlite["execProtocolStream"]>>[number]

interface Prepared {
  readonly name: string
  readonly parameterTypes: ReadonlyArray<number>
  /** The statement's RowDescription, or undefined for one that returns no rows (NoData). */
  readonly rowDescription: BackendMessage | undefined
}

/** Bounds the named statements held by the backend (and their plans in its memory). */
const maxPreparedStatements = 512

/** SQLSTATE of "cached plan must not change result type" (feature_not_supported). */
const featureNotSupported = "0A000"

const concat = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  let length = 0
  for (const part of parts) length += part.length
  const out = new Uint8Array(length)
  let offset = 0
  for (const part of parts) {
    out.set(part, offset)
    offset += part.length
  }
  return out
}

const attachQuery = (error: unknown, query: string, params: ReadonlyArray<unknown>, options: QueryOptions | undefined) => {
  if (error instanceof Error) Object.assign(error, { query, params, queryOptions: options })
  return error
}

/**
 * PGlite whose `query` runs each statement text as a named prepared statement (see the module
 * comment). Everything else is PGlite's.
 *
 * @since 0.1.0
 * @category models
 */
export class PreparedStatementPGlite extends PGlite {
  readonly #prepared = new Map<string, Prepared>()
  #nextName = 0

  /** Executions that reused a prepared statement, and statements prepared: for tests and benchmarks. */
  readonly preparedStatistics = { executions: 0, prepares: 0 }

  override async query<T>(query: string, params: Array<unknown> = [], options?: QueryOptions): Promise<Results<T>> {
    // Options this path does not implement (the service sets none): PGlite's own way.
    if (options?.blob !== undefined || options?.paramTypes !== undefined || options?.onNotice !== undefined) {
      return super.query<T>(query, params, options)
    }
    // As PGlite's own `query`: ready (not `waitReady`: PGlite queries itself while it starts),
    // outside any `transaction()` callback and alone on the backend.
    await this._checkReady()
    return this._runExclusiveTransaction(() => this._runExclusiveQuery(async () => {
      try {
        return await this.#run<T>(query, params, options)
      } catch (error) {
        const stalePlan = (error as { code?: unknown }).code === featureNotSupported &&
          /cached plan must not change result type/.test(String((error as { message?: unknown }).message))
        // Inside a transaction the failure has aborted it: a second try could only fail too.
        if (!stalePlan || this.isInTransaction()) throw attachQuery(error, query, params, options)
        // A migration changed what the statement returns: prepare it again and run it once more.
        return await this.#run<T>(query, params, options).catch((again) => {
          throw attachQuery(again, query, params, options)
        })
      }
    }))
  }

  async #run<T>(query: string, params: ReadonlyArray<unknown>, options: QueryOptions | undefined): Promise<Results<T>> {
    const prepared = this.#prepared.get(query) ?? await this.#prepare(query)
    const values = params.map((value, index) => {
      if (value === null || value === undefined) return null
      const type = prepared.parameterTypes[index]!
      const serializer = options?.serializers?.[type] ?? this.serializers[type]
      return serializer ? serializer(value) : String(value)
    })
    let messages: Array<BackendMessage>
    try {
      messages = await this.execProtocolStream(
        concat([
          protocol.serialize.bind({ statement: prepared.name, values }),
          protocol.serialize.execute({}),
          protocol.serialize.sync()
        ]),
        { syncToFs: false }
      )
    } catch (error) {
      await this.#forget(query)
      throw error
    }
    this.preparedStatistics.executions += 1
    await this.syncToFs()
    const described = prepared.rowDescription === undefined ? messages : [prepared.rowDescription, ...messages]
    return parse.parseResults(described, this.parsers, options)[0] as Results<T>
  }

  async #prepare(query: string): Promise<Prepared> {
    if (this.#prepared.size >= maxPreparedStatements) await this.#closeOldest()
    const name = `pps_${(this.#nextName++).toString(36)}`
    const messages = await this.execProtocolStream(
      concat([
        protocol.serialize.parse({ name, text: query, types: [] }),
        protocol.serialize.describe({ type: "S", name }),
        protocol.serialize.sync()
      ]),
      { syncToFs: false }
    )
    const prepared: Prepared = {
      name,
      parameterTypes: parse.parseDescribeStatementResults(messages),
      rowDescription: messages.find((message) => message.name === "rowDescription")
    }
    this.#prepared.set(query, prepared)
    this.preparedStatistics.prepares += 1
    return prepared
  }

  async #forget(query: string): Promise<void> {
    const prepared = this.#prepared.get(query)
    if (prepared === undefined) return
    this.#prepared.delete(query)
    await this.#close([prepared.name])
  }

  /** Closes the older half of the statements (a Map iterates in insertion order). */
  async #closeOldest(): Promise<void> {
    const names: Array<string> = []
    for (const [query, prepared] of this.#prepared) {
      if (names.length >= maxPreparedStatements / 2) break
      names.push(prepared.name)
      this.#prepared.delete(query)
    }
    await this.#close(names)
  }

  async #close(names: ReadonlyArray<string>): Promise<void> {
    await this.execProtocolStream(
      concat([...names.map((name) => protocol.serialize.close({ type: "S", name })), protocol.serialize.sync()]),
      { syncToFs: false, throwOnError: false }
    )
  }
}

/**
 * A `PgliteClient` over a `PreparedStatementPGlite` in a directory (or in memory with
 * `undefined`), closed with its scope (giving up after `closeTimeoutMs`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeEmbeddedClient = (
  dataDir: string | undefined,
  closeTimeoutMs = 5_000,
  maintenance: MaintenanceSchedule = defaultMaintenanceSchedule
) =>
  Effect.gen(function*() {
    const pglite = yield* Effect.acquireRelease(
      Effect.promise(async () => {
        const db = new PreparedStatementPGlite(dataDir)
        await db.waitReady
        return db
      }),
      (db) => Effect.promise(() => db.close()).pipe(Effect.timeoutOption(closeTimeoutMs), Effect.ignore)
    )
    const client = yield* PgliteClient.fromClient({ liveClient: pglite })
    // On the wall clock, whatever clock the caller's context holds: the database's time is real
    // time, and a test's virtual clock moved on by a day must not run the 2,880 rounds it spans.
    yield* Effect.forkScoped(keepTablesMaintained(client, maintenance).pipe(Effect.provideService(Clock.Clock, Clock.Clock.defaultValue())))
    return client
  })

/**
 * When the embedded database vacuums its tables and gathers planner statistics (see
 * `keepTablesMaintained`).
 *
 * @since 0.1.0
 * @category models
 */
export interface MaintenanceSchedule {
  /** The first round, this long after the database opens (after the migrations, as a rule). */
  readonly firstAfterMs: number
  /** The least time between two. */
  readonly minIntervalMs: number
  /** The most of the connection's time the rounds may take: the wait after one is its duration over this share. */
  readonly maxShare: number
  /** How often, between rounds, the tables' sizes are compared with the sizes their statistics were gathered at. */
  readonly growthCheckMs: number
}

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultMaintenanceSchedule: MaintenanceSchedule = {
  firstAfterMs: 10_000,
  minIntervalMs: 30_000,
  maxShare: 0.01,
  growthCheckMs: 2_000
}

/**
 * PostgreSQL's autovacuum removes the dead row versions that updates and deletes leave, and
 * gathers planner statistics (ANALYZE), as tables change; PGlite has no autovacuum. Without
 * statistics the planner guesses every table's size and every column's spread, and picks
 * plans by those guesses (issue 16: the webhook recorder's update scanned a whole partial
 * index, whose predicate matched, instead of looking rows up by primary key; 4.9 against 1.8
 * ms per batch, EXPLAIN ANALYZE). Without VACUUM every updated row leaves its old version and
 * its index entries behind for good: the outbox relay's read of unpublished events (a partial
 * index whose rows all leave it when published) visited every event ever published (764
 * buffers, ~1 ms a read after 8,000 events; 1 buffer and 0.01 ms once vacuumed), a cost that
 * grows with the service's age, and the files grow with every update. So every table is
 * vacuumed and analyzed periodically (`VACUUM (ANALYZE)`), through the client (queued like
 * any statement, never inside another caller's transaction), spaced so that the rounds take at
 * most `maxShare` of the single connection's time however large the tables grow (VACUUM skips
 * the pages its visibility map says are unchanged; ANALYZE samples at most 30,000 rows a
 * table). One table at a time: each blocks other statements while it runs (~0.5 s for the
 * whole database after 4,000 transfers). A table dropped meanwhile, or any other failure, is
 * logged and the next round tries again.
 *
 * Between rounds (and before the first), every `growthCheckMs`, a table grown past twice the
 * pages it had when its statistics were gathered (`pg_class.relpages`, which VACUUM and ANALYZE
 * set) is analyzed at once, as autovacuum analyzes a table once enough of it has changed. Why: every statement here
 * is prepared once, and PostgreSQL keeps a prepared statement's generic plan until the
 * statistics of a table it reads change. A plan made while a table held a page or two scans it
 * whole (cheaper than an index for a page), and kept while the table grows it costs more on
 * every execution: in the throughput benchmark's first minute (tables fresh, growing by
 * thousands of rows between rounds) the relay's read of unpublished events took 2.15 ms a call
 * instead of 0.29, and the transfer path's read of its chain submission by primary key 0.66
 * instead of 0.17 (docs/benchmarks.md, "Plans that follow growing tables"). The check is one
 * read of the catalogue (a few ms); ANALYZE alone samples the table and sends the invalidation
 * that makes every prepared statement on it plan again.
 */
const keepTablesMaintained = (client: PgliteClient.PgliteClient, schedule: MaintenanceSchedule) =>
  Effect.gen(function*() {
    let nextRoundMs = (yield* Clock.currentTimeMillis) + schedule.firstAfterMs
    for (;;) {
      const untilRoundMs = nextRoundMs - (yield* Clock.currentTimeMillis)
      yield* Effect.sleep(Duration.millis(Math.max(0, Math.min(schedule.growthCheckMs, untilRoundMs))))
      const startedMs = yield* Clock.currentTimeMillis
      if (startedMs >= nextRoundMs) {
        // One table per statement: other statements queue behind one table's VACUUM at a
        // time (a few ms to tens of ms), not behind the whole database's.
        yield* client<{ readonly name: string }>`
          SELECT c.oid::regclass::text AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE c.relkind = 'r' AND n.nspname = 'public' ORDER BY 1`.pipe(
          Effect.flatMap((tables) => Effect.forEach(tables, ({ name }) => client.unsafe(`VACUUM (ANALYZE) ${name}`), { discard: true })),
          logFailure("VACUUM")
        )
        const tookMs = (yield* Clock.currentTimeMillis) - startedMs
        yield* Effect.logDebug("embedded database: tables vacuumed and analyzed").pipe(Effect.annotateLogs({ took_ms: tookMs }))
        nextRoundMs = startedMs + tookMs + Math.max(schedule.minIntervalMs, tookMs / schedule.maxShare)
      } else {
        yield* client<{ readonly name: string }>`
          SELECT c.oid::regclass::text AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE c.relkind = 'r' AND n.nspname = 'public'
            AND pg_relation_size(c.oid) / current_setting('block_size')::int > 2 * greatest(c.relpages, 1)
          ORDER BY 1`.pipe(
          Effect.tap((grown) => Effect.forEach(grown, ({ name }) => client.unsafe(`ANALYZE ${name}`), { discard: true })),
          Effect.tap((grown) =>
            grown.length === 0 ? Effect.void : Clock.currentTimeMillis.pipe(Effect.flatMap((nowMs) =>
              Effect.logDebug("embedded database: grown tables analyzed").pipe(
                Effect.annotateLogs({ tables: grown.map(({ name }) => name).join(","), took_ms: nowMs - startedMs })
              )
            ))
          ),
          logFailure("ANALYZE")
        )
      }
    }
  })

/** Any failure but this fiber's own interruption (the database closing) is only logged: the next turn tries again. */
const logFailure = (what: string) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  self.pipe(
    Effect.asVoid,
    Effect.catchCause((cause) =>
      Cause.hasInterruptsOnly(cause) ? Effect.failCause(cause) : Effect.logWarning(`embedded database: ${what} failed; trying again later`).pipe(
        Effect.annotateLogs({ error: Cause.pretty(cause) })
      )
    )
  )
