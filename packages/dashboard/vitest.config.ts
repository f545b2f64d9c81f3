import { defineConfig } from "vitest/config"
import { testProcess } from "../../vitest.shared.ts"

export default defineConfig({
  test: {
    ...testProcess,
    name: "dashboard",
    include: ["test/**/*.test.ts"],
    // The page is built from source before its tests, so they never run a stale or hand-made build;
    // one initialised PGlite cluster for the run, copied by every server started.
    globalSetup: ["test/support/build.ts", "../../scripts/pgliteTemplate.ts"],
    // A real server (PGlite, anvil, guardian) and a real browser on a shared 2-core machine.
    testTimeout: 240_000,
    hookTimeout: 180_000
  }
})
