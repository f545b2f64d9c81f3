/**
 * An owner's keys for its agents (D44): create, list and revoke the API keys an agent acts
 * with, without the operator.
 *
 * - Owner only: an agent key never manages keys (403 `not_agent_owner`, D21), and another
 *   owner's or another mode's agent answers as D29 and D38 rank it (`ownedAgent`).
 * - A key is of its agent's mode, which is the caller's (D38): a test key issues test keys.
 * - Its value is shown once (D8): the answer that creates it carries it and nothing keeps it. A
 *   retry with the same Idempotency-Key is answered from the key's record (409
 *   `key_shown_once` naming it), never with the value and never with a second key (D6, D36).
 * - A dashboard session creating one must have confirmed with its passkey recently (step-up,
 *   as for the holder's own keys); an owner's API key is not asked.
 * - Revocation is the one path every key takes (`ApiKeys.revoke`): evicted here and broadcast
 *   to the other nodes before the answer, so the next request with the key is 401.
 * - Replacement (D56, `ApiKeys.replace`): the new key and the old key's revocation commit in one
 *   transaction, then the old key is evicted and broadcast as a revocation is. An owner whose
 *   agent's key leaked gets a working key and a dead one in one call, with no moment in which
 *   the agent has none or both.
 *
 * @since 0.9.0
 */
import { AuditLog } from "../audit/AuditLog.ts"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { displayHandle } from "@pps/api/Accounts"
import type { ApiKeyRecord, CreatedAgentApiKey, Principal, RotatedAgentApiKey } from "@pps/api/ApiKeys"
import {
  type AgentNotFound,
  ApiKeyNotFound,
  KeyShownOnce,
  type NotAgentOwner,
  type ReauthenticationRequired
} from "@pps/api/Errors"
import { Accounts } from "../accounts/Accounts.ts"
import { ApiKeys, type IssuedApiKey } from "../apikeys/ApiKeys.ts"
import { requireStepUp } from "../dashboard/DashboardAuth.ts"
import { OperationReplay } from "../platform/IdempotentOperations.ts"
import * as Invariant from "../platform/Invariant.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import type { DependencyUnavailable } from "../platform/Unavailable.ts"
import { ownedAgent } from "./Agents.ts"
import { AgentStore } from "./AgentStore.ts"

/**
 * @since 0.9.0
 * @category services
 */
export class AgentKeys extends Context.Service<AgentKeys, {
  readonly create: (
    principal: Principal,
    agentAccountId: string,
    name: string
  ) => Effect.Effect<CreatedAgentApiKey, AgentNotFound | NotAgentOwner | ReauthenticationRequired | DependencyUnavailable>
  readonly list: (
    principal: Principal,
    agentAccountId: string
  ) => Effect.Effect<{ readonly data: ReadonlyArray<ApiKeyRecord> }, AgentNotFound | NotAgentOwner | DependencyUnavailable>
  readonly revoke: (
    principal: Principal,
    agentAccountId: string,
    keyId: string
  ) => Effect.Effect<{ readonly key_id: string; readonly revoked: true }, AgentNotFound | NotAgentOwner | ApiKeyNotFound | DependencyUnavailable>
  readonly rotate: (
    principal: Principal,
    agentAccountId: string,
    keyId: string,
    name: Option.Option<string>
  ) => Effect.Effect<
    RotatedAgentApiKey,
    AgentNotFound | NotAgentOwner | ApiKeyNotFound | ReauthenticationRequired | DependencyUnavailable
  >
}>()("server/agents/AgentKeys") {
  static readonly layer = Layer.effect(
    AgentKeys,
    Effect.gen(function*() {
      const context: AgentKeysContext = {
        sql: yield* SqlClient.SqlClient,
        store: yield* AgentStore,
        accounts: yield* Accounts,
        apiKeys: yield* ApiKeys,
        operations: yield* OperationReplay,
        auditLog: yield* AuditLog
      }
      // D44: a retried create never shows the value again (it is not kept) nor makes a second key.
      yield* context.operations.register("api_key", (keyId) =>
        Effect.succeed({ status: KeyShownOnce.status, body: { error: KeyShownOnce.of(keyId).error } }))
      return AgentKeys.of({
        create: (principal, agentAccountId, name) => create(context, principal, agentAccountId, name),
        list: (principal, agentAccountId) => list(context, principal, agentAccountId),
        revoke: (principal, agentAccountId, keyId) => revoke(context, principal, agentAccountId, keyId),
        rotate: (principal, agentAccountId, keyId, name) => rotate(context, principal, agentAccountId, keyId, name)
      })
    })
  )
}

/** What the steps share. */
interface AgentKeysContext {
  readonly sql: SqlClient.SqlClient
  readonly store: AgentStore["Service"]
  readonly accounts: Accounts["Service"]
  readonly apiKeys: ApiKeys["Service"]
  readonly operations: OperationReplay["Service"]
  readonly auditLog: AuditLog["Service"]
}

/** The owner's wallet address: the agents' amounts are sealed to the key registered for it. */
const ownerAddress = (context: AgentKeysContext, principal: Principal, step: string) =>
  context.accounts.get(principal.accountId).pipe(
    Unavailable.database(step),
    Effect.flatMap(Invariant.some("an authenticated principal's account exists")),
    Effect.map((owner) => owner.walletAddress)
  )

