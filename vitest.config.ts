// Vitest 5 no longer reads a `vitest.workspace.ts` file: the workspace is the
// `test.projects` list, one project per package (each package's own vitest.config.ts).
import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    projects: ["packages/*"]
  }
})
