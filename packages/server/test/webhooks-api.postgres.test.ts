/** Events and webhooks through the whole server, on the PostgreSQL server. */
import { describe } from "@effect/vitest"
import { webhooksApiSuite } from "./suites/webhooks-api.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgres } from "./support/TestServer.ts"

describe.skipIf(!postgresAvailable)("postgres", () => {
  webhooksApiSuite(postgres)
})
