import { defineConfig } from "vitest/config"
import { testProcess } from "../../vitest.shared.ts"

export default defineConfig({
  test: {
    ...testProcess,
    name: "contracts",
    include: ["test/**/*.test.ts"],
    // Every file starts its own anvil; a transaction round trip at 0.1 s blocks takes ~0.1 s.
    testTimeout: 30_000,
    hookTimeout: 60_000
  }
})
