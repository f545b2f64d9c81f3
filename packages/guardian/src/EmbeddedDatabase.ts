/**
 * The embedded PostgreSQL (PGlite) that the guardian and the server run: a `PgliteClient` over a
 * `PreparedStatementPGlite` (see its module), on the caller's thread or on a thread of its own
 * (`DatabaseThread`), kept vacuumed and analyzed.
 *
 * @since 0.1.0
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { performance } from "node:perf_hooks"
import { fileURLToPath } from "node:url"
import { PgliteClient } from "@effect/sql-pglite"
import { Cause, Clock, Duration, Effect } from "effect"
import { ThreadedPGlite } from "./DatabaseThread.ts"
import { PreparedStatementPGlite } from "./PreparedStatementPGlite.ts"
import { canTrimHeap, collectGarbage, trimHeap } from "./ProcessMemory.ts"

export { PreparedStatementPGlite } from "./PreparedStatementPGlite.ts"

/**
 * Where the embedded database runs: on the thread that calls it (`"caller"`), or on a worker
 * thread of its own (`"own"`, see `DatabaseThread`).
 *
 * @since 0.1.0
 * @category models
 */
export type DatabaseThreading = typeof databaseThreadings[number]

/**
 * @since 0.1.0
 * @category models
 */
export const databaseThreadings = ["own", "caller"] as const

/**
 * Makes `directory` a freshly initialised database cluster, as PGlite's first start in a
 * directory does (initdb), and closes it: a template for `seedFromTemplate`. Nothing is written
 * to it afterwards.
 *
 * @since 0.10.0
 * @category constructors
 */
export const initialiseTemplate = async (directory: string): Promise<void> => {
  const db = new PreparedStatementPGlite(directory)
  await db.waitReady
  await db.close()
}

/**
 * Copies `template` (made by `initialiseTemplate`) to `dataDir` when `dataDir` holds no
 * database yet, so that PGlite's first start there resumes a cluster instead of running initdb
 * (about 2.4 s of CPU on the 2-core VM; copying its ~40 MB takes a fifth of that). A directory
 * that holds a database already is left as it is. What PostgreSQL finds is what initdb would
 * have made: the template is initdb's own output, never opened after. The copy is made beside
 * `dataDir` and renamed into place, so a process stopped midway leaves no half database there;
 * an empty `dataDir` is replaced, one with other files in it is refused (as initdb refuses it).
 * What a killed earlier copy left beside it, whichever process made it, is removed first (the
 * caller holds the data directory's lock).
 *
 * @since 0.10.0
 * @category constructors
 */
export const seedFromTemplate = (dataDir: string, template: string): void => {
  if (fs.existsSync(path.join(dataDir, "PG_VERSION"))) return
  removeEarlierPartials(dataDir, "template")
  const partial = partialName(dataDir, "template")
  fs.cpSync(template, partial, { recursive: true })
  moveIntoPlace(partial, dataDir)
}

/**
 * Makes `dataDir` a freshly initialised cluster when it holds no database yet, with initdb run in
 * a child process (`initialiseDatabase.ts`) that exits once it is done, so that this process
 * opens the directory as it would on a restart (D91). In process, PGlite's first start runs
 * initdb in a second, throwaway PostgreSQL instance and tiers its WebAssembly up while doing so;
 * garbage collected after the open (`collectGarbage`), it still left ~100-150 MB more resident
 * in the server and the guardian together than a restart does (the bench's idle reading 812-836
 * against 682-707 MB, docs/benchmarks/notes/2026-12-01-initdb-apart.md).
 *
 * The cluster is made beside `dataDir` and moved into place as `seedFromTemplate` moves a copy,
 * so a process stopped midway leaves no half database there; what a killed earlier start left
 * beside it is removed first (the caller holds the data directory's lock). A `dataDir` that
 * holds other files is refused before anything runs, as initdb refuses it. A child that fails
 * (its exit status or signal, and what it wrote to stderr) fails the open, as PGlite's own initdb
 * failing in process does: a defect, since nothing can be served without the database.
 *
 * @since 0.16.0
 * @category constructors
 */
export const initialiseApart = (dataDir: string): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (fs.existsSync(path.join(dataDir, "PG_VERSION"))) return Effect.void
    if (fs.existsSync(dataDir) && fs.readdirSync(dataDir).length > 0) {
      return Effect.die(new Error(`${dataDir} holds files but no database: refusing to initialise one there`))
    }
    removeEarlierPartials(dataDir, "initdb")
    const partial = partialName(dataDir, "initdb")
    return initialiseInChild(partial).pipe(
      Effect.andThen(Effect.sync(() => moveIntoPlace(partial, dataDir))),
      Effect.ensuring(Effect.sync(() => fs.rmSync(partial, { recursive: true, force: true })))
    )
  })

/** The child's entry: a TypeScript file, run by the same node with its types stripped. */
const initialiseEntry = fileURLToPath(new URL("./initialiseDatabase.ts", import.meta.url))

