/**
 * Would the server's row updates cost less if the "still to do" sets left their tables' partial
 * indexes? Two of the transfer path's updates change a column that a partial index's
 * predicate names, so PostgreSQL cannot make them HOT (heap-only) updates: each writes a new row
 * version and an entry in every index of the table.
 *
 * - `transfers`: the completion (`status`) and the guardian's mark (`guardian_settled`), both named
 *   by `transfers_unsettled ... WHERE status = 'pending' OR guardian_settled = false`.
 * - `events`: the relay's mark (`published_at`), named by `events_unpublished ... WHERE
 *   published_at IS NULL`.
 *
 * Each case runs the statements the service runs, shaped two ways on one PGlite on disk (as the
 * embedded default runs it), alternating A B A B in fresh directories:
 *
 * - A, as built: the partial index, the update of the row.
 * - B, a side table: the set kept in a small table of its own (a row inserted with the record in the
 *   same statement, deleted when done), no partial index, `transfers` with a fillfactor leaving room
 *   for HOT versions; the updates touch no indexed column.
 *
 * Printed: milliseconds of wall time (one process, no other work: its CPU) per transfer for each
 * step, the rows sized as the service's (boxes, ciphertext and call data of a transfer; four events a
 * transfer, each with `transferEvents`' payload), statistics and vacuum as the embedded database keeps them.
 *
 * Run: `npm run -s bench:side-tables -- [--transfers 6000] [--no-record]` (the figures are appended
 * to docs/benchmarks/results.jsonl: scripts/benchRecord.ts).
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { parseArgs } from "node:util"
import { EmbeddedDatabase } from "@pps/guardian"
import { type Metric, recordOption, recordResults } from "../../../scripts/benchRecord.ts"

const { values } = parseArgs({ options: { transfers: { type: "string", default: "6000" }, ...recordOption } })
const transfers = Number(values.transfers)
if (!Number.isSafeInteger(transfers) || transfers < 500) {
  process.stderr.write(`side-tables: --transfers must be a whole number >= 500, got ${values.transfers}\n`)
  process.exit(2)
}

type Variant = "A" | "B"
type Steps = Record<string, number>

/** Completions and marks run per batch of this many transfers (the service's batches under load: ~10-15). */
const batch = 12
const accounts = Array.from({ length: 16 }, (_, i) => `acct_${String(i).padStart(26, "0")}`)
const hex = (bytes: number) => crypto.randomBytes(bytes).toString("hex")
const list = (count: number, from = 1) => Array.from({ length: count }, (_, k) => `$${k + from}`).join(", ")

const open = async (label: string) => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), `pps-side-tables-${label}-`))
  const db = new EmbeddedDatabase.PreparedStatementPGlite(directory)
  await db.waitReady
  return {
    db,
    close: async () => {
      await db.close()
      fs.rmSync(directory, { recursive: true, force: true })
    }
  }
}

const timed = async (steps: Steps, step: string, work: () => Promise<unknown>) => {
  const startedMs = performance.now()
  await work()
  steps[step] = (steps[step] ?? 0) + performance.now() - startedMs
}

