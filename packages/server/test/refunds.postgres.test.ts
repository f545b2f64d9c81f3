/** The refunds suite (D43) with the PostgreSQL server as the api server's database: real row locks under the concurrent refunds. */
import { describe } from "@effect/vitest"
import { refundsSuite } from "./suites/refunds.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgres } from "./support/TestServer.ts"

describe.skipIf(!postgresAvailable)("postgres", () => {
  refundsSuite(postgres)
})
