/**
 * Agent accounts and their spend policies (D21, D22, D24, D29).
 *
 * An agent is an account of type `agent` under its owner (handle
 * `owner/name`), with its own custodial wallet; its KYC and its encryption key
 * are its owner's (Transfers' `principalOf`), so the owner can decrypt what its
 * agents spend. The agent row, the account row and the policy are created in one
 * SQL transaction. Only the owner (never an agent key) creates agents and
 * changes their policies; an agent's own key may read its own policy (D42).
 * Ownership is checked before a PATCH body is validated, so a stranger learns
 * nothing about a policy from validation errors.
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
import { AgentLimitReached, AgentNameTaken, AgentNotFound, InvalidPolicy, InvalidRequest, NotAgentOwner } from "@pps/api/Errors"
import { AppConfig } from "../config/AppConfig.ts"
import { AuditLog } from "../audit/AuditLog.ts"
import { pageLimitDefault, pageOf } from "@pps/api/Page"
import { OperationReplay, type ReplayedResponse } from "../platform/IdempotentOperations.ts"
import * as Invariant from "../platform/Invariant.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import { answerServiceUnavailable, type DependencyUnavailable } from "../platform/Unavailable.ts"
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
 * The answer of a replayed operation (D36) whose record could not be read because the database is
 * down: the 503 a live request would get, so the retry is told to come back, not that we failed.
 *
 * @since 0.5.0
 * @category combinators
 */
export const replayedOrUnavailable = <R>(
  self: Effect.Effect<ReplayedResponse, DependencyUnavailable, R>
): Effect.Effect<ReplayedResponse, never, R> =>
  self.pipe(
    answerServiceUnavailable,
    Effect.catch((answer) => Effect.succeed({ status: 503, body: { error: answer.error } }))
  )

/**
 * @since 0.1.0
 * @category services
 */
export class Agents extends Context.Service<Agents, {
  readonly create: (
    principal: Principal,
    request: { readonly name: string; readonly spend_policy?: unknown }
  ) => Effect.Effect<
    AgentRecord,
    InvalidRequest | InvalidPolicy | NotAgentOwner | AgentNameTaken | AgentLimitReached | DependencyUnavailable
  >
  readonly list: (principal: Principal) => Effect.Effect<ReadonlyArray<AgentRecord>, DependencyUnavailable>
  /** D61: one page of `list`, in D16's envelope. */
  readonly page: (
    principal: Principal,
    query: { readonly limit?: number | undefined; readonly offset?: number | undefined }
  ) => Effect.Effect<AgentPageAnswer, DependencyUnavailable>
  readonly getPolicy: (
    principal: Principal,
    agentAccountId: string
  ) => Effect.Effect<SpendPolicyRecord, AgentNotFound | NotAgentOwner | DependencyUnavailable>
  readonly patchPolicy: (
    principal: Principal,
    agentAccountId: string,
    patch: unknown
  ) => Effect.Effect<SpendPolicyRecord, InvalidPolicy | AgentNotFound | NotAgentOwner | DependencyUnavailable>
}>()("server/agents/Agents") {
  static readonly layer = Layer.effect(
    Agents,
    Effect.gen(function*() {
      const context: AgentsContext = {
        sql: yield* SqlClient.SqlClient,
        accounts: yield* Accounts,
        store: yield* AgentStore,
        outbox: yield* Outbox,
        operations: yield* OperationReplay,
        agentsPerAccountMax: (yield* AppConfig).agentsPerAccountMax,
        auditLog: yield* AuditLog
      }
      // D36: a retried create whose first request was cut off answers with the agent it made.
      yield* context.operations.register("agent", (agentAccountId) => createdRecord(context, agentAccountId))
      return Agents.of({
        create: (principal, request) => create(context, principal, request),
        list: (principal) => list(context, principal),
        page: (principal, query) => page(context, principal, query),
        getPolicy: (principal, agentAccountId) => getPolicy(context, principal, agentAccountId),
        patchPolicy: (principal, agentAccountId, patch) => patchPolicy(context, principal, agentAccountId, patch)
      })
    })
  )
}

/** What the steps share: the services an agent's creation and policy need. */
interface AgentsContext {
  readonly sql: SqlClient.SqlClient
  readonly accounts: Accounts["Service"]
  readonly store: AgentStore["Service"]
  readonly outbox: Outbox["Service"]
  readonly operations: OperationReplay["Service"]
  readonly agentsPerAccountMax: number
  readonly auditLog: AuditLog["Service"]
}

/** D61's answer: D16's envelope of agent records. */
interface AgentPageAnswer {
  readonly data: ReadonlyArray<AgentRecord>
  readonly limit: number
  readonly offset: number
  readonly has_more: boolean
}

/** An agent's policy is created with it, in the same transaction. */
const policyExists = "every agent has a spend policy, created with it"

const createdRecord = ({ store }: AgentsContext, agentAccountId: string) =>
  store.findAgent(agentAccountId).pipe(
    Unavailable.database("Agents.createdRecord"),
    Effect.flatMap(Invariant.some("an agent bound to an idempotency key was created")),
    Effect.map((agent) => ({ status: 201, body: toAgentRecord(agent) })),
    replayedOrUnavailable
  )

/**
 * D29: an agent key never owns an agent (403, whatever the id); then an unknown id, or one of
 * the other mode (D38), is 404; an agent that is not the caller's is 403. Every step an owner
 * alone may take (a policy change, its keys) starts here.
 *
 * @since 0.9.0
 * @category combinators
 */
