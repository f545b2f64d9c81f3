/**
 * What each embedded store holds per transfer (D67): the api server's database and the guardian's,
 * read after the server has stopped, once the service's own maintenance has run over them
 * (`VACUUM (ANALYZE)` of each table, as `EmbeddedDatabase` does every 30 s or more: dead row
 * versions' space made reusable, not given back to the file system). Each table's size is
 * `pg_total_relation_size` (its heap, indexes, TOAST and free space), divided by the transfers the
 * api database holds: every row a transfer made counts, and so do rows that are not a
 * transfer's (accounts, keys: a fixed cost a long run spreads thin). Events stay
 * `EVENT_RETENTION_DAYS` (D35, 30 by default), so a run shorter than that holds every event it
 * made, as a service at steady state holds its last 30 days'. The write-ahead log is apart:
 * PostgreSQL recycles its segments (up to `min_wal_size`, 80 MB), a fixed cost, not one per
 * transfer. Then each table is compacted (`VACUUM FULL`) and sized again: the figure a long run
 * approaches (`StoreSize.compactBytes`).
 *
 * The throughput benchmark prints these after its run (embedded mode); alone, on a data
 * directory a run kept (`--keep`), with no server running on it:
 *   sh scripts/toolchain.sh node --disable-warning=ExperimentalWarning packages/server/bench/storeSizes.ts DATA_DIR
 * The compaction is written to that directory: sized again later, its "after the service's
 * maintenance" figure is already the compacted one.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { PgClient } from "@effect/sql-pg"
import { EmbeddedDatabase } from "@pps/guardian"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"

export interface TableSize {
  readonly name: string
  readonly rows: number
  readonly bytes: number
  /** After `VACUUM FULL`: what its live rows and their indexes take, free space left by updates gone. */
  readonly compactBytes: number
}

export interface StoreSize {
  readonly tables: ReadonlyArray<TableSize>
  /** Every table together. */
  readonly bytes: number
  /**
   * Every table together once compacted (`VACUUM FULL`, run by the benchmark after the service's own
   * maintenance has been measured; the service never runs it). A short run updates every row it
   * wrote within the run, so the free space those updates left is still in `bytes`; a service
   * running for days reuses it (its `VACUUM` makes it reusable every 30 s or more), so its tables
   * per transfer fall towards this figure (D79: 20 vacuum intervals of transfers' rows came within
   * 9 % of it). The steady state lies between the two, near this one.
   */
  readonly compactBytes: number
  readonly walBytes: number
  /** Rows of its `transfers` table (the api database's; 0 where there is none). */
  readonly transfers: number
}

const directoryBytes = (directory: string): number =>
  fs.existsSync(directory)
    ? fs.readdirSync(directory, { withFileTypes: true }).reduce(
      (sum, entry) => sum + (entry.isDirectory() ? directoryBytes(path.join(directory, entry.name)) : fs.statSync(path.join(directory, entry.name)).size),
      0
    )
    : 0

/** What sizing a store needs of its database: statements, their rows. */
interface Queryable {
  readonly query: <Row>(sql: string) => Promise<ReadonlyArray<Row>>
  readonly exec: (sql: string) => Promise<void>
}

/** Vacuums each table of the public schema (the service's maintenance), then reads each one's size, largest first. */
const sizeTables = async (db: Queryable): Promise<Omit<StoreSize, "walBytes">> => {
  const listed = await db.query<{ name: string }>(
    `SELECT c.oid::regclass::text AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.relkind = 'r' AND n.nspname = 'public' ORDER BY 1`
  )
  for (const { name } of listed) await db.exec(`VACUUM (ANALYZE) ${name}`)
  const sized = await db.query<{ name: string; rows: string; bytes: string }>(
    `SELECT c.oid::regclass::text AS name, greatest(c.reltuples, 0)::bigint::text AS rows, pg_total_relation_size(c.oid)::text AS bytes
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.relkind = 'r' AND n.nspname = 'public' ORDER BY pg_total_relation_size(c.oid) DESC`
  )
  const hasTransfers = sized.some((table) => table.name === "transfers")
  const transfers = hasTransfers ? Number((await db.query<{ n: string }>("SELECT count(*)::text AS n FROM transfers"))[0]!.n) : 0
  const compacted = await compactSizes(db, sized.map((row) => row.name))
  const tables = sized.map((row) => ({
    name: row.name,
    rows: Number(row.rows),
    bytes: Number(row.bytes),
    compactBytes: compacted.get(row.name) ?? Number.NaN
  }))
  return {
    tables,
    bytes: tables.reduce((sum, table) => sum + table.bytes, 0),
    compactBytes: tables.reduce((sum, table) => sum + table.compactBytes, 0),
    transfers
  }
}

