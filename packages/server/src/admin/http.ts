/**
 * Handlers of the admin API and its token check.
 *
 * @since 0.1.0
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto"
import { Effect, Layer, Option, Redacted } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Accounts } from "../accounts/Accounts.ts"
import { canonicalHandle, displayHandle, toAccountRecord } from "@pps/api/Accounts"
import { AgentStore } from "../agents/AgentStore.ts"
import { ApiKeys } from "../apikeys/ApiKeys.ts"
import { DashboardAuth } from "../dashboard/DashboardAuth.ts"
import { DashboardConfig } from "../dashboard/DashboardConfig.ts"
import { AccountNotFound, ApiKeyNotFound, HandleTaken, InvalidRequest, Unauthorized } from "@pps/api/Errors"
import { Secrets } from "../platform/Secrets.ts"
import { AdminApi, AdminAuthorization } from "./api.ts"

/**
 * Compares the presented token with `ADMIN_TOKEN` in constant time (both are
 * first hashed under a per-process key, so lengths do not leak either).
 *
 * @since 0.1.0
 * @category layers
 */
export const AdminAuthorizationLive = Layer.effect(
  AdminAuthorization,
  Effect.gen(function*() {
    const secrets = yield* Secrets
    const compareKey = randomBytes(32)
    const digest = (value: string) => createHmac("sha256", compareKey).update(value, "utf8").digest()
    const expected = digest(Redacted.value(secrets.adminToken))
    return AdminAuthorization.of({
      bearer: (httpEffect, { credential }) =>
        timingSafeEqual(digest(Redacted.value(credential)), expected)
          ? httpEffect
          : Effect.fail(Unauthorized.of("Missing or invalid admin token."))
    })
  })
)

/** The name of the key `accounts create` issues with a new account. */
const firstKeyName = "default"

/**
 * @since 0.1.0
 * @category layers
 */
export const AdminHttpLive = HttpApiBuilder.group(AdminApi, "admin", (handlers) =>
  Effect.gen(function*() {
    const accounts = yield* Accounts
    const apiKeys = yield* ApiKeys
    const agents = yield* AgentStore
    const dashboardAuth = yield* DashboardAuth
    const dashboardConfig = yield* DashboardConfig
    const requireAccount = (accountId: string) =>
      accounts.get(accountId).pipe(
        Effect.orDie,
        Effect.flatMap(Option.match({
          onNone: () => Effect.fail(AccountNotFound.of(accountId)),
          onSome: Effect.succeed
        }))
      )
    return handlers
      .handle("createAccount", ({ payload }) =>
        Effect.gen(function*() {
          const handle = canonicalHandle(payload.handle)
          if (handle === undefined) {
            return yield* Effect.fail(InvalidRequest.of(
              "A handle is 3-30 characters of a-z, 0-9, '_', '-' and '.'.",
              { param: "handle" }
            ))
          }
          const account = yield* accounts.create({
            handle,
            type: payload.type ?? "personal",
            kycStatus: payload.kyc_status ?? "unverified"
          }).pipe(
            Effect.catchTag("HandleConflict", () => Effect.fail(HandleTaken.of(handle))),
            Effect.catchTag("SqlError", Effect.die)
          )
          const key = yield* apiKeys.issue(account.accountId, firstKeyName, "test").pipe(Effect.orDie)
          return {
            account_id: account.accountId,
            handle: displayHandle(account.handle),
            key_id: key.keyId,
            api_key: Redacted.value(key.apiKey)
          }
        }))
      .handle("getAccount", ({ params }) => requireAccount(params.account_id).pipe(Effect.map(toAccountRecord)))
      .handle("setKyc", ({ params, payload }) =>
        accounts.setKycStatus(params.account_id, payload.status).pipe(
          Effect.orDie,
          Effect.flatMap(Option.match({
            onNone: () => Effect.fail(AccountNotFound.of(params.account_id)),
            onSome: (account) => Effect.succeed(toAccountRecord(account))
          }))
        ))
      .handle("inviteAccount", ({ params }) =>
        dashboardAuth.invite(params.account_id).pipe(
          Effect.orDie,
          Effect.flatMap(Option.match({
            // Agents have no dashboard of their own (D21): their owner's serves them.
            onNone: () => Effect.fail(AccountNotFound.of(params.account_id)),
            onSome: (invite) =>
              Effect.succeed({
                account_id: params.account_id,
                // The token travels in the fragment, which browsers never send to a server or a log.
                url: `${dashboardConfig.origin}/dashboard/enroll#invite=${invite.token}`,
                expires_at: new Date(invite.expiresAtMs).toISOString()
              })
          }))
        ))
      .handle("createKey", ({ payload }) =>
        Effect.gen(function*() {
          yield* requireAccount(payload.account_id)
          // D38: an agent acts in its own mode only. Its key's mode decides the chain its
          // transfers go to, so a key of the other mode would let it spend outside the
          // mode its owner set its policy in; its keys default to its mode.
          const agent = yield* agents.findAgent(payload.account_id).pipe(Effect.orDie)
          const agentMode = Option.map(agent, (found) => found.mode)
          if (Option.isSome(agentMode) && payload.mode !== undefined && payload.mode !== agentMode.value) {
            return yield* Effect.fail(InvalidRequest.of(
              `This agent was created in ${agentMode.value} mode; its keys are ${agentMode.value} keys only.`,
              { param: "mode" }
            ))
          }
          const mode = payload.mode ?? Option.getOrElse(agentMode, () => "test" as const)
          const key = yield* apiKeys.issue(payload.account_id, payload.name, mode).pipe(Effect.orDie)
          return { key_id: key.keyId, name: key.name, mode: key.mode, api_key: Redacted.value(key.apiKey) }
        }))
      .handle("listKeys", ({ params }) =>
        Effect.gen(function*() {
          yield* requireAccount(params.account_id)
          // Counts still in memory are written first, so the list is current.
          yield* apiKeys.flushUsage
          return { data: yield* apiKeys.list(params.account_id).pipe(Effect.orDie) }
        }))
      .handle("revokeKey", ({ params }) =>
        apiKeys.revoke(params.key_id).pipe(
          Effect.orDie,
          Effect.flatMap(Option.match({
            onNone: () => Effect.fail(ApiKeyNotFound.of(params.key_id)),
            onSome: () => Effect.succeed({ key_id: params.key_id, revoked: true as const })
          }))
        ))
  }))
