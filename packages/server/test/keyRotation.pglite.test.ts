/** Encryption key rotation and recovery (D55) on embedded PGlite. */
import { keyRotationSuite } from "./suites/keyRotation.ts"
import { pglite } from "./support/TestServer.ts"

keyRotationSuite(pglite)
