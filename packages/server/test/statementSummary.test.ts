/**
 * The statement logs' arithmetic (bench/statementSummary.ts): two readings of each process's
 * totals become calls, milliseconds and prepares per transfer of the window between them, and the
 * table folds a batch's sizes (texts that differ only past the shown length) into one row that
 * counts its texts. A log written before prepares were counted reads as none prepared.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { perTransfer, readStatements, statementTable } from "../bench/statementSummary.ts"

const long = (size: number) => `INSERT INTO guardian_reservations (transfer_id, chain_id, contract, from_account, to_account) VALUES ${"($1),".repeat(size)}`

describe("statement summary", () => {
  it("gives each process's calls and ms per transfer between two readings, dearest first", () => {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), "pps-statementsummary-"))
    const writeReading = (server: Array<[string, number, number, number?]>, guardian: Array<[string, number, number, number?]>) => {
      fs.writeFileSync(path.join(directory, "server-11.statements"), JSON.stringify(server))
      fs.writeFileSync(path.join(directory, "guardian-12.statements"), JSON.stringify(guardian))
      return readStatements(directory)
    }
    const before = writeReading([["BEGIN", 10, 1]], [[long(1), 4, 2]])
    const after = writeReading([["BEGIN", 30, 5, 1], ["COMMIT", 20, 2, 1]], [[long(1), 14, 7, 2], [long(2), 10, 3, 5]])
    const rows = perTransfer(before, after, 10)
    assert.deepStrictEqual(rows.map((row) => [row.process, row.text, row.callsPerTransfer, row.msPerTransfer, row.preparesPerTransfer]), [
      ["guardian", long(1), 1, 0.5, 0.2],
      ["server", "BEGIN", 2, 0.4, 0.1],
      ["guardian", long(2), 1, 0.3, 0.5],
      ["server", "COMMIT", 2, 0.2, 0.1]
    ])
    const table = statementTable(rows)
    assert.include(table, "| guardian | **all** | **2.00** | **0.700** | **2** | **0.800** |")
    assert.include(table, "| server | **all** | **4.00** | **0.200** | **2** | **0.600** |")
    assert.include(table, "| 2.000 | 0.700 | 2 | 0.800 |")
    // The two sizes of the batched INSERT are one row of the table.
    assert.strictEqual(table.split("\n").filter((line) => line.includes("INSERT INTO guardian_reservations")).length, 1)
    fs.rmSync(directory, { recursive: true, force: true })
  })
})
