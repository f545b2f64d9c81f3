/**
 * D44 over a real socket, on embedded anvil and the in-process guardian: an owner's approval
 * whose process died after the guardian attested it and before the server recorded it, retried
 * once that attestation's deadline has passed, gets a fresh decision under the balance and policy
 * of the moment, and the transfer is paid once or not at all.
 *
 * The death is reproduced at its exact line: the database refuses the record's insert of this
 * one transfer (a trigger), so the record's transaction rolls back after the guardian committed
 * its reservation, which is the state a process killed at that line leaves behind. The
 * attestation's lifetime is configured short (`attestationLifetimeSeconds`), so "after the
 * lifetime" is a few seconds of real time: the chain's clock is anvil's, and must pass too.
 */
import { assert, describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { createPublicClient, type Hex, http } from "viem"
import { AgentTransactionRecord } from "@pps/api/Agents"
import { DevChain } from "../src/settlement/DevChain.ts"
import { decode, ownerWithAgent } from "./support/agents.ts"
import { registerKey } from "./support/confidentialClient.ts"
import { bearer, createAccount, expectEnvelope, postJson, send } from "./support/http.ts"
import { makeTestServer, TestServer, type TestServerShape } from "./support/TestServer.ts"

/** Short, so a test can outlive an attestation; long enough for a funding transfer to be mined. */
const attestationLifetimeSeconds = 6

const sqlOf = (server: TestServerShape) => Context.get(server.services, SqlClient.SqlClient)

/** From now on, the record of `transferId` fails as if its process died at that line. */
const dieAtRecord = (server: TestServerShape, transferId: string) =>
  Effect.gen(function*() {
    const sql = sqlOf(server)
    yield* sql.unsafe(`CREATE OR REPLACE FUNCTION test_process_dies() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'the process died before the record committed'; END $$`)
    yield* sql.unsafe(`CREATE TRIGGER test_dies_at_record BEFORE INSERT ON transfers FOR EACH ROW
      WHEN (NEW.transfer_id = '${transferId.replace(/[^A-Za-z0-9_]/g, "")}') EXECUTE FUNCTION test_process_dies()`)
  }).pipe(Effect.orDie)

/** The restarted process: records write again. */
const restart = (server: TestServerShape) =>
  sqlOf(server).unsafe(`DROP TRIGGER IF EXISTS test_dies_at_record ON transfers`).pipe(Effect.orDie)

/** The held row as the approval left it: its transfer id and the deadline it pinned. */
const heldRow = (server: TestServerShape, transactionId: string) =>
  Effect.gen(function*() {
    const rows = yield* sqlOf(server)<{ transfer_id: string; approval_deadline_seconds: string | null; status: string }>`
      SELECT transfer_id, approval_deadline_seconds, status FROM agent_transactions WHERE transaction_id = ${transactionId}`
    assert.lengthOf(rows, 1)
    return rows[0]!
  }).pipe(Effect.orDie)

/** Waits (real time) until the chain's latest block is past `deadlineSeconds`. */
const chainPasses = (server: TestServerShape, deadlineSeconds: bigint) =>
  Effect.gen(function*() {
    const rpcUrl = Option.getOrThrow(Context.get(server.services, DevChain).rpcUrl)
    const client = createPublicClient({ transport: http(rpcUrl) })
    for (;;) {
      const block = yield* Effect.promise(() => client.getBlock({ blockTag: "latest" }))
      if (block.timestamp > deadlineSeconds) return
      yield* Effect.sleep("250 millis")
    }
  })

/** How many transfers the chain applied under `bindingId`. */
const transfersOnChain = (server: TestServerShape, contract: Hex, bindingId: Hex) =>
  Effect.gen(function*() {
    const rpcUrl = Option.getOrThrow(Context.get(server.services, DevChain).rpcUrl)
    const client = createPublicClient({ transport: http(rpcUrl) })
    const logs = yield* Effect.promise(() =>
      client.request({ method: "eth_getLogs", params: [{ address: contract, fromBlock: "0x0", toBlock: "latest" }] })
    )
    return logs.filter((log) => log.topics[3]?.toLowerCase() === bindingId.toLowerCase()).length
  })

const SealedHeld = Schema.Struct({ contract: Schema.String, binding_id: Schema.String })

describe("an approval retried after its process died mid-approval (D44)", () => {
  layer(makeTestServer({ config: { attestationLifetimeSeconds } }), { timeout: "180 seconds", excludeTestServices: true })(
    "embedded",
    (it) => {
      it.effect("retried after the attestation's lifetime: a fresh decision, the transfer paid once", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const bob = yield* createAccount(server, "late.bob")
          yield* registerKey(server.baseUrl, bob.api_key)
          const { agentKey, owner } = yield* ownerWithAgent(server, "late.olga", {
            daily_limit_usdg: 100,
            per_transaction_limit_usdg: 50,
            hitl_threshold_usdg: 25
          }, { faucetUsdg: "100", fundAgentUsdg: "40" })
          const pay = (amount: string) => send(`${server.baseUrl}/v1/transfers`, postJson(bearer(agentKey), { to: "@late.bob", amount }))
          const held = decode(AgentTransactionRecord, yield* pay("30"), 202)
          const approveUrl = `${server.baseUrl}/v1/agents/transactions/${held.transaction_id}/approve`
          const { transfer_id: transferId } = yield* heldRow(server, held.transaction_id)

          // The guardian attests the approval; the process dies before the record commits.
          yield* dieAtRecord(server, transferId)
          expectEnvelope(yield* send(approveUrl, postJson(bearer(owner.api_key), {})), 503, "service_unavailable")
          yield* restart(server)
          const pinned = yield* heldRow(server, held.transaction_id)
          assert.strictEqual(pinned.status, "pending_approval")
          assert.isNotNull(pinned.approval_deadline_seconds)

          // Retried once the attestation's deadline has passed, on the chain too.
          yield* chainPasses(server, BigInt(pinned.approval_deadline_seconds!))
          const approved = decode(AgentTransactionRecord, yield* send(approveUrl, postJson(bearer(owner.api_key), {})), 200)
          expect(approved).toMatchObject({ status: "approved", transfer_id: transferId, transfer_status: "confirmed" })

          // Paid once: one transfer on chain under its id, and the agent's balance down by 30, once
          // (below the threshold, its transfers are checked against the balance at once).
          const sealed = Schema.decodeUnknownSync(SealedHeld)(
            (yield* send(`${server.baseUrl}/v1/agents/transactions/${held.transaction_id}/sealed`, { headers: bearer(owner.api_key) })).json
          )
          assert.strictEqual(yield* transfersOnChain(server, sealed.contract as Hex, sealed.binding_id as Hex), 1)
          expectEnvelope(yield* pay("10.000001"), 402, "insufficient_balance")
          assert.strictEqual((yield* pay("10")).status, 201)
        }))
    }
  )
})
