/**
 * SQL statements per transfer (docs/benchmarks.md): a machine-independent measure of the work
 * the transfer path does in its databases, which is where the throughput benchmark's
 * profile puts most of the server's and guardian's CPU (each PGlite statement, a
 * BEGIN or COMMIT included, costs about half a millisecond of CPU on the 2-vCPU VM).
 *
 * Runs the server's services in this process (embedded: PGlite, the guardian in
 * process on its own PGlite, anvil), sends `--transfers` plain-form transfers one
 * after another over loopback HTTP with an `Idempotency-Key` each, lets background
 * work settle, and counts every statement both PGlite instances ran, by text, split
 * into the api tier's and the guardian's (the guardian's tables are `guardian_*`).
 * Sequential on purpose: under load, pollers and relays batch several transfers per
 * statement, so this is the per-transfer upper bound.
 *
 * Run: `npm run -s bench:statements -- [--transfers 20] [--no-record]` (the figures are appended to
 * docs/benchmarks/results.jsonl: scripts/benchRecord.ts).
 */
import { parseArgs } from "node:util"
import { PGlite } from "@electric-sql/pglite"
import { EmbeddedDatabase } from "@pps/guardian"
import { Effect, Logger } from "effect"
import { registerKey } from "../test/support/confidentialClient.ts"
import { bearer, createAccount, send } from "../test/support/http.ts"
import { makeTestServer, TestServer } from "../test/support/TestServer.ts"
import { recordOption, recordResults } from "../../../scripts/benchRecord.ts"

const { values } = parseArgs({ options: { transfers: { type: "string", default: "20" }, ...recordOption } })
const transfers = Number(values.transfers)
if (!Number.isSafeInteger(transfers) || transfers < 1) {
  process.stderr.write(`statements: --transfers must be a whole number >= 1, got ${values.transfers}\n`)
  process.exit(2)
}

/** Statement texts, whitespace folded, counted while `counting`. */
const counts = new Map<string, number>()
/**
 * Wall milliseconds from each call to its answer, by text: the statement's own cost in this
 * sequential run, plus any wait behind another statement of the same PGlite instance.
 */
const elapsedMs = new Map<string, number>()
let counting = false
type Counted = Record<"query" | "exec", (this: PGlite, ...args: Array<unknown>) => unknown>
/**
 * Both databases are `EmbeddedDatabase.PreparedStatementPGlite`, whose `query` overrides
 * PGlite's (and falls back to it for options it does not implement): its own `query` is
 * counted, and PGlite's only when called on another instance, so nothing counts twice.
 */
const targets: ReadonlyArray<readonly [Counted, "query" | "exec", boolean]> = [
  [EmbeddedDatabase.PreparedStatementPGlite.prototype as unknown as Counted, "query", false],
  [PGlite.prototype as unknown as Counted, "query", true],
  [PGlite.prototype as unknown as Counted, "exec", false]
]
for (const [prototype, name, onlyPlainPGlite] of targets) {
  const original = prototype[name]
  prototype[name] = function(...args) {
    if (!counting || (onlyPlainPGlite && this instanceof EmbeddedDatabase.PreparedStatementPGlite)) return original.apply(this, args)
    const text = String(args[0]).replace(/\s+/g, " ").trim()
    counts.set(text, (counts.get(text) ?? 0) + 1)
    const startedMs = performance.now()
    const answer = original.apply(this, args)
    const record = () => elapsedMs.set(text, (elapsedMs.get(text) ?? 0) + performance.now() - startedMs)
    if (answer instanceof Promise) answer.then(record, record)
    else record()
    return answer
  }
}

const program = Effect.gen(function*() {
  const server = yield* TestServer
  const sender = yield* createAccount(server, "statements.sender")
  const recipient = yield* createAccount(server, "statements.recipient")
  yield* registerKey(server.baseUrl, sender.api_key)
  yield* registerKey(server.baseUrl, recipient.api_key)
  const json = (extra: Record<string, string> = {}) => ({ ...bearer(sender.api_key), "content-type": "application/json", ...extra })
  yield* send(`${server.baseUrl}/v1/test/faucet`, { method: "POST", headers: json(), body: JSON.stringify({ amount: "100" }) })
  const pay = (i: number) =>
    send(`${server.baseUrl}/v1/transfers`, {
      method: "POST",
      headers: json({ "idempotency-key": `statements-${i}` }),
      body: JSON.stringify({ to: "@statements.recipient", amount: "0.01" })
    }).pipe(Effect.flatMap((answer) =>
      answer.status === 201 ? Effect.void : Effect.die(new Error(`transfer ${i} answered ${answer.status}: ${answer.text}`))
    ))
  // One transfer first, so what runs once (first reads, cursors) is not counted.
  yield* pay(-1)
  yield* Effect.sleep("2 seconds")
  counting = true
  for (let i = 0; i < transfers; i++) yield* pay(i)
  // Background work of the last transfers: completion, guardian settlement, relay, credits.
  yield* Effect.sleep("3 seconds")
  counting = false

  const rows = [...counts.entries()].sort((a, b) => b[1] - a[1])
  const isGuardian = (text: string) => /\bguardian_/.test(text)
  const perTransfer = (filter: (text: string) => boolean) =>
    rows.filter(([text]) => filter(text)).reduce((sum, [, n]) => sum + n, 0) / transfers
  const transactionControl = (text: string) => text === "BEGIN" || text === "COMMIT" || text === "ROLLBACK"
  const wallMs = [...elapsedMs.values()].reduce((sum, ms) => sum + ms, 0) / transfers
  recordResults("statements", [
    { metric: "statements per transfer, all", value: perTransfer(() => true), unit: "statements", headline: true },
    { metric: "BEGIN/COMMIT per transfer", value: perTransfer(transactionControl), unit: "statements" },
    { metric: "guardian tables per transfer", value: perTransfer(isGuardian), unit: "statements" },
    { metric: "api tier tables per transfer", value: perTransfer((text) => !isGuardian(text) && !transactionControl(text)), unit: "statements" },
    { metric: "wall time in statements per transfer", value: wallMs, unit: "ms", headline: true }
  ])
  process.stdout.write([
    `statements per transfer (${transfers} sequential plain-form transfers, embedded, Idempotency-Key on each):`,
    `  all: ${perTransfer(() => true).toFixed(1)}  (BEGIN/COMMIT of both: ${perTransfer(transactionControl).toFixed(1)})`,
    `  guardian tables: ${perTransfer(isGuardian).toFixed(1)}`,
    `  api tier tables: ${perTransfer((text) => !isGuardian(text) && !transactionControl(text)).toFixed(1)}`,
    `  wall ms in statements: ${wallMs.toFixed(1)}`,
    "by statement (per transfer: count, wall ms):",
    ...rows.map(([text, n]) =>
      `  ${(n / transfers).toFixed(2).padStart(6)} ${((elapsedMs.get(text) ?? 0) / transfers).toFixed(2).padStart(6)}  ${text.slice(0, 130)}`
    )
  ].join("\n") + "\n")
})

program.pipe(
  // The server's PGlite on this thread, where the statements above are counted (on its own
  // thread they would run out of this hook's sight).
  Effect.provide(makeTestServer({ config: { chainBlockTimeMs: 100, logLevel: "Warn", embeddedDatabaseThread: "caller" } })),
  Effect.provide(Logger.layer([])),
  Effect.scoped,
  Effect.runPromise
).then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${String(error)}\n`)
    process.exit(1)
  }
)
