/**
 * `node initialiseDatabase.ts DIRECTORY [PARENT_PID]`: initialises a PGlite cluster in DIRECTORY
 * (initdb) and exits. `EmbeddedDatabase.initialiseApart` runs it as a child process, so that what
 * initdb leaves behind in a process (a throwaway PostgreSQL instance, V8's compiled WebAssembly,
 * glibc's heap grown by both: ~50-100 MB resident in the server and in its guardian) ends with the
 * child instead of staying in the long-lived one. It also ends, unfinished, once PARENT_PID (its
 * parent when it started, by default) is no longer its parent (D91).
 *
 * @since 0.16.0
 */
import { initialiseTemplate } from "./EmbeddedDatabase.ts"

/**
 * How often the child checks that its parent is alive: a parent killed with SIGKILL has its child
 * end within about this (and initdb's longest stretch without a turn of the event loop, ~0.3 s on
 * the 2-core VM) instead of running initdb to its end (seconds of CPU) for no one.
 */
const parentCheckIntervalMs = 250

/**
 * Exits once the process `parentPid` is no longer this one's parent. A parent killed with
 * SIGKILL cannot kill its child, and Linux gives the orphan another parent (init, or the nearest
 * subreaper): `process.ppid` (read anew on each access) changes. Polled, since `execFile` starts
 * the child with no IPC channel whose disconnect it could hear. The pid is passed by the parent, not
 * read here, so that a parent killed before this module ran (loading PGlite takes a while) is
 * noticed too. What the child leaves beside the data directory the next start removes. The timer
 * never keeps the child alive once initdb is done.
 */
const exitWithParent = (parentPid: number): void => {
  const checkParent = (): void => {
    if (process.ppid !== parentPid) process.exit(1)
  }
  checkParent()
  setInterval(checkParent, parentCheckIntervalMs).unref()
}

const directory = process.argv[2]
const parentPid = process.argv[3] === undefined ? process.ppid : Number(process.argv[3])
if (directory === undefined || directory === "" || !Number.isSafeInteger(parentPid) || parentPid <= 0) {
  process.stderr.write("usage: node initialiseDatabase.ts DIRECTORY [PARENT_PID]\n")
  process.exitCode = 2
} else {
  exitWithParent(parentPid)
  await initialiseTemplate(directory)
}
