/** The guardian suite against the embedded deployment: in process, PGlite. */
import { guardianSuite } from "./suites/guardian.ts"

guardianSuite("in-process/pglite")
