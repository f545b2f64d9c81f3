/**
 * bench:spans' arithmetic (bench/spanSummary.ts): stages of the traces that hold the anchor
 * span, timed from each trace's first span, across the processes' files.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { readSpans, stages, table } from "../bench/spanSummary.ts"

const ms = 1_000_000n
const line = (name: string, trace: string, span: string, parent: string, startMs: bigint, endMs: bigint) =>
  `${name}\t${trace}\t${span}\t${parent}\t${1_700_000_000_000n * ms + startMs * ms}\t${1_700_000_000_000n * ms + endMs * ms}\tSuccess\n`

describe("span summary", () => {
  it("times each stage of the anchored traces from the trace's first span, joined across processes", () => {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), "pps-spansummary-"))
    try {
      // Two creates (t1 at 0 ms, t2 at 1,000 ms) and a trace without the anchor, which is left out.
      fs.writeFileSync(path.join(directory, "server-11.spans"), [
        line("POST", "t1", "a", "", 0n, 100n),
        line("Transfers.create", "t1", "b", "a", 2n, 98n),
        line("postgresql", "t1", "c", "b", 10n, 12n),
        line("postgresql", "t1", "d", "b", 50n, 54n),
        line("POST", "t2", "e", "", 1_000n, 1_200n),
        line("Transfers.create", "t2", "f", "e", 1_004n, 1_190n),
        line("GET", "t3", "g", "", 5n, 6n),
        "a torn line\n"
      ].join(""))
      fs.writeFileSync(path.join(directory, "guardian-12.spans"), [
        line("Guardian.authorize", "t1", "h", "b", 20n, 30n),
        line("Guardian.authorize", "t2", "i", "f", 1_040n, 1_070n)
      ].join(""))
      const { rows, traces } = stages(readSpans(directory), "Transfers.create")
      assert.strictEqual(traces, 2)
      assert.deepStrictEqual(rows.map((row) => row.stage), ["server POST", "server Transfers.create", "guardian Guardian.authorize", "server postgresql"])
      const byStage = Object.fromEntries(rows.map((row) => [row.stage, row]))
      assert.strictEqual(byStage["server postgresql"]!.perTrace, 1)
      assert.strictEqual(byStage["server Transfers.create"]!.durationP99Ms, 186)
      assert.strictEqual(byStage["guardian Guardian.authorize"]!.durationP50Ms, 30)
      assert.strictEqual(byStage["guardian Guardian.authorize"]!.startP50Ms, 40)
      assert.include(table(rows), "| guardian Guardian.authorize | 1.00 | 40.0 | 30.0 / 30.0 |")
    } finally {
      fs.rmSync(directory, { recursive: true, force: true })
    }
  })
})
