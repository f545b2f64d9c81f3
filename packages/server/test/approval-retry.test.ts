/**
 * D45 over a real socket, on embedded anvil and the in-process guardian: an owner's approval
 * whose process died after the guardian attested it and before the server recorded it, retried
 * once that attestation's deadline has passed, gets a fresh decision under the balance and policy
 * of the moment, and the transfer is paid once or not at all; retried while that attestation can
 * still be mined, it answers 409 `approval_in_progress` and the transaction stays pending.
 *
 * The death is reproduced at its exact line: the database refuses the record's insert of this
 * one transfer (a trigger), so the record's transaction rolls back after the guardian committed
 * its reservation, which is the state a process killed at that line leaves behind (what a dead
 * process held in memory is gone either way). The attestation's lifetime is configured short
 * (`attestationLifetimeSeconds`), so "after the lifetime" is seconds of real time: the chain's
 * clock is anvil's, and must pass the deadline too.
 */
import { assert, describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { createPublicClient, getAddress, type Hex, http } from "viem"
import { ConfidentialTokenArtifact } from "@pps/contracts"
import { AgentTransactionRecord } from "@pps/api/Agents"
import { DevChain } from "../src/settlement/DevChain.ts"
import { ownerWithAgent } from "./support/agents.ts"
import { registerKey } from "./support/confidentialClient.ts"
import { bearer, createAccount, decodeAnswer as decode, expectEnvelope, patchJson, postJson, send } from "./support/http.ts"
import { makeTestServer, TestServer, type TestServerShape } from "./support/TestServer.ts"

/**
 * Short, so a test can outlive an attestation; long enough for a funding transfer to be mined,
 * and for a retry to reach the guardian within the 5 s (half of it) in which a pinned deadline is
 * no longer reused but still alive.
 */
const attestationLifetimeSeconds = 10

const sqlOf = (server: TestServerShape) => Context.get(server.services, SqlClient.SqlClient)

const chainClient = (server: TestServerShape) =>
  createPublicClient({ transport: http(Option.getOrThrow(Context.get(server.services, DevChain).rpcUrl)) })

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

/** The held row as the approval left it: its transfer id, nonce, the deadline it pinned, its status. */
const heldRow = (server: TestServerShape, transactionId: string) =>
  Effect.gen(function*() {
    const rows = yield* sqlOf(server)<{
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
const chainPasses = (server: TestServerShape, deadlineSeconds: bigint) =>
  Effect.gen(function*() {
    const client = chainClient(server)
    for (;;) {
      const block = yield* Effect.promise(() => client.getBlock({ blockTag: "latest" }))
      if (block.timestamp > deadlineSeconds) return
      yield* Effect.sleep("250 millis")
    }
  })

const SealedHeld = Schema.Struct({ contract: Schema.String, binding_id: Schema.String })

/** What the chain holds of a held transfer: how many transfers it applied under its id, and whether its nonce is used. */
const onChain = (server: TestServerShape, ownerKey: string, transactionId: string, agentWallet: string, nonce: bigint) =>
  Effect.gen(function*() {
    const sealed = Schema.decodeUnknownSync(SealedHeld)(
      (yield* send(`${server.baseUrl}/v1/agents/transactions/${transactionId}/sealed`, { headers: bearer(ownerKey) })).json
    )
    const client = chainClient(server)
    const logs = yield* Effect.promise(() =>
      client.request({ method: "eth_getLogs", params: [{ address: sealed.contract as Hex, fromBlock: "0x0", toBlock: "latest" }] })
    )
    const nonceUsed = yield* Effect.promise(() =>
      client.readContract({
        address: getAddress(sealed.contract),
        abi: ConfidentialTokenArtifact.abi,
        functionName: "isNonceUsed",
        args: [getAddress(agentWallet), nonce]
      })
    )
    return {
      transfers: logs.filter((log) => log.topics[3]?.toLowerCase() === sealed.binding_id.toLowerCase()).length,
      nonceUsed
    }
  })

/**
 * An owner, its agent (40 USDG; transfers above 25 held) and a recipient; the agent's transfer of
 * 30, held; its approval attested by the guardian, the process dying before the record.
 */
const approvalThatDied = (server: TestServerShape, prefix: string) =>
  Effect.gen(function*() {
    const bob = yield* createAccount(server, `${prefix}.bob`)
    yield* registerKey(server.baseUrl, bob.api_key)
    const { agent, agentKey, owner } = yield* ownerWithAgent(server, `${prefix}.olga`, {
      daily_limit_usdg: 100,
      per_transaction_limit_usdg: 50,
      hitl_threshold_usdg: 25
    }, { faucetUsdg: "100", fundAgentUsdg: "40" })
    const pay = (amount: string) => send(`${server.baseUrl}/v1/transfers`, postJson(bearer(agentKey), { to: `@${prefix}.bob`, amount }))
    const held = decode(AgentTransactionRecord, yield* pay("30"), 202)
    // Under one Idempotency-Key, as a careful client retries (D6, D36).
    const approve = send(
      `${server.baseUrl}/v1/agents/transactions/${held.transaction_id}/approve`,
      postJson({ ...bearer(owner.api_key), "idempotency-key": `approve-${prefix}` }, {})
    )
    const { transfer_id: transferId } = yield* heldRow(server, held.transaction_id)

    yield* dieAtRecord(server, transferId)
    expectEnvelope(yield* approve, 503, "service_unavailable")
    yield* restart(server)
    const pinned = yield* heldRow(server, held.transaction_id)
    assert.strictEqual(pinned.status, "pending_approval")
    assert.isNotNull(pinned.approval_deadline_seconds)
    const chain = onChain(server, owner.api_key, held.transaction_id, agent.public_key, BigInt(pinned.replay_nonce))
    return { agent, owner, pay, approve, held, transferId, chain, deadlineSeconds: BigInt(pinned.approval_deadline_seconds!) }
  })

describe("an approval retried after its process died mid-approval (D45)", () => {
  layer(makeTestServer({ config: { attestationLifetimeSeconds } }), { timeout: "180 seconds", excludeTestServices: true })(
    "embedded",
    (it) => {
      it.effect("409 while the first attestation can be mined, then a fresh decision: the transfer paid once", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const { approve, chain, deadlineSeconds, held, owner, pay, transferId } = yield* approvalThatDied(server, "late")

          // Retried with less than half the lifetime left: a fresh deadline, and the first
          // attestation still alive: not decided again until it is dead.
          const waitMs = Number(deadlineSeconds) * 1000 - 4_000 - Date.now()
          if (waitMs > 0) yield* Effect.sleep(waitMs)
          const early = expectEnvelope(yield* approve, 409, "approval_in_progress")
          assert.include(early.message, new Date(Number(deadlineSeconds) * 1000).toISOString())
          assert.strictEqual((yield* heldRow(server, held.transaction_id)).status, "pending_approval")

          // Retried once the first attestation's deadline has passed, on the chain too.
          yield* chainPasses(server, deadlineSeconds)
          const approved = decode(AgentTransactionRecord, yield* approve, 200)
          expect(approved).toMatchObject({ status: "approved", transfer_id: transferId, transfer_status: "confirmed" })

          // Paid once: one transfer on chain under its id, its one nonce used (the first
          // attestation, under the same nonce, can never be applied), and the agent's balance
          // down by 30 once (below the threshold its transfers are checked against it at once).
          expect(yield* chain).toEqual({ transfers: 1, nonceUsed: true })
          expectEnvelope(yield* pay("10.000001"), 402, "insufficient_balance")
          assert.strictEqual((yield* pay("10")).status, 201)
          // The key now names the approval: replayed. Without it, approving again is 404, as for
          // any approved transaction.
          const replayed = yield* approve
          assert.strictEqual(replayed.headers.get("idempotent-replayed"), "true")
          expect(replayed.json).toMatchObject({ status: "approved", transfer_id: transferId })
          expectEnvelope(
            yield* send(`${server.baseUrl}/v1/agents/transactions/${held.transaction_id}/approve`, postJson(bearer(owner.api_key), {})),
            404,
            "transaction_not_found"
          )
        }))

      it.effect("the fresh decision applies the policy of the moment; refused, the transaction stays pending and nothing is paid", () =>
        Effect.gen(function*() {
          const server = yield* TestServer
          const { agent, approve, chain, deadlineSeconds, held, owner, pay } = yield* approvalThatDied(server, "lower")
          // Meanwhile the owner lowers the per-transaction limit below the held amount.
          const patched = yield* send(
            `${server.baseUrl}/v1/agents/${agent.account_id}/spend-policy`,
            patchJson(bearer(owner.api_key), { per_transaction_limit_usdg: 29 })
          )
          assert.strictEqual(patched.status, 200, patched.text)
          yield* chainPasses(server, deadlineSeconds)
          const refused = expectEnvelope(yield* approve, 403, "policy_violation")
          assert.strictEqual(refused.reason, "per_transaction_limit_exceeded")
          assert.strictEqual((yield* heldRow(server, held.transaction_id)).status, "pending_approval")

          // Rejected: no funds move, and none stay reserved (the whole 40 can be spent).
          const rejected = decode(
            AgentTransactionRecord,
            yield* send(`${server.baseUrl}/v1/agents/transactions/${held.transaction_id}/reject`, postJson(bearer(owner.api_key), {})),
            200
          )
          assert.strictEqual(rejected.status, "rejected")
          expect(yield* chain).toEqual({ transfers: 0, nonceUsed: false })
          assert.strictEqual((yield* pay("25")).status, 201)
          expectEnvelope(yield* pay("15.000001"), 402, "insufficient_balance")
          assert.strictEqual((yield* pay("15")).status, 201)
        }))
    }
  )
})

