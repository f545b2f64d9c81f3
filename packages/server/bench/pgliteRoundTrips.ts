/**
 * What a PGlite statement costs, and what it is that costs (docs/benchmarks.md). The throughput
 * benchmark's profile puts PGlite at about half of the server's CPU per transfer, and
 * `bench:statements` counts ~60 statements per transfer (server and guardian); this
 * benchmark says whether the lever is fewer statements, fewer transactions or fewer
 * round trips into PGlite, by timing the same work shaped each way on one PGlite in a
 * fresh directory (on disk, as the embedded default runs it).
 *
 * Each row: CPU (user + system of this process) per operation, over `--operations`
 * operations after a warm-up of a tenth as many. One process, one run, so the rows
 * compare with each other; absolute figures move with the machine's load.
 *
 * The shapes that go through `query` run twice: on PGlite's own `query` (six calls into PGlite
 * per statement, parsed and planned every time) and on the embedded database the service runs
 * (`PreparedStatementPGlite`: prepared once per text, then one call per execution).
 *
 * Run: `npm run -s bench:pglite -- [--operations 3000] [--no-record]` (the figures are appended to
 * docs/benchmarks/results.jsonl: scripts/benchRecord.ts).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { parseArgs } from "node:util"
import { PGlite } from "@electric-sql/pglite"
import { EmbeddedDatabase } from "@pps/guardian"
import { recordOption, recordResults } from "../../../scripts/benchRecord.ts"

const { values } = parseArgs({ options: { operations: { type: "string", default: "3000" }, ...recordOption } })
const operationsCount = Number(values.operations)
if (!Number.isSafeInteger(operationsCount) || operationsCount < 100) {
  process.stderr.write(`pglite: --operations must be a whole number >= 100, got ${values.operations}\n`)
  process.exit(2)
}

const directory = fs.mkdtempSync(path.join(os.tmpdir(), "pps-pglite-bench-"))
const plain = new PGlite(path.join(directory, "pglite"))
const prepared = new EmbeddedDatabase.PreparedStatementPGlite(path.join(directory, "pglite-prepared"))
const schema = `
  CREATE TABLE rows_a (id bigint PRIMARY KEY, payload text NOT NULL);
  CREATE TABLE rows_b (id bigint PRIMARY KEY, payload text NOT NULL);
  CREATE TABLE counters (id int PRIMARY KEY, value bigint NOT NULL);
  INSERT INTO counters VALUES (1, 0);
`
for (const db of [plain, prepared]) {
  await db.waitReady
  await db.exec(schema)
}

/** A fresh key for every insert, across all rows and their warm-ups. */
let nextId = 0
const payload = "x".repeat(200)

/** CPU ms per call of `operation`, after a warm-up. */
const cpuMsPer = async (operation: () => Promise<unknown>): Promise<number> => {
  for (let i = 0; i < operationsCount / 10; i++) await operation()
  const before = process.cpuUsage()
  for (let i = 0; i < operationsCount; i++) await operation()
  const used = process.cpuUsage(before)
  return (used.user + used.system) / 1000 / operationsCount
}

const rows: Array<{ readonly shape: string; readonly roundTrips: number; readonly statements: number; readonly cpuMs: number }> = []

/** Every shape, in order, on one database; `via` names how `query` runs. Exec shapes only on PGlite's own. */
const measureAll = async (db: PGlite, via: string) => {
  const measure = async (shape: string, roundTrips: number, statements: number, operation: () => Promise<unknown>) => {
    rows.push({ shape: `${shape}${via}`, roundTrips, statements, cpuMs: await cpuMsPer(operation) })
  }
  const execShape = async (shape: string, operation: () => Promise<unknown>) => {
    if (db === plain) await measure(shape, 1, shape.startsWith("5") ? 5 : 1, operation)
  }
  await measure("1 parameterized SELECT by primary key (query)", 1, 1, () => db.query("SELECT payload FROM rows_a WHERE id = $1", [1]))
  await execShape("1 SELECT without parameters (exec: simple protocol)", () => db.exec("SELECT 1"))
  await execShape("5 SELECTs in one exec (one round trip)", () => db.exec("SELECT 1; SELECT 2; SELECT 3; SELECT 4; SELECT 5"))
  await measure("1 INSERT, autocommit", 1, 1, () => db.query("INSERT INTO rows_a VALUES ($1, $2)", [nextId++, payload]))
  await measure("BEGIN, 1 INSERT, COMMIT (3 queries)", 3, 3, async () => {
    await db.query("BEGIN")
    await db.query("INSERT INTO rows_a VALUES ($1, $2)", [nextId++, payload])
    await db.query("COMMIT")
  })
  await measure("BEGIN, 2 INSERTs, 1 UPDATE, COMMIT (5 queries)", 5, 5, async () => {
    await db.query("BEGIN")
    await db.query("INSERT INTO rows_a VALUES ($1, $2)", [nextId++, payload])
    await db.query("INSERT INTO rows_b VALUES ($1, $2)", [nextId++, payload])
    await db.query("UPDATE counters SET value = value + 1 WHERE id = $1", [1])
    await db.query("COMMIT")
  })
  await measure("the same 3 writes as one statement (data-modifying CTEs, autocommit)", 1, 1, () =>
    db.query(
      `WITH a AS (INSERT INTO rows_a VALUES ($1, $3)), b AS (INSERT INTO rows_b VALUES ($2, $3))
       UPDATE counters SET value = value + 1 WHERE id = 1`,
      [nextId++, nextId++, payload]
    ))
}
/** Both databases, twice: the first pass (the JIT's and PGlite's warm-up) is dropped. */
const measureBoth = async () => {
  await measureAll(plain, "")
  await measureAll(prepared, ", prepared")
}
await measureBoth()
rows.length = 0
await measureBoth()

await plain.close()
await prepared.close()
fs.rmSync(directory, { recursive: true, force: true })

const baseline = rows[0]!.cpuMs
// The history's headline: the parameterized SELECT on both paths (PGlite's own `query`, prepared).
recordResults("pglite", rows.map((row) => ({ metric: `${row.shape}: CPU per operation`, value: row.cpuMs, unit: "ms", headline: row.shape.startsWith("1 parameterized SELECT") })))
process.stdout.write(`machine: ${os.cpus()[0]?.model ?? "?"} (${os.cpus().length} vCPU), load average at the end ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}
command: npm run -s bench:pglite -- --operations ${operationsCount}

| shape | queries | statements | CPU ms per operation | ÷ first row |
|---|---:|---:|---:|---:|
${rows.map((row) => `| ${row.shape} | ${row.roundTrips} | ${row.statements} | ${row.cpuMs.toFixed(3)} | ${(row.cpuMs / baseline).toFixed(2)} |`).join("\n")}
`)
