/**
 * The fault harness's short run, in `npm test`: the real server process killed
 * with SIGKILL twice under transfer load and restarted on its data directory;
 * every invariant of harness.ts must hold. Counts are small so that it stays
 * well under three minutes on a loaded 2-core machine; long runs use the
 * command (`npm run -s fault`, flags in docs/reliability.md). FAULT_SEED
 * replays a seed that failed here.
 */
import { assert, describe, it } from "@effect/vitest"
import { formatReport, runHarness } from "./harness.ts"

const seed = Number(process.env["FAULT_SEED"] ?? "20261122")

describe("fault harness (short run)", () => {
  it(`two SIGKILLs under load leave every invariant intact (seed ${seed})`, { timeout: 300_000 }, async () => {
    const lines: Array<string> = []
    const report = await runHarness({
      seed,
      kills: 2,
      clients: 3,
      accounts: 4,
      durationMs: 15_000,
      webhooks: true,
      keep: false,
      log: (line) => lines.push(line)
    })
    const summary = `${lines.join("\n")}\n${formatReport(report)}`
    // The figures of every run, passing or not, in the test output.
    console.log(summary)
    assert.strictEqual(report.kills, 2, summary)
    assert.isAbove(report.requests, 0, summary)
    assert.deepStrictEqual(report.violations, [], summary)
  })
})
