/**
 * Held agent transfers whose approval dies midway, for the D45 tests (approval-retry*.test.ts):
 * an owner, its agent (40 USDG; transfers above 25 held) and a recipient; the agent's transfer of
 * 30, held; its approval under one Idempotency-Key; and what the server's database and the chain
 * hold of it afterwards.
 */
import { assert } from "@effect/vitest"
import { Effect, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { createPublicClient, getAddress, type Hex, http } from "viem"
import { ConfidentialTokenArtifact } from "@pps/contracts"
import { AgentTransactionRecord } from "@pps/api/Agents"
import { ownerWithAgent } from "./agents.ts"
import { registerKey } from "./confidentialClient.ts"
import { bearer, createAccount, decodeAnswer, postJson, send } from "./http.ts"

/** The held row as an approval leaves it: its transfer id, nonce, the deadline it pinned, its status. */
export const heldRow = (sql: SqlClient.SqlClient, transactionId: string) =>
  Effect.gen(function*() {
    const rows = yield* sql<{
      transfer_id: string
      replay_nonce: string
      approval_deadline_seconds: string | null
      status: string
    }>`
      SELECT transfer_id, replay_nonce, approval_deadline_seconds, status FROM agent_transactions
      WHERE transaction_id = ${transactionId}`
    assert.lengthOf(rows, 1)
    return rows[0]!
  }).pipe(Effect.orDie)

/** Waits (real time) until the chain's latest block is past `deadlineSeconds`. */
export const chainPasses = (rpcUrl: string, deadlineSeconds: bigint) =>
  Effect.gen(function*() {
    const client = createPublicClient({ transport: http(rpcUrl) })
    for (;;) {
      const block = yield* Effect.promise(() => client.getBlock({ blockTag: "latest" }))
      if (block.timestamp > deadlineSeconds) return
      yield* Effect.sleep("250 millis")
    }
  })

const SealedHeld = Schema.Struct({ contract: Schema.String, binding_id: Schema.String })

/**
 * An owner, its agent and a recipient (handles under `prefix`), and the agent's transfer of 30,
 * held: what a test needs to approve it, pay more from the agent, and read the chain about it.
 */
export const heldAgentTransfer = (
  server: { readonly baseUrl: string; readonly adminUrl: string; readonly adminToken: string },
  sql: SqlClient.SqlClient,
  prefix: string
) =>
  Effect.gen(function*() {
    const bob = yield* createAccount(server, `${prefix}.bob`)
    yield* registerKey(server.baseUrl, bob.api_key)
    const { agent, agentKey, owner } = yield* ownerWithAgent(server, `${prefix}.olga`, {
      daily_limit_usdg: 100,
      per_transaction_limit_usdg: 50,
      hitl_threshold_usdg: 25
    }, { faucetUsdg: "100", fundAgentUsdg: "40" })
    const pay = (amount: string) => send(`${server.baseUrl}/v1/transfers`, postJson(bearer(agentKey), { to: `@${prefix}.bob`, amount }))
    const held = decodeAnswer(AgentTransactionRecord, yield* pay("30"), 202)
    // Under one Idempotency-Key, as a careful client retries (D6, D36).
    const approve = send(
      `${server.baseUrl}/v1/agents/transactions/${held.transaction_id}/approve`,
      postJson({ ...bearer(owner.api_key), "idempotency-key": `approve-${prefix}` }, {})
    )
    const { replay_nonce, transfer_id: transferId } = yield* heldRow(sql, held.transaction_id)
    /** What the chain holds of the transfer: how many transfers it applied under its id, and whether its nonce is used. */
    const onChain = (rpcUrl: string) =>
      Effect.gen(function*() {
        const sealed = Schema.decodeUnknownSync(SealedHeld)(
          (yield* send(`${server.baseUrl}/v1/agents/transactions/${held.transaction_id}/sealed`, { headers: bearer(owner.api_key) })).json
        )
        const client = createPublicClient({ transport: http(rpcUrl) })
        const logs = yield* Effect.promise(() =>
          client.request({ method: "eth_getLogs", params: [{ address: sealed.contract as Hex, fromBlock: "0x0", toBlock: "latest" }] })
        )
        const nonceUsed = yield* Effect.promise(() =>
          client.readContract({
            address: getAddress(sealed.contract),
            abi: ConfidentialTokenArtifact.abi,
            functionName: "isNonceUsed",
            args: [getAddress(agent.public_key), BigInt(replay_nonce)]
          })
        )
        return {
          transfers: logs.filter((log) => log.topics[3]?.toLowerCase() === sealed.binding_id.toLowerCase()).length,
          nonceUsed
        }
      })
    return { agent, owner, pay, approve, held, transferId, onChain }
  })

/**
 * From now on, the record of `transferId` (its insert into `transfers`, in the transaction that
 * also marks the approval) fails, or waits (`pg_sleep`, for a test to kill the process there),
 * after the guardian answered: a process dying at that line.
 */
export const stopAtRecord = (sql: SqlClient.SqlClient, transferId: string, how: "fail" | "wait") =>
  Effect.gen(function*() {
    const body = how === "fail"
      ? "RAISE EXCEPTION 'the process died before the record committed';"
      : "PERFORM pg_sleep(600); RETURN NEW;"
    yield* sql.unsafe(`CREATE OR REPLACE FUNCTION test_stop_at_record() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN ${body} END $$`)
    yield* sql.unsafe(`CREATE TRIGGER test_stop_at_record BEFORE INSERT ON transfers FOR EACH ROW
      WHEN (NEW.transfer_id = '${transferId.replace(/[^A-Za-z0-9_]/g, "")}') EXECUTE FUNCTION test_stop_at_record()`)
  }).pipe(Effect.orDie)

/** Records write again (the restarted process). */
export const recordAgain = (sql: SqlClient.SqlClient) =>
  sql.unsafe(`DROP TRIGGER IF EXISTS test_stop_at_record ON transfers`).pipe(Effect.orDie)
