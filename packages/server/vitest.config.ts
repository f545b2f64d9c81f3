import { defineConfig } from "vitest/config"
import { testProcess } from "../../vitest.shared.ts"

export default defineConfig({
  test: {
    ...testProcess,
    name: "server",
    include: ["test/**/*.test.ts"],
    // One initialised PGlite cluster for the run, copied by every server and guardian started.
    globalSetup: ["../../scripts/pgliteTemplate.ts"],
    // PGlite takes seconds to start (WASM); servers are started once per file.
    testTimeout: 60_000,
    hookTimeout: 120_000
  }
})
