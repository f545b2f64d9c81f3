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
import { Context, Effect, Option } from "effect"
import { SqlClient } from "effect/sql"
import { AgentTransactionRecord } from "@pps/api/Agents"
import { DevChain } from "../src/settlement/DevChain.ts"
import { chainPasses, heldAgentTransfer, heldRow, recordAgain, stopAtRecord } from "./support/heldApprovals.ts"
import { bearer, decodeAnswer as decode, expectEnvelope, patchJson, postJson, send } from "./support/http.ts"
import { makeTestServer, TestServer, type TestServerShape } from "./support/TestServer.ts"

/**
 * Short, so a test can outlive an attestation; long enough for a funding transfer to be mined,
 * and for a retry to reach the guardian within the 8 s (half of it) in which a pinned deadline is
 * no longer reused but still alive.
 */
const attestationLifetimeSeconds = 16

/**
 * The early retry goes this long before the first deadline: inside the half of the lifetime where
 * the deadline is no longer reused, with room for a loaded machine to stall (a retry that reached
 * the guardian after the deadline would be decided afresh, and the 409 would not be seen).
 */
const earlyRetryMarginMs = 6_500

const sqlOf = (server: TestServerShape) => Context.get(server.services, SqlClient.SqlClient)

const rpcUrlOf = (server: TestServerShape) => Option.getOrThrow(Context.get(server.services, DevChain).rpcUrl)

/**
 * A held agent transfer (support/heldApprovals.ts) whose approval the guardian attested and
 * whose process died before the record.
 */
const approvalThatDied = (server: TestServerShape, prefix: string) =>
  Effect.gen(function*() {
    const transfer = yield* heldAgentTransfer(server, sqlOf(server), prefix)
    yield* stopAtRecord(sqlOf(server), transfer.transferId, "fail")
    expectEnvelope(yield* transfer.approve, 503, "service_unavailable")
    yield* recordAgain(sqlOf(server))
    const pinned = yield* heldRow(sqlOf(server), transfer.held.transaction_id)
    assert.strictEqual(pinned.status, "pending_approval")
    assert.isNotNull(pinned.approval_deadline_seconds)
    return { ...transfer, chain: transfer.onChain(rpcUrlOf(server)), deadlineSeconds: BigInt(pinned.approval_deadline_seconds!) }
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
          const waitMs = Number(deadlineSeconds) * 1000 - earlyRetryMarginMs - Date.now()
          if (waitMs > 0) yield* Effect.sleep(waitMs)
          const early = expectEnvelope(yield* approve, 409, "approval_in_progress")
          assert.include(early.message, new Date(Number(deadlineSeconds) * 1000).toISOString())
          assert.strictEqual((yield* heldRow(sqlOf(server), held.transaction_id)).status, "pending_approval")

          // Retried once the first attestation's deadline has passed, on the chain too.
          yield* chainPasses(rpcUrlOf(server), deadlineSeconds)
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
          yield* chainPasses(rpcUrlOf(server), deadlineSeconds)
          const refused = expectEnvelope(yield* approve, 403, "policy_violation")
          assert.strictEqual(refused.reason, "per_transaction_limit_exceeded")
          assert.strictEqual((yield* heldRow(sqlOf(server), held.transaction_id)).status, "pending_approval")

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

