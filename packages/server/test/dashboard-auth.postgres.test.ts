/** The dashboard's sign-in and session rules on the PostgreSQL server (distributed mode's database). */
import { describe } from "@effect/vitest"
import { dashboardAuthSuite } from "./suites/dashboardAuth.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgres } from "./support/TestServer.ts"

describe.skipIf(!postgresAvailable)("postgres", () => {
  dashboardAuthSuite(postgres)
})
