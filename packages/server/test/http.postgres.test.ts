/** The public API suite on the PostgreSQL server (distributed mode's database). */
import { describe } from "@effect/vitest"
import { publicApiSuite } from "./suites/publicApi.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgres } from "./support/TestServer.ts"

describe.skipIf(!postgresAvailable)("postgres", () => {
  publicApiSuite(postgres)
})