/** Each table's size once rewritten by `VACUUM FULL` (see `StoreSize.compactBytes`). */
const compactSizes = async (db: Queryable, names: ReadonlyArray<string>): Promise<Map<string, number>> => {
  for (const name of names) await db.exec(`VACUUM FULL ${name}`)
  const sized = await db.query<{ name: string; bytes: string }>(
    `SELECT c.oid::regclass::text AS name, pg_total_relation_size(c.oid)::text AS bytes
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname = 'public'`
  )
  return new Map(sized.map((row) => [row.name, Number(row.bytes)]))
}

/** Opens the store in `pgliteDirectory` (no process may have it open), maintains it as the service does, and reads its sizes. */
export const measureStore = async (pgliteDirectory: string): Promise<StoreSize> => {
  const db = new EmbeddedDatabase.PreparedStatementPGlite(pgliteDirectory)
  try {
    const sized = await sizeTables({
      query: async <Row>(sql: string) => (await db.query<Row>(sql)).rows,
      exec: async (sql) => {
        await db.exec(sql)
      }
    })
    return { ...sized, walBytes: directoryBytes(path.join(pgliteDirectory, "pg_wal")) }
  } finally {
    await db.close()
  }
}

/**
 * One database of a PostgreSQL server (the distributed mode's), sized the same way: its tables
 * vacuumed first, as autovacuum would in time. Its write-ahead log is the server's, shared by every
 * database: not counted (NaN).
 */
export const measurePostgresStore = (databaseUrl: string): Promise<StoreSize> =>
  Effect.runPromise(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // A statement needs nothing but the client it was made by: run while the layer holds the pool.
      const run = <A>(effect: Effect.Effect<A, unknown>) => Effect.runPromise(effect)
      const sized = yield* Effect.promise(() =>
        sizeTables({
          query: <Row>(text: string) => run(sql.unsafe(text)) as Promise<ReadonlyArray<Row>>,
          exec: (text) => run(Effect.asVoid(sql.unsafe(text)))
        })
      )
      return { ...sized, walBytes: Number.NaN }
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), applicationName: "pps-bench-store-sizes" })))
  )

/** The server's store and its embedded guardian's, in a server's `DATA_DIR`. */
export const measureStores = async (dataDir: string) => ({
  api: await measureStore(path.join(dataDir, "pglite")),
  guardian: await measureStore(path.join(dataDir, "guardian", "pglite"))
})

const kb = (bytes: number) => (bytes / 1024).toFixed(2)

/** A store's tables as a Markdown table, largest first, per transfer of `transfers`; tables under 1 % of the store are summed in one row. */
export const storeTable = (label: string, store: StoreSize, transfers: number): string => {
  const shown = store.tables.filter((table) => table.bytes >= store.bytes / 100)
  const rest = store.tables.filter((table) => table.bytes < store.bytes / 100)
  const line = (name: string, rows: number, bytes: number, compactBytes: number) =>
    `| ${name} | ${rows} | ${kb(bytes)} | ${kb(bytes / transfers)} | ${kb(compactBytes / transfers)} |`
  const sum = (key: "rows" | "bytes" | "compactBytes") => rest.reduce((total, table) => total + table[key], 0)
  return [
    `${label}: ${kb(store.bytes / transfers)} KB per transfer, ${kb(store.compactBytes / transfers)} compacted (${transfers} transfers; ${(store.bytes / 1024 / 1024).toFixed(1)} MB of tables, ${Number.isFinite(store.walBytes) ? `write-ahead log ${(store.walBytes / 1024 / 1024).toFixed(0)} MB apart` : "the server's write-ahead log not counted"})`,
    "",
    "| table | rows | KB | KB per transfer | compacted (VACUUM FULL), KB per transfer |",
    "|---|---:|---:|---:|---:|",
    ...shown.map((table) => line(table.name, table.rows, table.bytes, table.compactBytes)),
    ...(rest.length === 0 ? [] : [line(`${rest.length} others`, sum("rows"), sum("bytes"), sum("compactBytes"))]),
    ""
  ].join("\n")
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const dataDir = process.argv[2]
  if (dataDir === undefined) {
    process.stderr.write("usage: storeSizes.ts DATA_DIR (a stopped server's)\n")
    process.exit(2)
  }
  const { api, guardian } = await measureStores(dataDir)
  process.stdout.write(`${storeTable("api database", api, api.transfers)}\n${storeTable("guardian database", guardian, api.transfers)}`)
}
