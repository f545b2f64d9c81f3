/** The refunds suite (D43) on embedded PGlite. */
import { refundsSuite } from "./suites/refunds.ts"
import { pglite } from "./support/TestServer.ts"

refundsSuite(pglite)
