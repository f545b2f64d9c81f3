/**
 * docs/benchmarks.md's current tables and history are generated from docs/benchmarks/results.jsonl
 * (scripts/benchmarksTable.ts): a result recorded without `npm run -s bench:table`, or a generated
 * part edited by hand, fails here.
 */
import * as fs from "node:fs"
import { assert, describe, it } from "@effect/vitest"
import { resultsFile } from "../../../scripts/benchRecord.ts"
import { documentFile, readRecords, rewriteDocument } from "../../../scripts/benchmarksTable.ts"

describe("benchmarks docs", () => {
  it("the generated parts of docs/benchmarks.md are what results.jsonl gives (npm run -s bench:table)", () => {
    const document = fs.readFileSync(documentFile, "utf8")
    assert.strictEqual(document, rewriteDocument(document, readRecords()))
  })

  it("a record not yet rendered changes the document, so the check above can fail", () => {
    const document = fs.readFileSync(documentFile, "utf8")
    const records = readRecords()
    const latest = records.at(-1)
    assert.isDefined(latest)
    const added = { ...latest!, date: "2099-01-01T00:00:00.000Z", value: latest!.value + 1 }
    assert.notStrictEqual(rewriteDocument(document, [...records, added]), document)
  })

  it("every record names its benchmark, metric, unit, command, commit, date and machine", () => {
    const lines = fs.readFileSync(resultsFile, "utf8").split("\n").filter((line) => line.trim() !== "")
    assert.strictEqual(readRecords().length, lines.length)
    assert.isAbove(lines.length, 0)
  })

  it("a document without the markers is refused rather than rewritten", () => {
    assert.throws(() => rewriteDocument("# Benchmarks\n", readRecords()), /benchmarks:current:start/)
  })
})
