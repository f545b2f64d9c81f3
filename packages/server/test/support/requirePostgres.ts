/**
 * Whether the PostgreSQL suites run: they need the server on this machine
 * (127.0.0.1:5432). `.ci/run` starts it and sets PPS_REQUIRE_POSTGRES=1, so in CI
 * an unreachable server fails the run instead of skipping; locally a missing
 * server skips the suites with a visible warning.
 */
import { isPostgresReachable, postgresAdminUrl } from "./TestServer.ts"

export const postgresAvailable = await isPostgresReachable()

if (!postgresAvailable) {
  if (process.env["PPS_REQUIRE_POSTGRES"] === "1") {
    throw new Error(`PostgreSQL is required (PPS_REQUIRE_POSTGRES=1) but ${postgresAdminUrl} does not answer`)
  }
  console.warn(`\n*** PostgreSQL at ${postgresAdminUrl} does not answer: SKIPPING the PostgreSQL suites ***\n`)
}
