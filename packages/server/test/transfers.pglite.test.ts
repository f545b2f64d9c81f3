/** The transfers suite on embedded PGlite. */
import { transfersSuite } from "./suites/transfers.ts"
import { pglite } from "./support/TestServer.ts"

transfersSuite(pglite)
