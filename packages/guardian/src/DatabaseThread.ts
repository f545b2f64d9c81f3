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

/** The options a statement may carry across: the row shape only (the SQL client sets no other). */
interface StatementOptions {
  readonly rowMode?: "array" | "object"
}

type Call =
  | { readonly kind: "query"; readonly query: string; readonly params: ReadonlyArray<unknown>; readonly options: StatementOptions }
  | { readonly kind: "exec"; readonly query: string }
  | { readonly kind: "close" }

type Request = Call & { readonly id: number }

/** An error as plain data: its message, name, stack and own properties (PostgreSQL's fields among them). */
interface ErrorData {
  readonly name: string
  readonly message: string
  readonly stack: string | undefined
  readonly properties: Record<string, unknown>
}

type Reply =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly id: number; readonly ok: false; readonly error: ErrorData }

type Started = { readonly kind: "ready" } | { readonly kind: "failed"; readonly error: ErrorData }

/** Marks the worker this module starts, so that importing it on another worker thread runs nothing. */
const threadMarker = "pps-embedded-database-thread"

const toErrorData = (error: unknown): ErrorData => {
  if (!(error instanceof Error)) return { name: "Error", message: String(error), stack: undefined, properties: {} }
  const properties: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(error)) {
    // What cannot cross (the statement's options hold functions) stays behind.
    if (typeof value !== "function" && key !== "queryOptions") properties[key] = value
  }
  return { name: error.name, message: error.message, stack: error.stack, properties }
}

const fromErrorData = (data: ErrorData): Error => {
  const error = new Error(data.message)
  error.name = data.name
  if (data.stack !== undefined) error.stack = data.stack
  return Object.assign(error, data.properties)
}

/**
 * The error of every call once the thread is gone, with the SQLSTATE of a lost connection, so
 * that the SQL client reports what happened (a `ConnectionError`), as it would for a server.
 */
const connectionError = (message: string, code: "08003" | "08006"): Error =>
  Object.assign(new Error(message), { code })

/**
 * Waits up to `timeoutMs` for a thread that is ending by itself (its event loop left empty),
 * and terminates it only past that. Why not always `terminate()`: on Node 24.21 a process was
 * seen to abort (V8's `Check failed: jit_page_->allocations_.erase(addr) == 1`, SIGTRAP) while
 * a thread that had run PGlite's WebAssembly was being terminated; others report trouble with
 * terminating threads that run WebAssembly too (mmomtchev/sqlite-wasm-http#67). A thread that
 * ends by itself is never interrupted, so termination is left for the one case that needs it:
 * a close that hangs. That abort was seen again with this in place: its cause is a race in V8's
 * wasm code GC, which test processes now turn off (vitest.shared.ts).
 */
const endThread = async (worker: Worker, exited: Promise<unknown>, timeoutMs: number): Promise<void> => {
  let timer: ReturnType<typeof setTimeout> | undefined
  const outcome = await Promise.race([
    exited.then(() => "ended" as const),
    new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), timeoutMs)
    })
  ])
  clearTimeout(timer)
  if (outcome === "late") await worker.terminate()
}

/**
 * A PGlite on a worker thread, as the SQL client sees it: `query`, `exec` and `close`. The
 * other members of PGlite's interface (listen, dump, transactions by callback) are not offered;
 * the service uses none of them.
 *
 * @since 0.1.0
 * @category models
 */
export class ThreadedPGlite {
  readonly #worker: Worker
  readonly #pending = new Map<number, { readonly resolve: (value: unknown) => void; readonly reject: (error: Error) => void }>()
  #nextId = 0
  /** Set once the thread is gone (closed, or died): every call from then on fails with it. */
  #gone: Error | undefined
  /** The one close, however many times `close` is called. */
  #closing: Promise<void> | undefined

  /** Settles when the thread has ended, whichever way, with its exit code. */
  readonly #exited: Promise<number>
  #exitCode: number | undefined

