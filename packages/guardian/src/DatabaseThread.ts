/**
 * The embedded database on a thread of its own: a `PreparedStatementPGlite` in a worker
 * thread, and on the caller's thread an object that answers `query` and `exec` by message.
 *
 * Why: PGlite runs PostgreSQL in WebAssembly on the thread that calls it, so every statement's
 * work (parse, plan, execute, write the files) and its result parsing take the event loop that
 * also serves HTTP, signs webhooks and runs Effect's fibers. In the webhooks benchmark the
 * server's one thread was saturated while the machine's second core was mostly idle, and half
 * of that thread was PGlite. On its own thread the database's work runs beside the rest: +16 %
 * deliveries a second there (docs/benchmarks.md, "The server's database on a thread of its
 * own"). What it costs: a structured clone of each statement's parameters and rows and two
 * thread wake-ups per statement (~22 µs a round trip on an idle machine, more when every core
 * is busy), and a second JavaScript heap. The transfer path runs many small statements while
 * the server, the guardian and anvil keep both cores busy, and there it cost ~0.9 ms of server
 * CPU per transfer and ~5 % of the rate: so it is a choice (`makeEmbeddedClient`'s `threading`),
 * not the default.
 *
 * The statements are the same statements, in the same order: each call is one message, the
 * thread hands them to PGlite as they arrive, and PGlite runs one at a time in that order (its
 * own lock), as it does for calls on the caller's thread. The SQL client's transactions are
 * unchanged (it keeps other statements out while one is open, as it does inline). Errors come
 * back with the properties PostgreSQL gave them (`code`, `constraint`, `detail`, ...), which is
 * what the SQL client classifies by. A process killed takes the thread with it, and the data
 * directory is written by the thread's PGlite as it would be by the caller's, so durability is
 * the same. Should the thread die alone, every statement in flight and every later one fails
 * with a lost connection's SQLSTATE (the SQL client's `ConnectionError`); nothing restarts it.
 *
 * @since 0.1.0
 */
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads"
import type { PGliteInterface, Results } from "@electric-sql/pglite"
import { PreparedStatementPGlite } from "./PreparedStatementPGlite.ts"
import { collectGarbage } from "./ProcessMemory.ts"
import { answerCalls, type Started, startThread, ThreadCalls, toErrorData } from "./ThreadCalls.ts"

/** The options a statement may carry across: the row shape only (the SQL client sets no other). */
interface StatementOptions {
  readonly rowMode?: "array" | "object"
}

type Call =
  | { readonly kind: "query"; readonly query: string; readonly params: ReadonlyArray<unknown>; readonly options: StatementOptions }
  | { readonly kind: "exec"; readonly query: string }
  | { readonly kind: "close" }

/** Marks the worker this module starts, so that importing it on another worker thread runs nothing. */
const threadMarker = "pps-embedded-database-thread"

const describe = "the embedded database's thread"

/**
 * The error of every call once the thread is gone, with the SQLSTATE of a lost connection, so
 * that the SQL client reports what happened (a `ConnectionError`), as it would for a server.
 */
const connectionError = (message: string, code: "08003" | "08006"): Error =>
  Object.assign(new Error(message), { code })

/**
 * A PGlite on a worker thread, as the SQL client sees it: `query`, `exec` and `close`. The
 * other members of PGlite's interface (listen, dump, transactions by callback) are not offered;
 * the service uses none of them.
 *
 * @since 0.1.0
 * @category models
 */
export class ThreadedPGlite {
  readonly #calls: ThreadCalls<Call>
  /** The one close, however many times `close` is called. */
  #closing: Promise<void> | undefined

  private constructor(calls: ThreadCalls<Call>) {
    this.#calls = calls
  }

  /**
   * Starts the thread and opens the database in `dataDir` (in memory with `undefined`) there.
   * Resolves once it is ready; rejects with the opening's error.
   */
  static async open(dataDir: string | undefined, timeoutMs = 5_000): Promise<ThreadedPGlite> {
    const { exited, worker } = await startThread(
      new Worker(new URL(import.meta.url), { workerData: { [threadMarker]: true, dataDir } }),
      describe,
      timeoutMs
    )
    return new ThreadedPGlite(new ThreadCalls<Call>(worker, exited, describe, (message) => connectionError(message, "08006")))
  }

  /**
   * Options other than `rowMode` (`blob`, `paramTypes`, `onNotice`, which PGlite's own `query`
   * takes and the SQL client never sets) are not carried to the thread.
   */
  query<T>(query: string, params: ReadonlyArray<unknown> = [], options?: StatementOptions): Promise<Results<T>> {
    return this.#calls.call({ kind: "query", query, params, options: options?.rowMode === undefined ? {} : { rowMode: options.rowMode } })
  }

  exec(query: string): Promise<Array<Results>> {
    return this.#calls.call({ kind: "exec", query })
  }

  /**
   * How the thread ended: its exit code (0 when it ended by itself, 1 when it was terminated),
   * or undefined while it runs.
   */
  get exitCode(): number | undefined {
    return this.#calls.exitCode
  }

  /**
   * Closes the database on its thread, which then ends by itself. A close that takes longer than
   * `timeoutMs` is not waited for: the thread is terminated (what it had not written is lost as in
   * a crash, which the database recovers from), so that a hung close cannot keep the process
   * alive. Never fails.
   */
  close(timeoutMs = 5_000): Promise<void> {
    this.#closing ??= this.#calls.close({ kind: "close" }, connectionError("the embedded database is closed", "08003"), timeoutMs)
    return this.#closing
  }

  /**
   * This object as the PGlite the SQL client (`@effect/sql-pglite`) is given: the client calls
   * `query` (its statements, transactions included, as BEGIN / COMMIT statements) and nothing
   * else unless asked for LISTEN, NOTIFY or a dump, which the service never asks for.
   */
  asClient(): PGliteInterface {
    return this as unknown as PGliteInterface
  }
}

/** The thread's side: one PGlite, one statement at a time, in the order they arrive. */
const serve = async (dataDir: string | undefined) => {
  let db: PreparedStatementPGlite
  try {
    db = new PreparedStatementPGlite(dataDir)
    await db.waitReady
    // This thread's heap is its own: what opening left unreferenced is collected here (ProcessMemory).
    collectGarbage()
  } catch (error) {
    parentPort!.postMessage({ kind: "failed", error: toErrorData(error) } satisfies Started)
    return
  }
  answerCalls<Call & { readonly id: number }>(
    (call) =>
      call.kind === "query"
        ? db.query(call.query, [...call.params], call.options)
        : call.kind === "exec"
        ? db.exec(call.query)
        : db.close(),
    // Closed (or failed to close): nothing else is served.
    (call, stop) => {
      if (call.kind === "close") stop()
    }
  )
}

if (!isMainThread && (workerData as Record<string, unknown> | null)?.[threadMarker] === true) {
  void serve((workerData as { readonly dataDir: string | undefined }).dataDir)
}