/**
 * What earlier starts, killed while they made a database (by `kind`), left beside `dataDir`: the
 * names `partialName` gives, the prefix followed by a process id and nothing else. Any other name
 * with the prefix (an operator's `pglite.template-backup`) is not ours to remove.
 */
const removeEarlierPartials = (dataDir: string, kind: PartialKind): void => {
  const parent = path.dirname(dataDir)
  const prefix = `${path.basename(dataDir)}.${kind}-`
  // Not a directory (yet): nothing was left there; making it is the copy's or the child's.
  if (fs.statSync(parent, { throwIfNoEntry: false })?.isDirectory() !== true) return
  for (const name of fs.readdirSync(parent)) {
    if (name.startsWith(prefix) && /^[0-9]+$/.test(name.slice(prefix.length))) {
      fs.rmSync(path.join(parent, name), { recursive: true, force: true })
    }
  }
}

/** What a partial copy is made by: `seedFromTemplate`'s copy or `initialiseApart`'s child. */
type PartialKind = "initdb" | "template"

/** Where this process makes its partial copy of `kind` beside `dataDir`; `removeEarlierPartials` matches these names. */
const partialName = (dataDir: string, kind: PartialKind): string => `${dataDir}.${kind}-${process.pid}`

/**
 * Runs the child on `directory` (emptied first). Interrupted, the child is killed and waited for,
 * so that nothing writes to `directory` once the interruption has ended. Killed itself (SIGKILL,
 * where no interruption runs), this process leaves the child to notice and end by itself: it is
 * given this process's pid for that (initialiseDatabase.ts).
 */
const initialiseInChild = (directory: string): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    fs.rmSync(directory, { recursive: true, force: true })
    const child = execFile(process.execPath, ["--disable-warning=ExperimentalWarning", initialiseEntry, directory, String(process.pid)], (error, _stdout, stderr) => {
      if (error === null) return resume(Effect.void)
      const ended = error.signal ? `signal ${error.signal}` : `exit status ${String(error.code)}`
      resume(Effect.die(new Error(`initialising the embedded database in ${directory} failed (${ended}): ${stderr.trim() || "nothing on stderr"}`)))
    })
    return Effect.callback<void>((exited) => {
      if (child.exitCode !== null || child.signalCode !== null) return exited(Effect.void)
      child.once("exit", () => exited(Effect.void))
      child.kill("SIGKILL")
    })
  })

/**
 * Renames a complete `partial` cluster to `dataDir`: an empty `dataDir` is replaced, one with
 * other files in it is refused (as initdb refuses it); `partial` is removed on a failure.
 */
const moveIntoPlace = (partial: string, dataDir: string): void => {
  try {
    if (fs.existsSync(dataDir)) fs.rmdirSync(dataDir)
    fs.renameSync(partial, dataDir)
  } catch (error) {
    fs.rmSync(partial, { recursive: true, force: true })
    throw error
  }
}

/**
 * A `PgliteClient` over a `PreparedStatementPGlite` in a directory (or in memory with
 * `undefined`), on the caller's thread or its own (`threading`), closed with its scope (giving
 * up after `closeTimeoutMs`). A directory with no database yet is initialised first, before PGlite
 * opens it: a copy of `template` (a directory made by `initialiseTemplate`; `seedFromTemplate`)
 * when one is given, otherwise by initdb in a child process (`initialiseApart`). In memory
 * neither is used: PGlite initialises the database in process.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeEmbeddedClient = (
  dataDir: string | undefined,
  closeTimeoutMs = 5_000,
  maintenance: MaintenanceSchedule = defaultMaintenanceSchedule,
  threading: DatabaseThreading = "caller",
  template: string | undefined = undefined
) =>
  Effect.gen(function*() {
    if (dataDir !== undefined && !dataDir.includes("://")) {
      yield* template === undefined ? initialiseApart(dataDir) : Effect.sync(() => seedFromTemplate(dataDir, template))
    }
    const pglite = yield* threading === "own"
      ? Effect.acquireRelease(
        Effect.promise(() => ThreadedPGlite.open(dataDir)),
        // Bounded inside: past the timeout the thread is ended, so it cannot hold the process open.
        (db) => Effect.promise(() => db.close(closeTimeoutMs))
      ).pipe(Effect.map((db) => db.asClient()))
      : Effect.acquireRelease(
        Effect.promise(async () => {
          const db = new PreparedStatementPGlite(dataDir)
          await db.waitReady
          // What opening left unreferenced (an in-memory database's initdb instance among it) given back now.
          collectGarbage()
          return db
        }),
        (db) => Effect.promise(() => db.close()).pipe(Effect.timeoutOption(closeTimeoutMs), Effect.ignore)
      )
    const client = yield* PgliteClient.fromClient({ liveClient: pglite })
    // On the wall clock, whatever clock the caller's context holds: the database's time is real
    // time, and a test's virtual clock moved on by a day must not run the 2,880 rounds it spans.
    yield* Effect.forkScoped(keepTablesMaintained(client, maintenance).pipe(Effect.provideService(Clock.Clock, Clock.Clock.defaultValue())))
    yield* Effect.forkScoped(keepHeapTrimmed.pipe(Effect.provideService(Clock.Clock, Clock.Clock.defaultValue())))
    return client
  })

/**
 * How often a process with an embedded database considers giving its C heap's free pages back
 * (D92), and how busy its event loop may have been over that time for it to do so.
 *
 * @since 0.16.0
 * @category constants
 */
