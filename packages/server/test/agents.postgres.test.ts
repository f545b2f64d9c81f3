/** The agents suite with the PostgreSQL server as the api server's database. */
import { describe } from "@effect/vitest"
import { agentsSuite } from "./suites/agents.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgres } from "./support/TestServer.ts"

describe.skipIf(!postgresAvailable)("postgres", () => {
  agentsSuite(postgres)
})
