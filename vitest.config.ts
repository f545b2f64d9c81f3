// Vitest 5 no longer reads a `vitest.workspace.ts` file: the workspace is the
// `test.projects` list, one project per package (each package's own vitest.config.ts).
import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    projects: ["packages/*"],
    // Two test files at a time (Vitest's default is one fewer than the cores: one on these
    // 2-core machines). Most files spend their time waiting on anvil's blocks, child processes
    // and timers, not on the CPU: two at a time took CI from 28 to 22.5 minutes (2026-11-25, 481 tests).
    maxWorkers: 2
  }
})
