/** WALLET_KEK rotation and backup (D54) on the PostgreSQL server: the configured flow. */
import { describe } from "@effect/vitest"
import { walletKekSuite } from "./suites/walletKek.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgres } from "./support/TestServer.ts"

describe.skipIf(!postgresAvailable)("postgres", () => {
  walletKekSuite(postgres)
})
