import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    name: "guardian",
    include: ["test/**/*.test.ts"],
    // PGlite takes seconds to start (WASM); guardians are started once per file.
    testTimeout: 60_000,
    hookTimeout: 120_000
  }
})
