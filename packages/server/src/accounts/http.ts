/**
 * Handlers of the `accounts` group.
 *
 * @since 0.1.0
 */
import { Effect, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { CurrentPrincipal, PublicApi } from "../http/Api.ts"
import { Accounts } from "./Accounts.ts"
import { toAccountRecord } from "./domain.ts"

/**
 * @since 0.1.0
 * @category layers
 */
export const AccountsHttpLive = HttpApiBuilder.group(PublicApi, "accounts", (handlers) =>
  Effect.gen(function*() {
    const accounts = yield* Accounts
    return handlers.handle("me", () =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        const account = yield* accounts.get(principal.accountId).pipe(Effect.orDie)
        // A verified key whose account is gone breaks a foreign key: a defect.
        return toAccountRecord(Option.getOrThrow(account))
      }))
  }))
