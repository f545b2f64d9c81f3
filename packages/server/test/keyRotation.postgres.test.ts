/** Encryption key rotation and recovery (D55) on the PostgreSQL server. */
import { describe } from "@effect/vitest"
import { keyRotationSuite } from "./suites/keyRotation.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgres } from "./support/TestServer.ts"

describe.skipIf(!postgresAvailable)("postgres", () => {
  keyRotationSuite(postgres)
})
