/**
 * What a batch statement's shape costs in the embedded database: a text per batch size (the
 * service's VALUES and IN lists, `SqlValues.valuesPlaceholders`, `sql.in`) run warm (its text
 * prepared before) and at its first run (prepared then: a text seen for the first time, or again
 * after `PreparedStatementPGlite` closed it past its bound), against one text for every size that
 * takes its rows as arrays (`unnest($1::text[], …)`, `= ANY($1::text[])`). Then what prepared texts
 * hold in PostgreSQL's memory (`pg_backend_memory_contexts`), which in PGlite is WebAssembly memory
 * that never shrinks.
 *
 * Why: the statement logs (`bench:throughput --statement-log`) show the server running 400-500
 * texts a window, most of them a batch statement's sizes, and preparing 8.7-10.0 % of its calls over
 * a run (docs/benchmarks/notes/2026-11-30-prepared-texts.md). Whether one shape would pay is a
 * matter of these three costs.
 *
 * Each row: wall and CPU (user + system of this process) per statement, over `--operations`
 * statements of pseudo-random sizes (a seeded generator: both shapes get the same sizes and
 * rows). One process, one run, so rows compare with each other only.
 *
 * Run: `npm run -s bench:statement-shapes -- [--operations 1500]` (prints only; nothing recorded).
 */
import { parseArgs } from "node:util"
import { EmbeddedDatabase, SqlValues } from "@pps/guardian"
import { mulberry32 } from "../test/fault/prng.ts"

const { values } = parseArgs({ options: { operations: { type: "string", default: "1500" } } })
const operations = Number(values.operations)
if (!Number.isSafeInteger(operations) || operations < 100) {
  process.stderr.write(`statement-shapes: --operations must be a whole number >= 100, got ${values.operations}\n`)
  process.exit(2)
}

const rowsInTable = 5_000
/** Batch sizes as light load forms them (mostly one or two) and as heavy load does (up to 64). */
const batchSizes = { "1-6 rows": [1, 1, 1, 2, 2, 3, 4, 6], "1-64 rows": Array.from({ length: 64 }, (_, i) => i + 1) }

const db = new EmbeddedDatabase.PreparedStatementPGlite()
await db.waitReady
await db.exec(`
  CREATE TABLE balances (chain_id text, contract text, account text, confirmed bytea, reserved bytea, version bigint,
    owned boolean, PRIMARY KEY (chain_id, contract, account));
  INSERT INTO balances SELECT '31337', '0xc', 'a' || g, '\\x00', '\\x00', 0, true FROM generate_series(1, ${rowsInTable}) g;
  CREATE TABLE accounts (account_id text PRIMARY KEY, handle text UNIQUE, wallet_address text, kyc_status text);
  INSERT INTO accounts SELECT 'acct_' || g, 'h' || g, '0x' || md5(g::text), 'verified' FROM generate_series(1, ${rowsInTable}) g;
  ANALYZE`)

// The guardian's balance write (internal/store/batches.ts, updateBalances), as each shape.
const balanceCasts = ["::text", "::text", "::text", "::bytea", "::bytea", "::bigint", "::boolean"]
const balanceUpdate = (from: string) =>
  `UPDATE balances b SET confirmed = v.confirmed, reserved = v.reserved, version = v.version, owned = v.owned
   FROM ${from} AS v (chain_id, contract, account, confirmed, reserved, version, owned)
   WHERE b.chain_id = v.chain_id AND b.contract = v.contract AND b.account = v.account RETURNING b.account`
const balanceUpdateOfArrays = balanceUpdate(
  "unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::bytea[], $6::bigint[], $7::boolean[])"
)
// The server's account read by id (accounts/AccountStore.ts), as each shape.
const accountRead = (where: string) => `SELECT account_id, handle, wallet_address, kyc_status FROM accounts WHERE ${where}`
const accountReadOfArray = accountRead("account_id = ANY($1::text[])")

/** A PostgreSQL array literal of text elements (bytea as `\x…`): what an array parameter is sent as. */
const arrayLiteral = (elements: ReadonlyArray<string | Uint8Array | boolean>) =>
  `{${
    elements.map((element) =>
      element instanceof Uint8Array
        ? `"\\\\x${Buffer.from(element).toString("hex")}"`
        : typeof element === "boolean"
        ? (element ? "t" : "f")
        : `"${element}"`
    ).join(",")
  }}`

type Shape = "text per size, warm" | "text per size, first run" | "one text, arrays"
const shapes: ReadonlyArray<Shape> = ["text per size, warm", "one text, arrays", "text per size, first run"]

