/** The operator's console suite on the PostgreSQL server. */
import { describe } from "@effect/vitest"
import { consoleSuite } from "./suites/console.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgres } from "./support/TestServer.ts"

describe.skipIf(!postgresAvailable)("postgres", () => {
  consoleSuite(postgres)
})
