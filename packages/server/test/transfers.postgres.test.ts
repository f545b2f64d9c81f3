/**
 * The transfers suite with the PostgreSQL server as the api server's database, and the plain
 * form's boxes sealed on a thread of their own (`SEALING_THREAD=own`; the PGlite run seals on the
 * event loop, the default).
 */
import { describe } from "@effect/vitest"
import { transfersSuite } from "./suites/transfers.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { postgres } from "./support/TestServer.ts"

describe.skipIf(!postgresAvailable)("postgres", () => {
  transfersSuite(postgres, { sealingThread: "own" })
})
