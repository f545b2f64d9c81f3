/**
 * `node initialiseApartParent.ts DATA_DIR`: a process that initialises DATA_DIR as a first start
 * does (`initialiseApart`: initdb in a child process of its own), for a test to kill midway.
 */
import { Effect } from "effect"
import { initialiseApart } from "../../src/EmbeddedDatabase.ts"

const dataDir = process.argv[2]
if (dataDir === undefined) {
  process.stderr.write("usage: node initialiseApartParent.ts DATA_DIR\n")
  process.exitCode = 2
} else {
  await Effect.runPromise(initialiseApart(dataDir))
}
