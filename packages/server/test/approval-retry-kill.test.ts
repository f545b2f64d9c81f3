/**
 * D45 with a real kill -9 at the line: the server process as `npm start` runs it (src/main.ts,
 * its guardian a child process, its anvil a child) on PostgreSQL, so that the test can hold an
 * approval at its record. A trigger makes the record's insert wait after the guardian attested
 * the approval; the test then SIGKILLs the server and its guardian there, ends the dead
 * connection's transaction (as PostgreSQL does once it sees the client gone), starts the server
 * again on the same data, and retries the approval under the same Idempotency-Key until it is
 * answered: a defined code all along (409 `approval_in_progress` while the first attestation
 * lives, then 200), and the transfer paid once.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, expect, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { AgentTransactionRecord } from "@pps/api/Agents"
import { Anvil } from "@pps/contracts"
import { freshServerTarget } from "./fault/processes.ts"
import { heldAgentTransfer, heldRow, recordAgain, stopAtRecord } from "./support/heldApprovals.ts"
import { decodeAnswer, expectEnvelope, type TestResponse } from "./support/http.ts"
import { postgresAvailable } from "./support/requirePostgres.ts"
import { freshPostgresDatabase } from "./support/TestServer.ts"

/** The secrets the distributed mode (DATABASE_URL) needs from configuration: fixed test values. */
const secrets = {
  API_KEY_PEPPER: "test-pepper-0123456789abcdef0123456789abcdef",
  WALLET_KEK: Buffer.alloc(32, 7).toString("base64"),
  ADMIN_TOKEN: "adm_test_token_0123456789abcdef0123456789"
}

/** How long the retried approval may answer 409 before the test gives up: the lifetime and the chain's lag, with room. */
const retryForMs = 90_000

/** Whether the record's insert is waiting in the trigger (the guardian has answered). */
const recordWaiting = (sql: SqlClient.SqlClient) =>
  sql<{ waiting: number }>`
    SELECT count(*)::int AS waiting FROM pg_stat_activity
    WHERE datname = current_database() AND wait_event = 'PgSleep'`.pipe(Effect.map((rows) => (rows[0]?.waiting ?? 0) > 0))

/** The embedded anvil's RPC URL, from its process's command line (the server does not print it). */
const embeddedRpcUrl = (dataDir: string) =>
  Anvil.rpcUrlOfProcess(Number.parseInt(fs.readFileSync(path.join(dataDir, "chain", "anvil.pid"), "utf8"), 10)) ??
    assert.fail("the embedded anvil has no --port")

/** Retries the approval while it answers "later" (409 `approval_in_progress`, or the dead run's key still held). */
const retryUntilAnswered = (approve: Effect.Effect<TestResponse>) =>
  Effect.gen(function*() {
    const deadline = Date.now() + retryForMs
    const codes: Array<string> = []
    for (;;) {
      const answer = yield* approve
      const code = (answer.json as { error?: { code?: string } } | undefined)?.error?.code
      if (answer.status !== 409 || (code !== "approval_in_progress" && code !== "idempotency_key_in_progress")) {
        return { answer, codes }
      }
      codes.push(code)
      if (Date.now() > deadline) return { answer, codes }
      yield* Effect.sleep("1 second")
    }
  })

describe.skipIf(!postgresAvailable)("an approval whose process is killed at its record (D45)", () => {
  it.live("SIGKILL after the guardian attested, restart, retry: a defined answer, the transfer paid once", () =>
    Effect.gen(function*() {
      const databaseUrl = yield* freshPostgresDatabase
      const sql = Context.get(yield* Layer.build(PgClient.layer({ url: Redacted.make(databaseUrl) })), SqlClient.SqlClient)
      const { adminPort, dataDir, port, server: target, workDir } = yield* Effect.promise(() =>
        freshServerTarget("pps-approval-kill-", { ...secrets, DATABASE_URL: databaseUrl, ATTESTATION_LIFETIME_SECONDS: "10" })
      )
      yield* Effect.acquireRelease(
        Effect.promise(() => target.start()),
        (_, exit) =>
          Effect.promise(() => target.stop()).pipe(
            // Kept for a failed run: the server's log says what it did.
            Effect.andThen(Effect.sync(() => exit._tag === "Success" && fs.rmSync(workDir, { recursive: true, force: true })))
          )
      )
      const server = { baseUrl: `http://127.0.0.1:${port}`, adminUrl: `http://127.0.0.1:${adminPort}`, adminToken: secrets.ADMIN_TOKEN }
      const { approve, held, onChain, pay, transferId } = yield* heldAgentTransfer(server, sql, "kill")

      // The approval reaches its record, after the guardian's answer, and waits there: kill -9.
      yield* stopAtRecord(sql, transferId, "wait")
      const first = yield* Effect.forkChild(Effect.exit(approve))
      for (let polls = 0; !(yield* recordWaiting(sql)); polls++) {
        assert.isBelow(polls, 600, "the approval never reached its record")
        yield* Effect.sleep("100 millis")
      }
      yield* Effect.promise(() => target.kill())
      yield* sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'`
      yield* recordAgain(sql)
      yield* Fiber.join(first)
      const died = yield* heldRow(sql, held.transaction_id)
      assert.strictEqual(died.status, "pending_approval")
      assert.isNotNull(died.approval_deadline_seconds)
      assert.lengthOf(yield* sql`SELECT 1 FROM transfers WHERE transfer_id = ${transferId}`, 0)

      // Restarted on the same data; the client retries under its key until answered.
      yield* Effect.promise(() => target.start())
      const { answer, codes } = yield* retryUntilAnswered(approve)
      const approved = decodeAnswer(AgentTransactionRecord, answer, 200)
      expect(approved).toMatchObject({ status: "approved", transfer_id: transferId })
      assert.includeMembers(["approval_in_progress", "idempotency_key_in_progress"], [...new Set(codes)])

      // Paid once: settled on chain once under its id, its one nonce used, the agent's 40 down by 30 once.
      for (let polls = 0; (yield* onChain(embeddedRpcUrl(dataDir))).transfers === 0; polls++) {
        assert.isBelow(polls, 120, "the approved transfer was never mined")
        yield* Effect.sleep("500 millis")
      }
      expect(yield* onChain(embeddedRpcUrl(dataDir))).toEqual({ transfers: 1, nonceUsed: true })
      expectEnvelope(yield* pay("10.000001"), 402, "insufficient_balance")
      assert.strictEqual((yield* pay("10")).status, 201)
    }).pipe(Effect.scoped), 300_000)
})
