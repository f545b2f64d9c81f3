import { defineConfig } from "vitest/config"
import { testProcess } from "../../vitest.shared.ts"

export default defineConfig({
  test: {
    ...testProcess,
    name: "x402",
    include: ["test/**/*.test.ts"],
    // One initialised PGlite cluster for the run, copied by every server started.
    globalSetup: ["../../scripts/pgliteTemplate.ts"]
  }
})
