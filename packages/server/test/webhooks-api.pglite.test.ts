/** Events and webhooks through the whole server, on embedded PGlite. */
import { webhooksApiSuite } from "./suites/webhooks-api.ts"
import { pglite } from "./support/TestServer.ts"

webhooksApiSuite(pglite)
