/** The transfers suite with the PostgreSQL server as the api server's database. */
import { describe } from "@effect/vitest"
import { transfersSuite } from "./suites/transfers.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgres } from "./support/TestServer.ts"

describe.skipIf(!postgresAvailable)("postgres", () => {
  transfersSuite(postgres)
})
