/**
 * `node initialiseDatabase.ts DIRECTORY`: initialises a PGlite cluster in DIRECTORY (initdb) and
 * exits. `EmbeddedDatabase.initialiseApart` runs it as a child process, so that what initdb
 * leaves behind in a process (a throwaway PostgreSQL instance, V8's compiled WebAssembly, glibc's
 * heap grown by both: ~50-100 MB resident in the server and in its guardian) ends with the child
 * instead of staying in the long-lived one.
 *
 * @since 0.16.0
 */
import { initialiseTemplate } from "./EmbeddedDatabase.ts"

const directory = process.argv[2]
if (directory === undefined || directory === "") {
  process.stderr.write("usage: node initialiseDatabase.ts DIRECTORY\n")
  process.exitCode = 2
} else {
  await initialiseTemplate(directory)
}
