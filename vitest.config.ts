// Vitest 5 no longer reads a `vitest.workspace.ts` file: the workspace is the
// `test.projects` list, one project per package (each package's own vitest.config.ts).
//
// How many test files run at once is set where the whole suite is run (scripts/test.sh,
// `--maxWorkers`), not here: a project loaded from its own config file does not inherit the
// root's `maxWorkers`, so a value here left every project at Vitest's default (one fewer than
// the cores: one file at a time on these 2-core machines).
import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    projects: ["packages/*"]
  }
})
