/** The admin suite on embedded PGlite. */
import { adminSuite } from "./suites/admin.ts"
import { pglite } from "./support/TestServer.ts"

adminSuite(pglite)
