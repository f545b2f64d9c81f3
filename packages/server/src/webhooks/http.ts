/**
 * Handlers of the `webhooks` group.
 *
 * A database that does not answer is an outage, not the caller's fault nor a bug: it is
 * answered 503 `service_unavailable` with `Retry-After` (platform/Unavailable.ts).
 *
 * Agent keys manage no subscriptions (403 `not_agent_owner`): an agent's events
 * go to its owner's subscriptions (D30), so a subscription of the agent's own
 * would be accepted and then never receive anything. Refusing says so at once,
 * and keeps the owner, who answers for the agent, the only one who decides where
 * its events are sent.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { isAgentKey } from "../agents/Agents.ts"
import { CurrentPrincipal, PublicApi } from "@pps/api/Api"
import { NotAgentOwner } from "@pps/api/Errors"
import { pageLimitDefault } from "@pps/api/Page"
import { answerServiceUnavailable } from "../platform/Unavailable.ts"
import { type Owner, Webhooks } from "./Webhooks.ts"

const currentOwner = Effect.gen(function*() {
  const principal = yield* CurrentPrincipal
  if (isAgentKey(principal)) {
    return yield* Effect.fail(NotAgentOwner.of(
      "Agent keys cannot manage webhook subscriptions: an agent's events go to its owner's subscriptions."
    ))
  }
  return { accountId: principal.accountId, mode: principal.mode } satisfies Owner
})

/**
 * @since 0.1.0
 * @category layers
 */
export const WebhooksHttpLive = HttpApiBuilder.group(PublicApi, "webhooks", (handlers) =>
  Effect.gen(function*() {
    const webhooks = yield* Webhooks
    return handlers
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          return yield* webhooks.create(yield* currentOwner, payload)
        }).pipe(answerServiceUnavailable))
      .handle("list", () =>
        Effect.gen(function*() {
          return { data: yield* webhooks.list(yield* currentOwner) }
        }).pipe(answerServiceUnavailable))
      .handle("get", ({ params }) =>
        Effect.gen(function*() {
          return yield* webhooks.get(yield* currentOwner, params.webhook_id)
        }).pipe(answerServiceUnavailable))
      .handle("update", ({ params, payload }) =>
        Effect.gen(function*() {
          return yield* webhooks.update(yield* currentOwner, params.webhook_id, payload)
        }).pipe(answerServiceUnavailable))
      .handle("remove", ({ params }) =>
        Effect.gen(function*() {
          yield* webhooks.remove(yield* currentOwner, params.webhook_id)
        }).pipe(answerServiceUnavailable))
      .handle("rotateSecret", ({ params }) =>
        Effect.gen(function*() {
          return yield* webhooks.rotateSecret(yield* currentOwner, params.webhook_id)
        }).pipe(answerServiceUnavailable))
      .handle("deliveries", ({ params, query }) =>
        Effect.gen(function*() {
          return yield* webhooks.deliveries(yield* currentOwner, params.webhook_id, {
            limit: query.limit ?? pageLimitDefault,
            offset: query.offset ?? 0
          })
        }).pipe(answerServiceUnavailable))
      .handle("replay", ({ params }) =>
        Effect.gen(function*() {
          return yield* webhooks.replay(yield* currentOwner, params.webhook_id, params.event_id)
        }).pipe(answerServiceUnavailable))
  }))
