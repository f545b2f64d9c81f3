/**
 * Agent accounts and their spend policies (D21, D22, D24, D29).
 *
 * An agent is an account of type `agent` under its owner (handle
 * `owner/name`), with its own custodial wallet; its KYC and its encryption key
 * are its owner's (Transfers' `principalOf`), so the owner can decrypt what its
 * agents spend. The agent row, the account row and the policy are created in one
 * SQL transaction. Only the owner (never an agent key) creates agents and reads
 * or changes their policies; ownership is checked before a PATCH body is
 * validated, so a stranger learns nothing about a policy from validation errors.
 *
 * D38: an agent belongs to the mode of the key that created it. Every read and
 * change looks in the caller's mode only, and an agent of the other mode answers
 * as an unknown one (404), so a key does not even learn that it exists.
 *
 * @since 0.1.0
 */
import { Clock, Context, DateTime, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { Accounts } from "../accounts/Accounts.ts"
import { agentNamePattern, displayHandle } from "@pps/api/Accounts"
import type { Principal } from "@pps/api/ApiKeys"
import { Outbox } from "../events/Outbox.ts"
import { AgentNameTaken, AgentNotFound, InvalidPolicy, InvalidRequest, NotAgentOwner } from "@pps/api/Errors"
import { OperationReplay } from "../platform/IdempotentOperations.ts"
import { makeId } from "../platform/Ids.ts"
import { AgentStore, type StoredAgent } from "./AgentStore.ts"
import {
  type AgentRecord,
  type SpendPolicyRecord,
  toSpendPolicyRecord,
  validatePolicy
} from "@pps/api/Agents"

const toAgentRecord = (agent: StoredAgent): AgentRecord => ({
  account_id: agent.accountId,
  handle: displayHandle(agent.handle),
  public_key: agent.walletAddress,
  status: "active",
  spend_policy_id: agent.policyId
})

/**
 * D21: agent keys act for the agent and never for its owner.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isAgentKey = (principal: Principal): boolean => principal.accountType === "agent"

/**
 * @since 0.1.0
 * @category services
 */
export class Agents extends Context.Service<Agents, {
  readonly create: (
    principal: Principal,
    request: { readonly name: string; readonly spend_policy?: unknown }
  ) => Effect.Effect<AgentRecord, InvalidRequest | InvalidPolicy | NotAgentOwner | AgentNameTaken>
  readonly list: (principal: Principal) => Effect.Effect<ReadonlyArray<AgentRecord>>
  readonly getPolicy: (
    principal: Principal,
    agentAccountId: string
  ) => Effect.Effect<SpendPolicyRecord, AgentNotFound | NotAgentOwner>
  readonly patchPolicy: (
    principal: Principal,
    agentAccountId: string,
    patch: unknown
  ) => Effect.Effect<SpendPolicyRecord, InvalidPolicy | AgentNotFound | NotAgentOwner>
}>()("server/agents/Agents") {
  static readonly layer = Layer.effect(
    Agents,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const accounts = yield* Accounts
      const store = yield* AgentStore
      const outbox = yield* Outbox
      const operations = yield* OperationReplay

      // D36: a retried create whose first request was cut off answers with the agent it made.
      yield* operations.register("agent", (agentAccountId) =>
        store.findAgent(agentAccountId).pipe(
          Effect.orDie,
          Effect.map((agent) => ({ status: 201, body: toAgentRecord(Option.getOrThrow(agent)) }))
        ))

      /** D29: unknown id, or one of the other mode (D38), 404; not the caller's (an agent key never owns one) 403. */
      const ownedAgent = (principal: Principal, agentAccountId: string) =>
        Effect.gen(function*() {
          if (isAgentKey(principal)) return yield* Effect.fail(NotAgentOwner.of())
          const agent = yield* store.findInMode(agentAccountId, principal.mode).pipe(Effect.orDie)
          if (Option.isNone(agent)) return yield* Effect.fail(AgentNotFound.of(agentAccountId))
          if (agent.value.ownerAccountId !== principal.accountId) return yield* Effect.fail(NotAgentOwner.of())
          return agent.value
        })

      const create = Effect.fn("Agents.create")(function*(
        principal: Principal,
        request: { readonly name: string; readonly spend_policy?: unknown }
      ) {
        if (isAgentKey(principal)) return yield* Effect.fail(NotAgentOwner.of("Agent keys cannot create agents."))
        const name = request.name.toLowerCase()
        if (!agentNamePattern.test(name)) {
          return yield* Effect.fail(InvalidRequest.of("`name` is 1-32 characters of a-z, 0-9 and '-'.", { param: "name" }))
        }
        if (request.spend_policy === undefined) {
          return yield* Effect.fail(InvalidPolicy.of("spend_policy", "`spend_policy` is required."))
        }
        const validated = validatePolicy(request.spend_policy, undefined, "spend_policy.")
        if (!validated.ok) return yield* Effect.fail(InvalidPolicy.of(validated.issue.param, validated.issue.message))
        const owner = Option.getOrThrow(yield* accounts.get(principal.accountId).pipe(Effect.orDie))
        const nowMs = yield* Clock.currentTimeMillis
        const createdAt = DateTime.formatIso(DateTime.makeUnsafe(nowMs))
        const policyId = makeId("pol", nowMs)
        // The account's handle is unique, and owner/name is unique per owner: a conflict on
        // either is the same name taken.
        const agent = yield* sql.withTransaction(Effect.gen(function*() {
          const account = yield* accounts.create({
            handle: `${owner.handle}/${name}`,
            type: "agent",
            kycStatus: owner.kycStatus,
            ownerAccountId: owner.accountId
          })
          yield* store.insert({
            accountId: account.accountId,
            ownerAccountId: owner.accountId,
            name,
            mode: principal.mode,
            policyId,
            rules: validated.value,
            createdAt
          })
          yield* operations.bind("agent", account.accountId)
          return account
        })).pipe(
          Effect.catchTag("HandleConflict", () => Effect.fail(AgentNameTaken.of(name))),
          Effect.catchTag("SqlError", Effect.die)
        )
        return toAgentRecord({
          accountId: agent.accountId,
          ownerAccountId: owner.accountId,
          name,
          handle: agent.handle,
          walletAddress: agent.walletAddress,
          policyId,
          mode: principal.mode
        })
      })

      const patchPolicy = Effect.fn("Agents.patchPolicy")(function*(
        principal: Principal,
        agentAccountId: string,
        patch: unknown
      ) {
        const agent = yield* ownedAgent(principal, agentAccountId)
        const nowMs = yield* Clock.currentTimeMillis
        const updatedAt = DateTime.formatIso(DateTime.makeUnsafe(nowMs))
        // Read, validate and write in one transaction with the row locked: two PATCHes of
        // the same policy apply one after the other, each validated against the other's result.
        const updated = yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`SELECT 1 FROM spend_policies WHERE agent_account_id = ${agent.accountId} FOR UPDATE`
          const current = Option.getOrThrow(yield* store.policyOf(agent.accountId))
          const validated = validatePolicy(patch, current, "")
          if (!validated.ok) return yield* Effect.fail(InvalidPolicy.of(validated.issue.param, validated.issue.message))
          const policy = yield* store.updatePolicy(agent.accountId, validated.value, updatedAt)
          yield* outbox.append([{
            mode: agent.mode,
            recipientAccountId: agent.ownerAccountId,
            payload: {
              event: "agent.policy.updated",
              account: displayHandle(agent.handle),
              agent: displayHandle(agent.handle),
              policy_id: policy.policyId
            }
          }])
          return policy
        })).pipe(Effect.catchTag("SqlError", Effect.die))
        return toSpendPolicyRecord(updated)
      })

      return Agents.of({
        create,
        list: (principal) =>
          isAgentKey(principal)
            ? Effect.succeed([])
            : store.listByOwner(principal.accountId, principal.mode).pipe(Effect.orDie, Effect.map((agents) => agents.map(toAgentRecord))),
        getPolicy: (principal, agentAccountId) =>
          ownedAgent(principal, agentAccountId).pipe(
            Effect.flatMap((agent) => store.policyOf(agent.accountId).pipe(Effect.orDie)),
            Effect.map((policy) => toSpendPolicyRecord(Option.getOrThrow(policy)))
          ),
        patchPolicy
      })
    })
  )
}
