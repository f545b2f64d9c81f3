/** Owner-issued agent keys and an agent's reads of itself (D42, D44) with the PostgreSQL server as the api server's database. */
import { describe } from "@effect/vitest"
import { agentKeysSuite } from "./suites/agentKeys.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgres } from "./support/TestServer.ts"

describe.skipIf(!postgresAvailable)("postgres", () => {
  agentKeysSuite(postgres)
})