export const heapTrim = { intervalMs: 2_000, quietShare: 0.5 } as const

/**
 * D92: the C heap's free pages given back once the database is open (what opening left), then
 * every `heapTrim.intervalMs` in which this process's event loop was under `heapTrim.quietShare`
 * busy: after a load, not during it. Under load the pages given back are used again at once,
 * each at the cost of a page fault, and the bench read up to +16 % CPU a transfer at 256 clients
 * with a trim every 10 s regardless (docs/benchmarks/notes/2026-12-01-heap-trim.md). Without the
 * addon (`ProcessMemory.canTrimHeap`) it says so once and ends. The event loop read is this
 * thread's: with the database on a thread of its own (`EMBEDDED_DATABASE_THREAD=own`) a load
 * on that thread alone does not count, and a trim may then run during it.
 */
const keepHeapTrimmed: Effect.Effect<void> = Effect.suspend(() => {
  if (!canTrimHeap()) {
    return Effect.logInfo("glibc's heap is not trimmed: packages/guardian/native/build/mallocTrim.node was not built or does not load (D92; `sh packages/guardian/native/build.sh` says why)")
  }
  let since = performance.eventLoopUtilization()
  const trimWhenQuiet = Effect.sync(() => {
    const now = performance.eventLoopUtilization()
    const busy = performance.eventLoopUtilization(now, since).utilization
    since = now
    if (busy < heapTrim.quietShare) trimHeap()
  })
  return Effect.sync(trimHeap).pipe(
    Effect.andThen(Effect.forever(Effect.sleep(Duration.millis(heapTrim.intervalMs)).pipe(Effect.andThen(trimWhenQuiet)))),
    Effect.asVoid
  )
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
  /**
   * The longest wait between two such checks: each check that finds no table grown (or fails)
   * doubles the wait up to this, one that finds one brings it back to `growthCheckMs`.
   */
  readonly growthCheckMaxMs: number
}

/**
 * The wait before the next growth check: back to the shortest after a check that analyzed a
 * table (tables are growing), twice the last (at most the longest) after one that did not or
 * failed. A steady database then reads its catalogue every 16 s instead of every 2 s (the read
 * stats every table's files: ~20 ms on this VM), and a persistent failure warns ever more rarely.
 *
 * @since 0.7.0
 * @category constructors
 */
export const nextGrowthCheckMs = (schedule: MaintenanceSchedule, lastWaitMs: number, analyzedAny: boolean): number =>
  analyzedAny ? schedule.growthCheckMs : Math.min(schedule.growthCheckMaxMs, Math.max(schedule.growthCheckMs, lastWaitMs * 2))

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultMaintenanceSchedule: MaintenanceSchedule = {
  firstAfterMs: 10_000,
  minIntervalMs: 30_000,
  maxShare: 0.01,
  growthCheckMs: 2_000,
  growthCheckMaxMs: 16_000
}

/**
 * PostgreSQL's autovacuum removes the dead row versions that updates and deletes leave, and
 * gathers planner statistics (ANALYZE), as tables change; PGlite has no autovacuum. Without
 * statistics the planner guesses every table's size and every column's spread, and picks
 * plans by those guesses (in the throughput profiles, the webhook recorder's update scanned a whole partial
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
 * Between rounds (and before the first), every `growthCheckMs` (backing off to `growthCheckMaxMs`
 * while nothing grows, see `nextGrowthCheckMs`), a table grown past twice the
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
    let growthCheckMs = schedule.growthCheckMs
    for (;;) {
      const untilRoundMs = nextRoundMs - (yield* Clock.currentTimeMillis)
      yield* Effect.sleep(Duration.millis(Math.max(0, Math.min(growthCheckMs, untilRoundMs))))
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
        let analyzedAny = false
        yield* client<{ readonly name: string }>`
          SELECT c.oid::regclass::text AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE c.relkind = 'r' AND n.nspname = 'public'
            AND pg_relation_size(c.oid) / current_setting('block_size')::int > 2 * greatest(c.relpages, 1)
          ORDER BY 1`.pipe(
          Effect.tap((grown) => Effect.forEach(grown, ({ name }) => client.unsafe(`ANALYZE ${name}`), { discard: true })),
          Effect.tap((grown) => Effect.sync(() => (analyzedAny = grown.length > 0))),
          Effect.tap((grown) =>
            grown.length === 0 ? Effect.void : Clock.currentTimeMillis.pipe(Effect.flatMap((nowMs) =>
              Effect.logDebug("embedded database: grown tables analyzed").pipe(
                Effect.annotateLogs({ tables: grown.map(({ name }) => name).join(","), took_ms: nowMs - startedMs })
              )
            ))
          ),
          logFailure("ANALYZE")
        )
        growthCheckMs = nextGrowthCheckMs(schedule, growthCheckMs, analyzedAny)
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
