/**
 * Handlers of the admin API's loopback grants (D59, webhookLoopback.ts).
 *
 * @since 0.9.0
 */
import { Clock, DateTime, Effect, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { AccountNotFound } from "@pps/api/Errors"
import { Accounts } from "../accounts/Accounts.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import { WebhookStore } from "../webhooks/WebhookStore.ts"
import { AdminApi } from "./api.ts"

/**
 * @since 0.9.0
 * @category layers
 */
export const AdminWebhookLoopbackLive = HttpApiBuilder.group(AdminApi, "adminWebhookLoopback", (handlers) =>
  Effect.gen(function*() {
    const accounts = yield* Accounts
    const store = yield* WebhookStore
    const requireAccount = (accountId: string) =>
      accounts.get(accountId).pipe(
        Unavailable.database("Admin.webhookLoopback"),
        Effect.flatMap(Option.match({ onNone: () => Effect.fail(AccountNotFound.of(accountId)), onSome: Effect.succeed }))
      )
    return handlers
      .handle("setLoopback", ({ params, payload }) =>
        Effect.gen(function*() {
          yield* requireAccount(params.account_id)
          const at = DateTime.formatIso(DateTime.makeUnsafe(yield* Clock.currentTimeMillis))
          yield* store.setLoopbackGrant(params.account_id, payload.mode, payload.allowed, at).pipe(
            Unavailable.database("Admin.setLoopback")
          )
          yield* Effect.logInfo("webhook loopback grant changed").pipe(
            Effect.annotateLogs({ account_id: params.account_id, mode: payload.mode, allowed: payload.allowed })
          )
          return { account_id: params.account_id, mode: payload.mode, allowed: payload.allowed }
        }).pipe(Unavailable.answerServiceUnavailable))
      .handle("getLoopback", ({ params }) =>
        Effect.gen(function*() {
          yield* requireAccount(params.account_id)
          const data = yield* Effect.forEach(["test", "live"] as const, (mode) =>
            store.loopbackGranted(params.account_id, mode).pipe(
              Unavailable.database("Admin.getLoopback"),
              Effect.map((allowed) => ({ account_id: params.account_id, mode, allowed }))
            ))
          return { data }
        }).pipe(Unavailable.answerServiceUnavailable))
  }))
