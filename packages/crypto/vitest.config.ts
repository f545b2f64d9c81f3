import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    name: "crypto",
    include: ["test/**/*.test.ts"],
    // Property tests on the noble backend run a few hundred 3 ms multiplications.
    testTimeout: 30_000
  }
})