const transfersCase = async (variant: Variant): Promise<Steps> => {
  const { close, db } = await open(`transfers-${variant}`)
  await db.exec(`
    CREATE TABLE transfers (
      transfer_id text PRIMARY KEY, mode text NOT NULL, sender_account_id text NOT NULL, recipient_account_id text,
      recipient_address text NOT NULL, recipient_display text NOT NULL, asset text NOT NULL, confidential boolean NOT NULL,
      status text NOT NULL, tx_hash text, api_key_id text NOT NULL, replay_nonce text NOT NULL, deadline_seconds text NOT NULL,
      sender_box bytea NOT NULL, recipient_box bytea NOT NULL, sealed_digest text NOT NULL, ciphertext text NOT NULL,
      call_data bytea NOT NULL, guardian_settled boolean NOT NULL DEFAULT false, created_at timestamptz NOT NULL,
      confirmed_at timestamptz)${variant === "B" ? " WITH (fillfactor = 60)" : ""};
    CREATE INDEX transfers_sender ON transfers (sender_account_id, mode, created_at DESC, transfer_id DESC);
    CREATE INDEX transfers_recipient ON transfers (recipient_account_id, mode, created_at DESC, transfer_id DESC);
    ${
    variant === "A"
      ? "CREATE INDEX transfers_unsettled ON transfers (mode) WHERE status = 'pending' OR guardian_settled = false;"
      : "CREATE TABLE transfers_unsettled (transfer_id text PRIMARY KEY, mode text NOT NULL);"
  }`)
  const insert = `INSERT INTO transfers (transfer_id, mode, sender_account_id, recipient_account_id, recipient_address,
      recipient_display, asset, confidential, status, api_key_id, replay_nonce, deadline_seconds, sender_box, recipient_box,
      sealed_digest, ciphertext, call_data, created_at)
    VALUES ($1, 'test', $2, $3, $4, '@bob', 'USDG', true, 'pending', 'key_x', $5, '1800', $6, $7, $8, $9, $10, now())`
  const record = variant === "A"
    ? insert
    : `WITH i AS (${insert} RETURNING transfer_id, mode) INSERT INTO transfers_unsettled SELECT transfer_id, mode FROM i`
  const steps: Steps = {}
  let unfinished: Array<string> = []
  for (let i = 0; i < transfers; i++) {
    const id = `tr_${String(i).padStart(26, "0")}`
    await timed(steps, "record (BEGIN, INSERT, COMMIT)", async () => {
      await db.query("BEGIN")
      await db.query(record, [
        id,
        accounts[i % 16],
        accounts[(i + 3) % 16],
        `0x${hex(20)}`,
        hex(16),
        crypto.randomBytes(180),
        crypto.randomBytes(180),
        hex(32),
        hex(128),
        crypto.randomBytes(500)
      ])
      await db.query("COMMIT")
    })
    unfinished.push(id)
    if (unfinished.length === batch) {
      const ids = unfinished
      unfinished = []
      await timed(steps, "completion (status)", () =>
        db.query(
          `UPDATE transfers SET status = 'confirmed', tx_hash = '0xabc', confirmed_at = now()
           FROM (VALUES ${ids.map((_, k) => `($${k + 1})`).join(", ")}) AS v (transfer_id)
           WHERE transfers.transfer_id = v.transfer_id AND transfers.status = 'pending'`,
          ids
        ))
      await timed(steps, "guardian mark (guardian_settled)", async () => {
        await db.query(`UPDATE transfers SET guardian_settled = true WHERE transfer_id IN (${list(ids.length)})`, ids)
        if (variant === "B") await db.query(`DELETE FROM transfers_unsettled WHERE transfer_id IN (${list(ids.length)})`, ids)
      })
    }
    if (i % 2000 === 1999) await db.exec("VACUUM (ANALYZE)")
  }
  await close()
  return steps
}

