/** The dashboard's sign-in and session rules on embedded PGlite. */
import { dashboardAuthSuite } from "./suites/dashboardAuth.ts"
import { pglite } from "./support/TestServer.ts"

dashboardAuthSuite(pglite)
