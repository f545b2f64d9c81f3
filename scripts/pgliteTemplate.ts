/**
 * One initialised PGlite cluster for a whole test run: the projects' global setup makes it once
 * (initdb, ~2.4 s of CPU on the 2-core VM) and names it in `EMBEDDED_DATABASE_TEMPLATE`, which
 * the test processes inherit; every server and guardian a test starts in a fresh directory
 * (in process through `testConfig`, or as a child process through `childEnvironment`) copies
 * it instead of initialising its own (`EmbeddedDatabase.seedFromTemplate`). A suite starts a
 * hundred-odd of them. What each finds is what its own initdb would have made.
 *
 * The first project's setup makes it; the others find it named and use it; the setup that made
 * it removes it when the run ends. A template named from outside (the variable set before the
 * run) is used as it is and left in place.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { initialiseTemplate } from "../packages/guardian/src/EmbeddedDatabase.ts"

/** The variable the server and the guardian read (docs/operations.md). */
export const templateVariable = "EMBEDDED_DATABASE_TEMPLATE"

/** The run's template, or undefined outside a run that made one. */
export const pgliteTemplate = (): string | undefined => process.env[templateVariable] || undefined

/** Vitest's global setup: makes the template unless one is named, and returns its teardown. */
export default async function setup(): Promise<() => void> {
  const named = process.env[templateVariable]
  if (named !== undefined && named !== "" && fs.existsSync(path.join(named, "PG_VERSION"))) return () => {}
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "pps-pglite-template-"))
  await initialiseTemplate(directory)
  process.env[templateVariable] = directory
  return () => {
    fs.rmSync(directory, { recursive: true, force: true })
    if (process.env[templateVariable] === directory) delete process.env[templateVariable]
  }
}