/** One statement of `size` rows as `shape`; `fresh` makes a first run's text new (a comment). */
const statements = {
  "balance UPDATE … FROM": (shape: Shape, size: number, random: () => number, fresh: string) => {
    const rows = Array.from({ length: size }, (_, i) =>
      [
        "31337",
        "0xc",
        `a${1 + ((Math.floor(random() * rowsInTable) + i) % rowsInTable)}`,
        new Uint8Array(120).map(() => Math.floor(random() * 256)),
        new Uint8Array(120).map(() => Math.floor(random() * 256)),
        "1",
        true
      ] as const
    )
    if (shape === "one text, arrays") {
      return db.query(balanceUpdateOfArrays, balanceCasts.map((_, column) => arrayLiteral(rows.map((row) => row[column]!))))
    }
    return db.query(`${balanceUpdate(`(VALUES ${SqlValues.valuesPlaceholders(size, balanceCasts)})`)}${fresh}`, rows.flat())
  },
  "account SELECT by id": (shape: Shape, size: number, random: () => number, fresh: string) => {
    const ids = Array.from({ length: size }, () => `acct_${1 + Math.floor(random() * rowsInTable)}`)
    if (shape === "one text, arrays") return db.query(accountReadOfArray, [arrayLiteral(ids)])
    return db.query(`${accountRead(`account_id IN (${ids.map((_, i) => `$${i + 1}`).join(", ")})`)}${fresh}`, ids)
  }
}

const timed = async (run: (index: number) => Promise<unknown>) => {
  const startedMs = performance.now()
  const cpu = process.cpuUsage()
  for (let index = 0; index < operations; index++) await run(index)
  const used = process.cpuUsage(cpu)
  return { wallMs: (performance.now() - startedMs) / operations, cpuMs: (used.user + used.system) / 1000 / operations }
}

const lines = ["| statement | sizes | shape | wall ms | CPU ms |", "|---|---|---|---:|---:|"]
let firstRuns = 0
for (const [name, statement] of Object.entries(statements)) {
  for (const [label, sizes] of Object.entries(batchSizes)) {
    const pass = (shape: Shape) => {
      // The same sizes and rows for every shape.
      const random = mulberry32(7).next
      return timed((index) => {
        const size = sizes[Math.floor(random() * sizes.length)]!
        return statement(shape, size, random, shape === "text per size, first run" ? ` -- ${firstRuns++}-${index}` : "")
      })
    }
    // A warm-up first: each size's text prepared, the array text too. First runs are timed last:
    // their new texts pass the prepared statements' bound and close the warm ones.
    for (const shape of shapes) {
      if (shape !== "text per size, first run") await pass(shape)
    }
    for (const shape of shapes) {
      const { cpuMs, wallMs } = await pass(shape)
      lines.push(`| ${name} | ${label} | ${shape} | ${wallMs.toFixed(3)} | ${cpuMs.toFixed(3)} |`)
    }
  }
}
process.stdout.write(`${lines.join("\n")}\n\n`)

// What prepared texts hold: a fresh database, 500 texts of the balance write (1-64 rows, each run
// three times, as a batch size's text runs a few times under load).
const memory = new EmbeddedDatabase.PreparedStatementPGlite()
await memory.waitReady
await memory.exec(`CREATE TABLE balances (chain_id text, contract text, account text, confirmed bytea, reserved bytea,
  version bigint, owned boolean, PRIMARY KEY (chain_id, contract, account))`)
const backendMemory = async () =>
  Number((await memory.query<{ bytes: string }>("SELECT sum(used_bytes)::text AS bytes FROM pg_backend_memory_contexts")).rows[0]!.bytes)
const usedBefore = await backendMemory()
const texts = 500
for (let k = 0; k < texts; k++) {
  const size = 1 + (k % 64)
  const rows = Array.from({ length: size }, (_, i) => ["31337", "0xc", `a${i}`, new Uint8Array(120), new Uint8Array(120), "1", true])
  for (let run = 0; run < 3; run++) {
    await memory.query(`${balanceUpdate(`(VALUES ${SqlValues.valuesPlaceholders(size, balanceCasts)})`)} -- ${k}`, rows.flat())
  }
}
const usedAfter = await backendMemory()
process.stdout.write(
  `PostgreSQL memory in use: ${(usedBefore / 1e6).toFixed(1)} MB, after ${texts} prepared texts of the balance write ` +
    `(1-64 rows): ${(usedAfter / 1e6).toFixed(1)} MB (${((usedAfter - usedBefore) / texts / 1e3).toFixed(0)} KB a text)\n`
)
await memory.close()
await db.close()
