/**
 * Handlers of the `agents` group: agent accounts, spend policies, approvals
 * (D21-D29), agent keys (D44) and what an agent may read about itself (D42).
 *
 * @since 0.1.0
 */
import { Effect, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import type { Principal } from "@pps/api/ApiKeys"
import { CurrentPrincipal, PublicApi } from "@pps/api/Api"
import { Agents } from "./Agents.ts"
import { AgentKeys } from "./AgentKeys.ts"
import { Approvals } from "./Approvals.ts"
import { answerServiceUnavailable, DependencyUnavailable } from "../platform/Unavailable.ts"
import type { ServiceUnavailable } from "@pps/api/Errors"

/** Runs a handler body with the authenticated caller. */
const withPrincipal = <A, E, R>(
  body: (principal: Principal) => Effect.Effect<A, E | DependencyUnavailable, R>
): Effect.Effect<A, Exclude<E, DependencyUnavailable> | ServiceUnavailable, R | CurrentPrincipal> =>
  Effect.gen(function*() {
    return yield* body(yield* CurrentPrincipal)
  }).pipe(
    Effect.catchIf((error) => error instanceof DependencyUnavailable, (error) => answerServiceUnavailable(Effect.fail(error)), Effect.fail)
  )

/**
 * @since 0.1.0
 * @category layers
 */
export const AgentsHttpLive = HttpApiBuilder.group(PublicApi, "agents", (handlers) =>
  Effect.gen(function*() {
    const agents = yield* Agents
    const approvals = yield* Approvals
    const agentKeys = yield* AgentKeys
    return handlers
      .handle("create", ({ payload }) => withPrincipal((principal) => agents.create(principal, payload)))
      .handle("list", () =>
        withPrincipal((principal) =>
          agents.list(principal).pipe(Effect.map((list) => ({ agents: list })))))
      .handle("page", ({ query }) => withPrincipal((principal) => agents.page(principal, query)))
      .handle("getPolicy", ({ params }) =>
        withPrincipal((principal) => agents.getPolicy(principal, params.account_id)))
      .handle("createKey", ({ params, payload }) =>
        withPrincipal((principal) => agentKeys.create(principal, params.account_id, payload.name)))
      .handle("listKeys", ({ params }) =>
        withPrincipal((principal) => agentKeys.list(principal, params.account_id)))
      .handle("revokeKey", ({ params }) =>
        withPrincipal((principal) => agentKeys.revoke(principal, params.account_id, params.key_id)))
      .handle("rotateKey", ({ params, payload }) =>
        withPrincipal((principal) =>
          agentKeys.rotate(principal, params.account_id, params.key_id, Option.fromUndefinedOr(payload.name))))
      .handle("patchPolicy", ({ params, payload }) =>
        withPrincipal((principal) => agents.patchPolicy(principal, params.account_id, payload)))
      .handle("pending", () =>
        withPrincipal((principal) =>
          approvals.pending(principal).pipe(Effect.map((pending) => ({ pending })))))
      .handle("getTransaction", ({ params }) =>
        withPrincipal((principal) => approvals.read(principal, params.transaction_id)))
      .handle("sealedTransaction", ({ params }) =>
        withPrincipal((principal) => approvals.sealed(principal, params.transaction_id)))
      .handle("approve", ({ params }) =>
        withPrincipal((principal) => approvals.approve(principal, params.transaction_id)))
      .handle("reject", ({ params }) =>
        withPrincipal((principal) => approvals.reject(principal, params.transaction_id)))
  }))
