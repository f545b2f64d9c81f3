/** The public API suite on embedded PGlite. */
import { publicApiSuite } from "./suites/publicApi.ts"
import { pglite } from "./support/TestServer.ts"

publicApiSuite(pglite)
