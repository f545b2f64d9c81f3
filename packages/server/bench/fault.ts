/**
 * `npm run -s fault -- --seed 42 --kills 5 --clients 4 --accounts 6 --duration 60000`:
 * the fault-injection harness (test/fault/harness.ts) as a command. It prints its
 * seed and kill schedule first (a failing seed replays the same schedule), then a
 * summary, and exits 1 when any invariant is broken. Without --seed it draws one
 * from the clock and prints it: the only unseeded choice, made once, in the open. Its counts are
 * appended to docs/benchmarks/results.jsonl (scripts/benchRecord.ts) unless `--no-record`.
 */
import { parseArgs } from "node:util"
import { formatReport, runHarness } from "../test/fault/harness.ts"
import { recordOption, recordResults } from "../../../scripts/benchRecord.ts"

const { values } = parseArgs({
  options: {
    seed: { type: "string" },
    kills: { type: "string", default: "3" },
    clients: { type: "string", default: "4" },
    accounts: { type: "string", default: "6" },
    duration: { type: "string", default: "60000" },
    "no-webhooks": { type: "boolean", default: false },
    "kill-guardian": { type: "boolean", default: false },
    keep: { type: "boolean", default: false },
    ...recordOption
  }
})

const integer = (name: string, text: string | undefined, min: number): number => {
  const value = Number(text)
  if (!Number.isSafeInteger(value) || value < min) {
    process.stderr.write(`fault: --${name} must be an integer >= ${min}, got ${text}\n`)
    process.exit(2)
  }
  return value
}

const seed = values.seed === undefined ? Date.now() % 2 ** 31 : integer("seed", values.seed, 0)
const report = await runHarness({
  seed,
  kills: integer("kills", values.kills, 0),
  clients: integer("clients", values.clients, 1),
  accounts: integer("accounts", values.accounts, 2),
  durationMs: integer("duration", values.duration, 1_000),
  webhooks: !values["no-webhooks"],
  killGuardian: values["kill-guardian"],
  keep: values.keep,
  log: (line) => process.stdout.write(`${new Date().toISOString()} ${line}\n`)
})
process.stdout.write(`\n${formatReport(report)}\n`)
for (const violation of report.violations) process.stdout.write(`  ${violation.invariant}: ${violation.detail}\n`)
// The invariants' counts are held to zero: any other value is a broken run, recorded as such.
recordResults("fault", [
  { metric: "invariant violations", value: report.violations.length, unit: "violations", goal: "<= 0", headline: true },
  { metric: "duplicates found", value: report.duplicates, unit: "transfers", goal: "<= 0" },
  { metric: "stuck transfers", value: report.stuck, unit: "transfers", goal: "<= 0" },
  { metric: "balance mismatches", value: report.balanceMismatches, unit: "accounts", goal: "<= 0" },
  { metric: "kills", value: report.kills, unit: "kills", headline: true },
  { metric: "transfers confirmed", value: report.transfersConfirmed, unit: "transfers", headline: true },
  { metric: "slowest restart", value: Math.max(0, ...report.restartMs), unit: "ms" }
])
process.exitCode = report.violations.length === 0 ? 0 : 1
