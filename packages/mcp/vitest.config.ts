import { defineConfig } from "vitest/config"
import { testProcess } from "../../vitest.shared.ts"

export default defineConfig({
  test: {
    ...testProcess,
    name: "mcp",
    include: ["test/**/*.test.ts"]
  }
})
