/** Owner-issued agent keys and an agent's reads of itself (D42, D44) on embedded PGlite. */
import { agentKeysSuite } from "./suites/agentKeys.ts"
import { pglite } from "./support/TestServer.ts"

agentKeysSuite(pglite)
