/** The admin suite on the PostgreSQL server. */
import { describe } from "@effect/vitest"
import { adminSuite } from "./suites/admin.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgres } from "./support/TestServer.ts"

describe.skipIf(!postgresAvailable)("postgres", () => {
  adminSuite(postgres)
})
