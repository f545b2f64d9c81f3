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
import { SecretBox } from "../platform/SecretBox.ts"
import { Secrets } from "../platform/Secrets.ts"
import { Reseal } from "./Reseal.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import { answerServiceUnavailable } from "../platform/Unavailable.ts"
import type { KycStatus } from "@pps/api/Accounts"
import type { Mode } from "@pps/api/ApiKeys"
import { AdminApi, AdminAuthorization } from "./api.ts"

/**
 * Whether a presented token is `ADMIN_TOKEN`, compared in constant time (both are first hashed
 * under a per-process key, so lengths do not leak either). The admin API and the admin
 * listener's `/metrics` (observability/http.ts) share it.
 *
 * @since 0.9.0
 * @category constructors
 */
export const makeAdminTokenCheck = Effect.gen(function*() {
  const secrets = yield* Secrets
  const compareKey = randomBytes(32)
  const digest = (value: string) => createHmac("sha256", compareKey).update(value, "utf8").digest()
  const expected = digest(Redacted.value(secrets.adminToken))
  return (presented: string): boolean => timingSafeEqual(digest(presented), expected)
})

/**
 * The admin API's bearer check (`makeAdminTokenCheck`).
 *
 * @since 0.1.0
 * @category layers
 */
export const AdminAuthorizationLive = Layer.effect(
  AdminAuthorization,
  Effect.gen(function*() {
    const isAdminToken = yield* makeAdminTokenCheck
    return AdminAuthorization.of({
      bearer: (httpEffect, { credential }) =>
        isAdminToken(Redacted.value(credential))
          ? httpEffect
          : Effect.fail(Unauthorized.of("Missing or invalid admin token."))
    })
  })
)

/** The name of the key `accounts create` issues with a new account. */
const firstKeyName = "default"

/** What the handlers share. */
interface AdminContext {
  readonly reseal: Reseal["Service"]
  readonly box: SecretBox["Service"]
  readonly accounts: Accounts["Service"]
  readonly apiKeys: ApiKeys["Service"]
  readonly agents: AgentStore["Service"]
  readonly dashboardAuth: DashboardAuth["Service"]
  readonly dashboardConfig: DashboardConfig["Service"]
}

const requireAccount = ({ accounts }: AdminContext, accountId: string) =>
  accounts.get(accountId).pipe(
    Unavailable.database("Admin.requireAccount"),
    Effect.flatMap(Option.match({
      onNone: () => Effect.fail(AccountNotFound.of(accountId)),
      onSome: Effect.succeed
    }))
  )

const createAccount = (
  { accounts, apiKeys }: AdminContext,
  payload: { readonly handle: string; readonly type?: "personal" | "business" | undefined; readonly kyc_status?: KycStatus | undefined }
) =>
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
    }).pipe(Effect.catchTag("HandleConflict", () => Effect.fail(HandleTaken.of(handle))))
    const key = yield* apiKeys.issue(account.accountId, firstKeyName, "test")
    return {
      account_id: account.accountId,
      handle: displayHandle(account.handle),
      key_id: key.keyId,
      api_key: Redacted.value(key.apiKey)
    }
  }).pipe(Unavailable.database("Admin.createAccount"), answerServiceUnavailable)

const inviteAccount = ({ dashboardAuth, dashboardConfig }: AdminContext, accountId: string) =>
  dashboardAuth.invite(accountId).pipe(
    Unavailable.database("DashboardAuth.invite"),
    Effect.flatMap(Option.match({
      // Agents have no dashboard of their own (D21): their owner's serves them.
      onNone: () => Effect.fail(AccountNotFound.of(accountId)),
      onSome: (invite) =>
        Effect.succeed({
          account_id: accountId,
          // The token travels in the fragment, which browsers never send to a server or a log.
          url: `${dashboardConfig.origin}/dashboard/enroll#invite=${invite.token}`,
          expires_at: new Date(invite.expiresAtMs).toISOString()
        })
    })),
    answerServiceUnavailable
  )

