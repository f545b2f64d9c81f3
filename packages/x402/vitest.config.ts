import { defineConfig } from "vitest/config"
import { testProcess } from "../../vitest.shared.ts"

export default defineConfig({
  test: {
    ...testProcess,
    name: "x402",
    include: ["test/**/*.test.ts"]
  }
})
