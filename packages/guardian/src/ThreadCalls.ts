/**
 * Calls to a worker thread by message, each answered by id: what the embedded database on its
 * own thread (`DatabaseThread`) and the server's sealing thread share. Imported by its own path
 * (`@pps/guardian/ThreadCalls`), so that a thread loads this module and not the guardian.
 *
 * - A call is one message with an id; the thread answers `{ id, ok, value | error }`.
 * - The thread holds the process open only while a call waits on it (as a pending socket read
 *   would): idle, it leaves the process free to exit.
 * - Should the thread die, every call in flight and every later one fails with the error
 *   `lost` makes; nothing restarts it.
 * - It ends by itself when told to close (`endThread`): terminating a thread that ran
 *   WebAssembly has aborted processes (below).
 *
 * @since 0.9.0
 */
import { parentPort, type Worker } from "node:worker_threads"

/**
 * An error as plain data, to cross between threads: its message, name, stack and own
 * properties (PostgreSQL's fields among them).
 *
 * @since 0.9.0
 * @category models
 */
export interface ErrorData {
  readonly name: string
  readonly message: string
  readonly stack: string | undefined
  readonly properties: Record<string, unknown>
}

/** A thread's answer to a call. */
type Reply =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly id: number; readonly ok: false; readonly error: ErrorData }

/**
 * What a thread says once, when it has started: ready for calls, or failed to start.
 *
 * @since 0.9.0
 * @category models
 */
export type Started = { readonly kind: "ready" } | { readonly kind: "failed"; readonly error: ErrorData }

/**
 * @since 0.9.0
 * @category conversions
 */
export const toErrorData = (error: unknown): ErrorData => {
  if (!(error instanceof Error)) return { name: "Error", message: String(error), stack: undefined, properties: {} }
  const properties: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(error)) {
    // What cannot cross (a statement's options hold functions) stays behind.
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
 * Starts `worker` and waits for its `Started` message: resolves with the worker and a promise
 * of its exit code once it is ready; rejects with its failure (after it has ended) or its
 * early exit.
 *
 * @since 0.9.0
 * @category constructors
 */
export const startThread = (
  worker: Worker,
  describe: string,
  timeoutMs = 5_000
): Promise<{ readonly worker: Worker; readonly exited: Promise<number> }> => {
  const exited = new Promise<number>((resolve) => worker.once("exit", resolve))
  return new Promise((resolve, reject) => {
    let answered = false
    const early = (error: Error) => reject(error)
    worker.once("error", early)
    void exited.then((code) => {
      if (!answered) reject(new Error(`${describe} exited while starting (code ${code})`))
    })
    worker.once("message", (started: Started) => {
      answered = true
      worker.off("error", early)
      if (started.kind === "ready") return resolve({ worker, exited })
      // The thread ends by itself after telling the failure: nothing of it outlives the call.
      // The failure told is the answer; an error the ending thread raises is not thrown here.
      worker.on("error", () => undefined)
      void endThread(worker, exited, timeoutMs).finally(() => reject(fromErrorData(started.error)))
    })
  })
}

/**
 * The caller's side: sends calls, matches the answers to them by id.
 *
 * @since 0.9.0
 * @category models
 */
export class ThreadCalls<Call extends object> {
  readonly #worker: Worker
  readonly #pending = new Map<number, { readonly resolve: (value: unknown) => void; readonly reject: (error: Error) => void }>()
  #nextId = 0
  /** Set once the thread is gone (closed, or died): every call from then on fails with it. */
  #gone: Error | undefined
  readonly #exited: Promise<number>
  #exitCode: number | undefined

  /**
   * `lost` makes the error of the calls once the thread has failed or exited, from a sentence
   * saying how.
   */
  constructor(worker: Worker, exited: Promise<number>, describe: string, lost: (message: string) => Error) {
    this.#worker = worker
    this.#exited = exited
    void exited.then((code) => {
      this.#exitCode = code
    })
    worker.unref()
    worker.on("message", (reply: Reply) => {
      const pending = this.#pending.get(reply.id)
      if (pending === undefined) return
      this.#pending.delete(reply.id)
      if (this.#pending.size === 0) worker.unref()
      if (reply.ok) pending.resolve(reply.value)
      else pending.reject(fromErrorData(reply.error))
    })
    const gone = (error: Error) => {
      this.#gone ??= error
      for (const pending of this.#pending.values()) pending.reject(this.#gone)
      this.#pending.clear()
    }
    worker.on("error", (error) => gone(lost(`${describe} failed: ${error.message}`)))
    worker.on("exit", (code) => gone(lost(`${describe} exited (code ${code})`)))
  }

  /** Whether the thread is gone: closed, failed or exited. */
  get gone(): boolean {
    return this.#gone !== undefined
  }

  /** How the thread ended: its exit code (0 when it ended by itself), or undefined while it runs. */
  get exitCode(): number | undefined {
    return this.#exitCode
  }

  /** Sends one call; resolves with the thread's value, rejects with its error. */
  call<A>(call: Call): Promise<A> {
    if (this.#gone !== undefined) return Promise.reject(this.#gone)
    const id = this.#nextId++
    return new Promise<A>((resolve, reject) => {
      if (this.#pending.size === 0) this.#worker.ref()
      this.#pending.set(id, { resolve: resolve as (value: unknown) => void, reject })
      try {
        this.#worker.postMessage({ ...call, id })
      } catch (error) {
        // A parameter that cannot be cloned: this call fails, the thread goes on.
        this.#pending.delete(id)
        if (this.#pending.size === 0) this.#worker.unref()
        throw error
      }
    })
  }

  /**
   * Sends `closeCall` (it queues behind the calls already sent), refuses every later call with
   * `closed`, and waits for the thread to end by itself, terminating it past `timeoutMs`.
   * Never fails.
   */
  async close(closeCall: Call, closed: Error, timeoutMs: number): Promise<void> {
    if (this.#gone !== undefined) return
    // Past the timeout it is rejected when the thread ends: handled here, not left unhandled.
    this.call(closeCall).catch(() => undefined)
    this.#gone = closed
    await endThread(this.#worker, this.#exited, timeoutMs)
  }
}

/**
 * The thread's side: answers each call with `answer`'s value or error, in the order the
 * answers settle. A value that cannot be cloned fails its call, not the thread. Once a call is
 * answered, `after` may `stop` the answering: with nothing left to wait on, the thread then
 * ends by itself once its last reply is sent.
 *
 * @since 0.9.0
 * @category constructors
 */
export const answerCalls = <Call extends { readonly id: number }>(
  answer: (call: Call) => Promise<unknown>,
  after?: (call: Call, stop: () => void) => void
): void => {
  const port = parentPort!
  const stop = () => {
    port.off("message", onMessage)
    port.unref()
  }
  const onMessage = (call: Call) => {
    const reply = (message: Reply) => {
      try {
        port.postMessage(message)
      } catch (error) {
        // An exception here would be an unhandled rejection, which ends the thread and every
        // call after it.
        port.postMessage({ id: call.id, ok: false, error: toErrorData(error) } satisfies Reply)
      }
    }
    void answer(call).then(
      (value) => reply({ id: call.id, ok: true, value: value ?? null }),
      (error: unknown) => reply({ id: call.id, ok: false, error: toErrorData(error) })
    ).then(() => after?.(call, stop))
  }
  port.on("message", onMessage)
  port.postMessage({ kind: "ready" } satisfies Started)
}
