/** The guardian suite against the distributed deployment: over HTTP, PostgreSQL. */
import { describe } from "@effect/vitest"
import { guardianSuite } from "./suites/guardian.ts"
import { postgresAvailable } from "./support/postgres.ts"

describe.skipIf(!postgresAvailable)("postgres", () => {
  guardianSuite("http/postgres")
})
