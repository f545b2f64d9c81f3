import { defineConfig } from "vitest/config"
import { testProcess } from "../../vitest.shared.ts"

export default defineConfig({
  test: {
    ...testProcess,
    name: "crypto",
    include: ["test/**/*.test.ts"],
    // Property tests on the noble backend run a few hundred 3 ms multiplications.
    testTimeout: 30_000
  }
})