  private constructor(worker: Worker, exited: Promise<number>) {
    this.#worker = worker
    this.#exited = exited
    void exited.then((code) => {
      this.#exitCode = code
    })
    // The thread holds the process open only while a call waits on it (as a pending socket
    // read would): idle, it leaves the process free to exit, as an inline PGlite does.
    worker.unref()
    worker.on("message", (reply: Reply) => {
      const pending = this.#pending.get(reply.id)
      if (pending === undefined) return
      this.#pending.delete(reply.id)
      if (this.#pending.size === 0) worker.unref()
      if (reply.ok) pending.resolve(reply.value)
      else pending.reject(fromErrorData(reply.error))
    })
    const lost = (error: Error) => {
      this.#gone ??= error
      for (const pending of this.#pending.values()) pending.reject(this.#gone)
      this.#pending.clear()
    }
    worker.on("error", (error) => lost(connectionError(`the embedded database's thread failed: ${error.message}`, "08006")))
    worker.on("exit", (code) => lost(connectionError(`the embedded database's thread exited (code ${code})`, "08006")))
  }

  /**
   * Starts the thread and opens the database in `dataDir` (in memory with `undefined`) there.
   * Resolves once it is ready; rejects with the opening's error.
   */
  static open(dataDir: string | undefined, timeoutMs = 5_000): Promise<ThreadedPGlite> {
    const worker = new Worker(new URL(import.meta.url), { workerData: { [threadMarker]: true, dataDir } })
    const exited = new Promise<number>((resolve) => worker.once("exit", resolve))
    return new Promise((resolve, reject) => {
      let answered = false
      const early = (error: Error) => reject(error)
      worker.once("error", early)
      void exited.then((code) => {
        if (!answered) reject(new Error(`the embedded database's thread exited while opening (code ${code})`))
      })
      worker.once("message", (started: Started) => {
        answered = true
        worker.off("error", early)
        if (started.kind === "ready") return resolve(new ThreadedPGlite(worker, exited))
        // The thread ends by itself after telling the failure: nothing of it outlives the call.
        // The failure told is the answer; an error the ending thread raises is not thrown here.
        worker.on("error", () => undefined)
        void endThread(worker, exited, timeoutMs).finally(() => reject(fromErrorData(started.error)))
      })
    })
  }

  #call<A>(call: Call): Promise<A> {
    if (this.#gone !== undefined) return Promise.reject(this.#gone)
    const id = this.#nextId++
    return new Promise<A>((resolve, reject) => {
      if (this.#pending.size === 0) this.#worker.ref()
      this.#pending.set(id, { resolve: resolve as (value: unknown) => void, reject })
      try {
        this.#worker.postMessage({ ...call, id } satisfies Request)
      } catch (error) {
        // A parameter that cannot be cloned: this call fails, the thread goes on.
        this.#pending.delete(id)
        if (this.#pending.size === 0) this.#worker.unref()
        throw error
      }
    })
  }

  /**
   * Options other than `rowMode` (`blob`, `paramTypes`, `onNotice`, which PGlite's own `query`
   * takes and the SQL client never sets) are not carried to the thread.
   */
  query<T>(query: string, params: ReadonlyArray<unknown> = [], options?: StatementOptions): Promise<Results<T>> {
    return this.#call({ kind: "query", query, params, options: options?.rowMode === undefined ? {} : { rowMode: options.rowMode } })
  }

  exec(query: string): Promise<Array<Results>> {
    return this.#call({ kind: "exec", query })
  }

  /**
   * How the thread ended: its exit code (0 when it ended by itself, 1 when it was terminated),
   * or undefined while it runs.
   */
  get exitCode(): number | undefined {
    return this.#exitCode
  }

  /**
   * Closes the database on its thread, which then ends by itself. A close that takes longer than
   * `timeoutMs` is not waited for: the thread is terminated (what it had not written is lost as in
   * a crash, which the database recovers from), so that a hung close cannot keep the process
   * alive. Never fails.
   */
  close(timeoutMs = 5_000): Promise<void> {
    this.#closing ??= this.#close(timeoutMs)
    return this.#closing
  }

  async #close(timeoutMs: number): Promise<void> {
    if (this.#gone !== undefined) return
    // Sent before the calls are refused: it queues behind the statements already sent. Past
    // the timeout it is rejected when the thread ends: handled here, not left unhandled.
    this.#call({ kind: "close" }).catch(() => undefined)
    this.#gone = connectionError("the embedded database is closed", "08003")
    await endThread(this.#worker, this.#exited, timeoutMs)
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
  const port = parentPort!
  let db: PreparedStatementPGlite
  try {
    db = new PreparedStatementPGlite(dataDir)
    await db.waitReady
  } catch (error) {
    port.postMessage({ kind: "failed", error: toErrorData(error) } satisfies Started)
    return
  }
  const onMessage = (request: Request) => {
    const answer = request.kind === "query"
      ? db.query(request.query, [...request.params], request.options)
      : request.kind === "exec"
      ? db.exec(request.query)
      : db.close()
    const reply = (message: Reply) => {
      try {
        port.postMessage(message)
      } catch (error) {
        // A result that cannot be cloned fails its call, not the thread (an exception here would
        // be an unhandled rejection, which ends the thread and every call after it).
        port.postMessage({ id: request.id, ok: false, error: toErrorData(error) } satisfies Reply)
      }
    }
    void answer.then(
      (value) => reply({ id: request.id, ok: true, value: value ?? null }),
      (error: unknown) => reply({ id: request.id, ok: false, error: toErrorData(error) })
    ).then(() => {
      // Closed (or failed to close): nothing else is served, and with nothing left to wait on
      // the thread ends by itself once the reply is sent.
      if (request.kind === "close") {
        port.off("message", onMessage)
        port.unref()
      }
    })
  }
  port.on("message", onMessage)
  port.postMessage({ kind: "ready" } satisfies Started)
}

if (!isMainThread && (workerData as Record<string, unknown> | null)?.[threadMarker] === true) {
  void serve((workerData as { readonly dataDir: string | undefined }).dataDir)
}
