/** The operator's console suite on embedded PGlite. */
import { consoleSuite } from "./suites/console.ts"
import { pglite } from "./support/TestServer.ts"

consoleSuite(pglite)
