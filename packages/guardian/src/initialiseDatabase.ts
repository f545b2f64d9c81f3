/**
 * `node initialiseDatabase.ts DIRECTORY [PARENT_PID]`: initialises a PGlite cluster in DIRECTORY
 * (initdb) and exits. `EmbeddedDatabase.initialiseApart` runs it as a child process, so that what
 * initdb leaves behind in a process (a throwaway PostgreSQL instance, V8's compiled WebAssembly,
 * glibc's heap grown by both: ~50-100 MB resident in the server and in its guardian) ends with the
 * child instead of staying in the long-lived one. It also ends, unfinished, once PARENT_PID (its
 * parent when it started, by default) is no longer its parent (D91).
 *
 * initdb runs on a worker thread and this file's main thread only watches the parent: PGlite's
 * start holds its thread for seconds at a stretch without a turn of the event loop (one stretch
 * of 3.1 s of wall time on the loaded 2-core VM, 2026-12-02), during which a check on the same
 * thread could not run.
 *
 * @since 0.16.0
 */
import { isMainThread, Worker, workerData } from "node:worker_threads"

/**
 * How often the main thread checks that its parent is alive: a parent killed with SIGKILL has
 * its child end within about this instead of running initdb to its end (seconds of CPU) for no
 * one.
 */
const parentCheckIntervalMs = 250

/**
 * Exits once the process `parentPid` is no longer this one's parent. A parent killed with
 * SIGKILL cannot kill its child, and Linux gives the orphan another parent (init, or the nearest
 * subreaper): `process.ppid` (read anew on each access) changes. Polled, since `execFile` starts
 * the child with no IPC channel whose disconnect it could hear. The pid is passed by the parent, not
 * read here, so that a parent killed before this module ran is noticed too. The kill ends the
 * initdb thread with the process. What the child leaves beside the data directory the next start
 * removes. The timer never keeps the child alive once initdb is done.
 */
const exitWithParent = (parentPid: number): void => {
  const checkParent = (): void => {
    // SIGKILL, not `process.exit`: an exit waits for the initdb thread to stop, and a thread inside
    // one of PGlite's long native calls stops only when the call returns (2.3 s once under load).
    if (process.ppid !== parentPid) process.kill(process.pid, "SIGKILL")
  }
  checkParent()
  setInterval(checkParent, parentCheckIntervalMs).unref()
}

/**
 * Runs initdb on `directory` in a worker thread (this file again) and settles when the thread
 * ends: its failure is written to stderr, where the parent reads it, with exit status 1.
 */
const initialiseOnThread = (directory: string): Promise<void> =>
  new Promise((resolve) => {
    const thread = new Worker(new URL(import.meta.url), { workerData: directory })
    thread.once("error", (error) => {
      process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
      process.exitCode = 1
    })
    thread.once("exit", (code) => {
      if (code !== 0) process.exitCode = 1
      resolve()
    })
  })

if (!isMainThread) {
  // The initdb thread: EmbeddedDatabase (and PGlite with it) is loaded here, not on the main thread.
  if (typeof workerData !== "string") throw new Error("initialiseDatabase.ts: the thread is given its directory")
  const { initialiseTemplate } = await import("./EmbeddedDatabase.ts")
  await initialiseTemplate(workerData)
} else {
  const directory = process.argv[2]
  const parentPid = process.argv[3] === undefined ? process.ppid : Number(process.argv[3])
  if (directory === undefined || directory === "" || !Number.isSafeInteger(parentPid) || parentPid <= 0) {
    process.stderr.write("usage: node initialiseDatabase.ts DIRECTORY [PARENT_PID]\n")
    process.exitCode = 2
  } else {
    exitWithParent(parentPid)
    await initialiseOnThread(directory)
  }
}