/** The answer that carries a new key's value (D44: this once). */
const answerOf = (
  issued: IssuedApiKey,
  agent: { readonly accountId: string; readonly handle: string },
  walletAddress: string
): CreatedAgentApiKey => ({
  key_id: issued.keyId,
  name: issued.name,
  mode: issued.mode,
  api_key: Redacted.value(issued.apiKey),
  account_id: agent.accountId,
  agent: displayHandle(agent.handle),
  owner_address: walletAddress
})

const create = Effect.fn("AgentKeys.create")(function*(
  context: AgentKeysContext,
  principal: Principal,
  agentAccountId: string,
  name: string
) {
  const agent = yield* ownedAgent(context, principal, agentAccountId)
  // After ownership: a stranger's probe is answered 404/403, not with a passkey prompt.
  yield* requireStepUp
  const walletAddress = yield* ownerAddress(context, principal, "AgentKeys.create")
  // The key's row and the idempotency key's link to it commit together (D36), and the answer
  // that carries the value is not stored for replay.
  const issued = yield* context.sql.withTransaction(Effect.gen(function*() {
    const issued = yield* context.apiKeys.issue(agent.accountId, name, agent.mode)
    yield* context.operations.bindShownOnce("api_key", issued.keyId)
    yield* context.auditLog.record({ action: "api_key.created", accountId: agent.accountId, targetId: issued.keyId })
    return issued
  })).pipe(Unavailable.database("AgentKeys.create"))
  yield* Effect.logInfo("agent api key created by its owner").pipe(
    Effect.annotateLogs({ key_id: issued.keyId, agent_account_id: agent.accountId })
  )
  return answerOf(issued, agent, walletAddress)
})

/**
 * D56: a new key for the agent and the old one revoked, in one transaction (`ApiKeys.replace`).
 * The new key is named as the old one unless a name is given. Only an active key of the agent's
 * mode is replaced: a revoked one is 404 `key_not_found` (a retry without an Idempotency-Key must
 * not make a second new key), as is another account's.
 */
const rotate = Effect.fn("AgentKeys.rotate")(function*(
  context: AgentKeysContext,
  principal: Principal,
  agentAccountId: string,
  keyId: string,
  name: Option.Option<string>
) {
  const agent = yield* ownedAgent(context, principal, agentAccountId)
  yield* requireStepUp
  const walletAddress = yield* ownerAddress(context, principal, "AgentKeys.rotate")
  const keys = yield* context.apiKeys.list(agent.accountId).pipe(Unavailable.database("AgentKeys.rotate"))
  const old = keys.find((key) => key.key_id === keyId && key.mode === agent.mode && key.revoked_at === null)
  if (old === undefined) return yield* Effect.fail(ApiKeyNotFound.of(keyId))
  const holder = { accountId: agent.accountId, mode: agent.mode }
  const replaced = yield* context.apiKeys.replace(
    keyId,
    holder,
    Option.getOrElse(name, () => old.name),
    (issued) => context.operations.bindShownOnce("api_key", issued.keyId)
  ).pipe(Unavailable.database("AgentKeys.rotate"))
  // Revoked by a concurrent call between the read and the transaction: nothing was written.
  if (Option.isNone(replaced)) return yield* Effect.fail(ApiKeyNotFound.of(keyId))
  yield* Effect.logInfo("agent api key replaced by its owner").pipe(
    Effect.annotateLogs({ key_id: replaced.value.keyId, replaced_key_id: keyId, agent_account_id: agent.accountId })
  )
  return { ...answerOf(replaced.value, agent, walletAddress), replaced_key_id: keyId }
})

/** The agent's keys of its mode; this node's counted usage first, so the figures are current. */
const list = Effect.fn("AgentKeys.list")(function*(context: AgentKeysContext, principal: Principal, agentAccountId: string) {
  const agent = yield* ownedAgent(context, principal, agentAccountId)
  yield* context.apiKeys.flushUsage
  const keys = yield* context.apiKeys.list(agent.accountId).pipe(Unavailable.database("AgentKeys.list"))
  return { data: keys.filter((key) => key.mode === agent.mode) }
})

/**
 * Revoked at once (`ApiKeys.revoke`). A key of the agent's that is revoked already answers as a
 * revocation does: the retry of a revocation whose answer was lost finds what it asked for.
 */
const revoke = Effect.fn("AgentKeys.revoke")(function*(
  context: AgentKeysContext,
  principal: Principal,
  agentAccountId: string,
  keyId: string
) {
  const agent = yield* ownedAgent(context, principal, agentAccountId)
  const holder = { accountId: agent.accountId, mode: agent.mode }
  const revoked = yield* context.apiKeys.revoke(keyId, holder).pipe(Unavailable.database("AgentKeys.revoke"))
  if (Option.isNone(revoked)) {
    const keys = yield* context.apiKeys.list(agent.accountId).pipe(Unavailable.database("AgentKeys.revoke"))
    const revokedBefore = keys.some((key) => key.key_id === keyId && key.mode === agent.mode && key.revoked_at !== null)
    if (!revokedBefore) return yield* Effect.fail(ApiKeyNotFound.of(keyId))
  } else {
    yield* context.auditLog.record({ action: "api_key.revoked", accountId: agent.accountId, targetId: keyId }).pipe(
      Unavailable.database("AgentKeys.revoke")
    )
    yield* Effect.logInfo("agent api key revoked by its owner").pipe(
      Effect.annotateLogs({ key_id: keyId, agent_account_id: agent.accountId })
    )
  }
  return { key_id: keyId, revoked: true as const }
})
