/** The agents suite on embedded PGlite. */
import { agentsSuite } from "./suites/agents.ts"
import { pglite } from "./support/TestServer.ts"

agentsSuite(pglite)
