/**
 * Handlers of the `agents` group: agent accounts, spend policies and approvals
 * (D21-D29).
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import type { Principal } from "@pps/api/ApiKeys"
import { CurrentPrincipal, PublicApi } from "@pps/api/Api"
import { Agents } from "./Agents.ts"
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
    return handlers
      .handle("create", ({ payload }) => withPrincipal((principal) => agents.create(principal, payload)))
      .handle("list", () =>
        withPrincipal((principal) =>
          agents.list(principal).pipe(Effect.map((list) => ({ agents: list })))))
      .handle("getPolicy", ({ params }) =>
        withPrincipal((principal) => agents.getPolicy(principal, params.account_id)))
      .handle("patchPolicy", ({ params, payload }) =>
        withPrincipal((principal) => agents.patchPolicy(principal, params.account_id, payload)))
      .handle("pending", () =>
        withPrincipal((principal) =>
          approvals.pending(principal).pipe(Effect.map((pending) => ({ pending })))))
      .handle("sealedTransaction", ({ params }) =>
        withPrincipal((principal) => approvals.sealed(principal, params.transaction_id)))
      .handle("approve", ({ params }) =>
        withPrincipal((principal) => approvals.approve(principal, params.transaction_id)))
      .handle("reject", ({ params }) =>
        withPrincipal((principal) => approvals.reject(principal, params.transaction_id)))
  }))