export const ownedAgent = ({ store }: { readonly store: AgentStore["Service"] }, principal: Principal, agentAccountId: string) =>
  Effect.gen(function*() {
    if (isAgentKey(principal)) return yield* Effect.fail(NotAgentOwner.of())
    const agent = yield* store.findInMode(agentAccountId, principal.mode).pipe(Unavailable.database("Agents.ownedAgent"))
    if (Option.isNone(agent)) return yield* Effect.fail(AgentNotFound.of(agentAccountId))
    if (agent.value.ownerAccountId !== principal.accountId) return yield* Effect.fail(NotAgentOwner.of())
    return agent.value
  })

const create = Effect.fn("Agents.create")(function*(
  context: AgentsContext,
  principal: Principal,
  request: { readonly name: string; readonly spend_policy?: unknown }
) {
  const { accounts, sql, store } = context
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
  const owner = yield* accounts.get(principal.accountId).pipe(
    Unavailable.database("Agents.create"),
    Effect.flatMap(Invariant.some("an authenticated principal's account exists"))
  )
  const nowMs = yield* Clock.currentTimeMillis
  const createdAt = DateTime.formatIso(DateTime.makeUnsafe(nowMs))
  const policyId = makeId("pol", nowMs)
  // The account's handle is unique, and owner/name is unique per owner: a conflict on
  // either is the same name taken.
  const agent = yield* sql.withTransaction(Effect.gen(function*() {
    // D61: counted with the owner's row locked, so concurrent creates cannot pass the cap together.
    const count = yield* store.countForCreate(owner.accountId, principal.mode)
    if (count >= context.agentsPerAccountMax) return yield* Effect.fail(AgentLimitReached.of(context.agentsPerAccountMax))
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
    yield* context.operations.bind("agent", account.accountId)
    yield* context.auditLog.record({ action: "agent.created", accountId: owner.accountId, targetId: account.accountId })
    return account
  })).pipe(
    Effect.catchTag("HandleConflict", () => Effect.fail(AgentNameTaken.of(name))),
    Unavailable.database("Agents.create")
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
  context: AgentsContext,
  principal: Principal,
  agentAccountId: string,
  patch: unknown
) {
  const { sql, store } = context
  const agent = yield* ownedAgent(context, principal, agentAccountId)
  const nowMs = yield* Clock.currentTimeMillis
  const updatedAt = DateTime.formatIso(DateTime.makeUnsafe(nowMs))
  // Read, validate and write in one transaction with the row locked: two PATCHes of
  // the same policy apply one after the other, each validated against the other's result.
  const updated = yield* sql.withTransaction(Effect.gen(function*() {
    yield* sql`SELECT 1 FROM spend_policies WHERE agent_account_id = ${agent.accountId} FOR UPDATE`
    const current = yield* Effect.flatMap(store.policyOf(agent.accountId), Invariant.some(policyExists))
    const validated = validatePolicy(patch, current, "")
    if (!validated.ok) return yield* Effect.fail(InvalidPolicy.of(validated.issue.param, validated.issue.message))
    const policy = yield* store.updatePolicy(agent.accountId, validated.value, updatedAt)
    yield* context.auditLog.record({ action: "policy.updated", accountId: agent.accountId, targetId: policy.policyId })
    yield* context.outbox.append([{
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
  })).pipe(Unavailable.database("Agents.patchPolicy"))
  return toSpendPolicyRecord(updated)
})

const list = ({ store }: AgentsContext, principal: Principal) =>
  isAgentKey(principal)
    ? Effect.succeed([])
    : store.listByOwner(principal.accountId, principal.mode).pipe(
      Unavailable.database("Agents.list"),
      Effect.map((agents) => agents.map(toAgentRecord))
    )

/** D61: one more row than the page is read, to tell whether another page follows. */
const page = (
  { store }: AgentsContext,
  principal: Principal,
  query: { readonly limit?: number | undefined; readonly offset?: number | undefined }
) => {
  const bounds = { limit: query.limit ?? pageLimitDefault, offset: query.offset ?? 0 }
  const rows = isAgentKey(principal)
    ? Effect.succeed([])
    : store.pageByOwner(principal.accountId, principal.mode, { limit: bounds.limit + 1, offset: bounds.offset }).pipe(
      Unavailable.database("Agents.page")
    )
  return rows.pipe(Effect.map((agents): AgentPageAnswer => pageOf(agents.map(toAgentRecord), bounds)))
}

/**
 * D42: an agent's key reads its own policy (it cannot change it); for any other id it is
 * refused as D29 says. Its own agent is of its key's mode (D38), so no mode check is needed.
 */
const readableAgentId = (context: AgentsContext, principal: Principal, agentAccountId: string) =>
  isAgentKey(principal) && agentAccountId === principal.accountId
    ? Effect.succeed(agentAccountId)
    : ownedAgent(context, principal, agentAccountId).pipe(Effect.map((agent) => agent.accountId))

const getPolicy = (context: AgentsContext, principal: Principal, agentAccountId: string) =>
  readableAgentId(context, principal, agentAccountId).pipe(
    Effect.flatMap((readable) => context.store.policyOf(readable).pipe(Unavailable.database("Agents.getPolicy"))),
    Effect.flatMap(Invariant.some(policyExists)),
    Effect.map(toSpendPolicyRecord)
  )