const eventsCase = async (variant: Variant): Promise<Steps> => {
  const { close, db } = await open(`events-${variant}`)
  await db.exec(`
    CREATE TABLE events (event_id text PRIMARY KEY, account_id text NOT NULL, mode text NOT NULL, type text NOT NULL,
      payload jsonb NOT NULL, created_at timestamptz NOT NULL, published_at timestamptz);
    CREATE INDEX events_created_at ON events (created_at);
    CREATE INDEX events_account_stream ON events (account_id, mode, event_id);
    ${
    variant === "A"
      ? "CREATE INDEX events_unpublished ON events (event_id) WHERE published_at IS NULL;"
      : "CREATE TABLE event_outbox (event_id text PRIMARY KEY);"
  }`)
  const rows = Array.from({ length: 4 }, (_, k) => `($${k * 5 + 1}, $${k * 5 + 2}, 'test', $${k * 5 + 3}, $${k * 5 + 4}::jsonb, $${k * 5 + 5}::timestamptz)`)
  const insert = `INSERT INTO events (event_id, account_id, mode, type, payload, created_at) VALUES ${rows.join(", ")}`
  const record = variant === "A"
    ? insert
    : `WITH e AS (${insert} RETURNING event_id) INSERT INTO event_outbox (event_id) SELECT event_id FROM e`
  const unpublished = variant === "A"
    ? "SELECT event_id, account_id, mode, type FROM events WHERE published_at IS NULL ORDER BY event_id LIMIT $1"
    : `SELECT e.event_id, e.account_id, e.mode, e.type FROM event_outbox o JOIN events e ON e.event_id = o.event_id
       ORDER BY o.event_id LIMIT $1`
  // The shape of `transferEvents`' payloads (@pps/api/Events).
  const payload = (k: number) =>
    JSON.stringify({
      event: k < 2 ? "transfer.initiated" : "transfer.confirmed",
      account: `@handle_${k}`,
      direction: k % 2 === 0 ? "sent" : "received",
      counterparty: "@counterparty",
      asset: "USDG",
      confidential: true,
      tx_hash: k < 2 ? null : `0x${hex(32)}`,
      transfer_id: `tr_${hex(13)}`
    })
  const steps: Steps = {}
  let sequence = 0
  for (let i = 0; i < transfers; i++) {
    const params = Array.from({ length: 4 }, (_, k) => [
      `evt_${String(sequence++).padStart(26, "0")}`,
      accounts[(i + k) % 16],
      k < 2 ? "transfer.initiated" : "transfer.confirmed",
      payload(k),
      new Date().toISOString()
    ]).flat()
    await timed(steps, "record 4 events (BEGIN, INSERT, COMMIT)", async () => {
      await db.query("BEGIN")
      await db.query(record, params)
      await db.query("COMMIT")
    })
    if (i % batch === batch - 1) {
      let ids: Array<string> = []
      await timed(steps, "relay's read", async () => {
        ids = (await db.query<{ event_id: string }>(unpublished, [500])).rows.map((row) => row.event_id)
      })
      await timed(steps, "relay's mark", () =>
        variant === "A"
          ? db.query(`UPDATE events SET published_at = now() WHERE event_id IN (${list(ids.length)})`, ids)
          : db.query(`DELETE FROM event_outbox WHERE event_id IN (${list(ids.length)})`, ids))
    }
    if (i % 1500 === 1499) await db.exec("VACUUM (ANALYZE)")
  }
  await close()
  return steps
}

const metrics: Array<Metric> = []

const report = async (name: string, run: (variant: Variant) => Promise<Steps>) => {
  const runs: Array<[Variant, Steps]> = []
  for (const variant of ["A", "B", "A", "B"] as const) runs.push([variant, await run(variant)])
  const steps = Object.keys(runs[0]![1])
  process.stdout.write(`\n${name}, ms per transfer (${transfers} transfers a run; A: partial index, B: side table)\n\n`)
  process.stdout.write(`| run | ${[...steps, "all"].join(" | ")} |\n|---|${steps.map(() => "---:|").join("")}---:|\n`)
  for (const [variant, measured] of runs) {
    const perTransfer = steps.map((step) => (measured[step] ?? 0) / transfers)
    const all = perTransfer.reduce((sum, ms) => sum + ms, 0)
    process.stdout.write(`| ${variant} | ${[...perTransfer, all].map((ms) => ms.toFixed(3)).join(" | ")} |\n`)
  }
  // The record keeps each variant's mean of its two runs, all steps together.
  for (const variant of ["A", "B"] as const) {
    const alls = runs.filter(([which]) => which === variant).map(([, measured]) => steps.reduce((sum, step) => sum + (measured[step] ?? 0), 0) / transfers)
    const label = variant === "A" ? "partial index" : "side table"
    metrics.push({ metric: `${name}, ${label}: all steps per transfer`, value: alls.reduce((sum, ms) => sum + ms, 0) / alls.length, unit: "ms", headline: true })
  }
}

process.stdout.write(`machine: ${os.cpus()[0]?.model ?? "?"} (${os.cpus().length} vCPU), Node ${process.version}, ${new Date().toISOString()}\n`)
await report("transfers", transfersCase)
await report("events", eventsCase)
recordResults("side-tables", metrics)
