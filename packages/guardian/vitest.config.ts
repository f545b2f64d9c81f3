import { defineConfig } from "vitest/config"
import { testProcess } from "../../vitest.shared.ts"

export default defineConfig({
  test: {
    ...testProcess,
    name: "guardian",
    include: ["test/**/*.test.ts"],
    // One initialised PGlite cluster for the run, copied by every server and guardian started.
    globalSetup: ["../../scripts/pgliteTemplate.ts"],
    // PGlite takes seconds to start (WASM); guardians are started once per file.
    testTimeout: 60_000,
    hookTimeout: 120_000
  }
})