const createKey = (
  context: AdminContext,
  payload: { readonly account_id: string; readonly name: string; readonly mode?: Mode | undefined }
) =>
  Effect.gen(function*() {
    yield* requireAccount(context, payload.account_id)
    // D38: an agent acts in its own mode only. Its key's mode decides the chain its
    // transfers go to, so a key of the other mode would let it spend outside the
    // mode its owner set its policy in; its keys default to its mode.
    const agent = yield* context.agents.findAgent(payload.account_id).pipe(Unavailable.database("Admin.createKey"))
    const agentMode = Option.map(agent, (found) => found.mode)
    if (Option.isSome(agentMode) && payload.mode !== undefined && payload.mode !== agentMode.value) {
      return yield* Effect.fail(InvalidRequest.of(
        `This agent was created in ${agentMode.value} mode; its keys are ${agentMode.value} keys only.`,
        { param: "mode" }
      ))
    }
    const mode = payload.mode ?? Option.getOrElse(agentMode, () => "test" as const)
    const key = yield* context.apiKeys.issue(payload.account_id, payload.name, mode).pipe(Unavailable.database("ApiKeys.issue"))
    return { key_id: key.keyId, name: key.name, mode: key.mode, api_key: Redacted.value(key.apiKey) }
  }).pipe(answerServiceUnavailable)

const listKeys = (context: AdminContext, accountId: string) =>
  Effect.gen(function*() {
    yield* requireAccount(context, accountId)
    // Counts still in memory are written first, so the list is current.
    yield* context.apiKeys.flushUsage
    return { data: yield* context.apiKeys.list(accountId).pipe(Unavailable.database("ApiKeys.list")) }
  }).pipe(answerServiceUnavailable)

/**
 * @since 0.1.0
 * @category layers
 */
export const AdminHttpLive = HttpApiBuilder.group(AdminApi, "admin", (handlers) =>
  Effect.gen(function*() {
    const context: AdminContext = {
      reseal: yield* Reseal,
      box: yield* SecretBox,
      accounts: yield* Accounts,
      apiKeys: yield* ApiKeys,
      agents: yield* AgentStore,
      dashboardAuth: yield* DashboardAuth,
      dashboardConfig: yield* DashboardConfig
    }
    return handlers
      .handle("createAccount", ({ payload }) => createAccount(context, payload))
      .handle("getAccount", ({ params }) =>
        requireAccount(context, params.account_id).pipe(Effect.map(toAccountRecord), answerServiceUnavailable))
      .handle("setKyc", ({ params, payload }) =>
        context.accounts.setKycStatus(params.account_id, payload.status).pipe(
          Unavailable.database("Admin.setKyc"),
          Effect.flatMap(Option.match({
            onNone: () => Effect.fail(AccountNotFound.of(params.account_id)),
            onSome: (account) => Effect.succeed(toAccountRecord(account))
          })),
          answerServiceUnavailable
        ))
      .handle("inviteAccount", ({ params }) => inviteAccount(context, params.account_id))
      .handle("createKey", ({ payload }) => createKey(context, payload))
      .handle("listKeys", ({ params }) => listKeys(context, params.account_id))
      .handle("revokeKey", ({ params }) =>
        context.apiKeys.revoke(params.key_id).pipe(
          Unavailable.database("ApiKeys.revoke"),
          Effect.flatMap(Option.match({
            onNone: () => Effect.fail(ApiKeyNotFound.of(params.key_id)),
            onSome: () => Effect.succeed({ key_id: params.key_id, revoked: true as const })
          })),
          answerServiceUnavailable
        ))
      .handle("resealWalletKek", () =>
        context.reseal.run.pipe(
          Effect.tap((outcome) =>
            Effect.logInfo("wallet KEK re-seal").pipe(Effect.annotateLogs({ kek_id: outcome.kek_id, remaining: outcome.remaining }))
          ),
          Unavailable.database("Reseal.run"),
          answerServiceUnavailable
        ))
      .handle("walletKekStatus", () => context.reseal.status.pipe(Unavailable.database("Reseal.status"), answerServiceUnavailable))
      .handle("sealedWallets", () =>
        context.accounts.sealedWallets.pipe(
          Effect.map((wallets) => ({
            kek_id: context.box.currentKekId,
            wallets: wallets.map((wallet) => ({
              account_id: wallet.accountId,
              address: wallet.walletAddress,
              wallet_key_sealed: Buffer.from(wallet.walletKeySealed).toString("base64")
            }))
          })),
          Unavailable.database("Accounts.sealedWallets"),
          answerServiceUnavailable
        ))
  }))
