/**
 * A Vitest reporter for the end of a whole-suite run (scripts/test.sh): the slowest test files,
 * each with all the time it held a worker, not only its tests' time: starting the environment
 * and the runner, importing the file and what it imports, and its tests and hooks (a server
 * started in `beforeAll` counts). That sum is what `--maxWorkers` divides, so the list is where
 * the suite's time goes. Ends with the sum over every file and the run's wall time.
 */
import * as path from "node:path"
import type { Reporter, TestModule } from "vitest/node"

/** How many files are listed. */
const shown = 15

const seconds = (ms: number): string => (ms / 1000).toFixed(1).padStart(6)

/** All of a file's time in a worker, and its parts. */
const timesOf = (module: TestModule) => {
  const d = module.diagnostic()
  const setupMs = d.environmentSetupDuration + d.prepareDuration + d.setupDuration
  return { name: path.relative(process.cwd(), module.moduleId), totalMs: setupMs + d.collectDuration + d.duration, setupMs, importMs: d.collectDuration, testsMs: d.duration }
}

export default class SlowestFiles implements Reporter {
  #startedMs = Date.now()

  onTestRunStart() {
    this.#startedMs = Date.now()
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>) {
    const files = testModules.map(timesOf).sort((a, b) => b.totalMs - a.totalMs)
    const lines = [`Slowest test files (seconds in a worker: all = setup + import + tests and hooks):`]
    for (const file of files.slice(0, shown)) {
      lines.push(`  ${seconds(file.totalMs)} = ${seconds(file.setupMs)} + ${seconds(file.importMs)} + ${seconds(file.testsMs)}  ${file.name}`)
    }
    const sumMs = files.reduce((sum, file) => sum + file.totalMs, 0)
    lines.push(`All ${files.length} files: ${(sumMs / 1000).toFixed(0)} s in workers; the run took ${((Date.now() - this.#startedMs) / 1000).toFixed(0)} s`)
    process.stdout.write(`${lines.join("\n")}\n`)
  }
}
