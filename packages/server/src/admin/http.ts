/**
 * Handlers of the admin API and its token check.
 *
 * @since 0.1.0
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto"
import { Clock, DateTime, Effect, Layer, Option, Redacted } from "effect"
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
import { SqlClient } from "effect/sql"
import { pageLimitDefault, pageOf } from "@pps/api/Page"
import type { AccountSearch } from "../accounts/AccountStore.ts"
import { AuditLog, type AuditAction } from "../audit/AuditLog.ts"
import { WebhookHealth } from "./WebhookHealth.ts"

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
  readonly sql: SqlClient.SqlClient
  readonly auditLog: AuditLog["Service"]
  readonly webhookHealth: WebhookHealth["Service"]
}

/** D16's bounds of a list query, its defaults filled in. */
const boundsOf = (query: { readonly limit?: number | undefined; readonly offset?: number | undefined }) => ({
  limit: query.limit ?? pageLimitDefault,
  offset: query.offset ?? 0
})

/** D60: the operator's directory; `handle` matches part of a handle, with or without its `@`. */
const listAccounts = (
  { accounts }: AdminContext,
  query: Omit<AccountSearch, "limit" | "offset" | "kycStatus"> & {
    readonly limit?: number | undefined
    readonly offset?: number | undefined
    readonly kyc_status?: KycStatus | undefined
  }
) => {
  const bounds = boundsOf(query)
  return accounts.search({
    handle: query.handle?.replace(/^@/, ""),
    type: query.type,
    kycStatus: query.kyc_status,
    status: query.status,
    limit: bounds.limit + 1,
    offset: bounds.offset
  }).pipe(Unavailable.database("Admin.listAccounts"), Effect.map((rows) => pageOf(rows, bounds)), answerServiceUnavailable)
}

/**
 * D60: suspends or reactivates an account. The change and its audit entry commit together; then
 * every node forgets the verified keys of the account and of its agents, so the next request
 * with any of them reads the suspension. Only new requests are refused: transfers already
 * recorded settle, held transactions keep their window, webhooks keep being delivered.
 */
const setSuspended = (context: AdminContext, accountId: string, suspended: boolean) =>
  Effect.gen(function*() {
    const nowMs = yield* Clock.currentTimeMillis
    const { account } = yield* context.sql.withTransaction(Effect.gen(function*() {
      const set = yield* context.accounts.setSuspended(accountId, suspended ? DateTime.formatIso(DateTime.makeUnsafe(nowMs)) : null)
      if (set.changed) yield* context.auditLog.record({ action: suspended ? "account.suspended" : "account.reactivated", accountId })
      return set
    })).pipe(Unavailable.database("Admin.setSuspended"))
    if (Option.isNone(account)) return yield* Effect.fail(AccountNotFound.of(accountId))
    // Asked again when nothing changed too: a retry after a lost answer still reaches every node.
    if (suspended) yield* context.apiKeys.evictAccount(accountId)
    return account.value
  }).pipe(answerServiceUnavailable)

const audit = (
  { auditLog }: AdminContext,
  query: {
    readonly limit?: number | undefined
    readonly offset?: number | undefined
    readonly account_id?: string | undefined
    readonly action?: AuditAction | undefined
  }
) => {
  const bounds = boundsOf(query)
  return auditLog.list({ accountId: query.account_id, action: query.action, limit: bounds.limit + 1, offset: bounds.offset }).pipe(
    Unavailable.database("Admin.audit"),
    Effect.map((rows) => pageOf(rows, bounds)),
    answerServiceUnavailable
  )
}

const accountWebhooks = (context: AdminContext, accountId: string) =>
  requireAccount(context, accountId).pipe(
    Effect.andThen(context.webhookHealth.ofAccount(accountId).pipe(Unavailable.database("Admin.accountWebhooks"))),
    Effect.map((data) => ({ data })),
    answerServiceUnavailable
  )

const requireAccount = ({ accounts }: AdminContext, accountId: string) =>
  accounts.get(accountId).pipe(
    Unavailable.database("Admin.requireAccount"),
    Effect.flatMap(Option.match({
      onNone: () => Effect.fail(AccountNotFound.of(accountId)),
      onSome: Effect.succeed
    }))
  )

const createAccount = (
  { accounts, apiKeys, auditLog, sql }: AdminContext,
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
    // The account, its first key and their audit entries commit together.
    const { account, key } = yield* sql.withTransaction(Effect.gen(function*() {
      const account = yield* accounts.create({
        handle,
        type: payload.type ?? "personal",
        kycStatus: payload.kyc_status ?? "unverified"
      })
      const key = yield* apiKeys.issue(account.accountId, firstKeyName, "test")
      yield* auditLog.record({ action: "account.created", accountId: account.accountId })
      yield* auditLog.record({ action: "api_key.created", accountId: account.accountId, targetId: key.keyId })
      return { account, key }
    })).pipe(Effect.catchTag("HandleConflict", () => Effect.fail(HandleTaken.of(handle))))
    return {
      account_id: account.accountId,
      handle: displayHandle(account.handle),
      key_id: key.keyId,
      api_key: Redacted.value(key.apiKey)
    }
  }).pipe(Unavailable.database("Admin.createAccount"), answerServiceUnavailable)

const inviteAccount = ({ auditLog, dashboardAuth, dashboardConfig }: AdminContext, accountId: string) =>
  dashboardAuth.invite(accountId).pipe(
    Effect.tap((invite) =>
      Option.isSome(invite) ? auditLog.record({ action: "invite.issued", accountId }) : Effect.void
    ),
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
    const key = yield* context.sql.withTransaction(
      context.apiKeys.issue(payload.account_id, payload.name, mode).pipe(
        Effect.tap((issued) => context.auditLog.record({ action: "api_key.created", accountId: payload.account_id, targetId: issued.keyId }))
      )
    ).pipe(Unavailable.database("ApiKeys.issue"))
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
      dashboardConfig: yield* DashboardConfig,
      sql: yield* SqlClient.SqlClient,
      auditLog: yield* AuditLog,
      webhookHealth: yield* WebhookHealth
    }
    return handlers
      .handle("createAccount", ({ payload }) => createAccount(context, payload))
      .handle("listAccounts", ({ query }) => listAccounts(context, query))
      .handle("suspendAccount", ({ params }) => setSuspended(context, params.account_id, true))
      .handle("reactivateAccount", ({ params }) => setSuspended(context, params.account_id, false))
      .handle("accountWebhooks", ({ params }) => accountWebhooks(context, params.account_id))
      .handle("audit", ({ query }) => audit(context, query))
      .handle("getAccount", ({ params }) =>
        context.accounts.operatorView(params.account_id).pipe(
          Unavailable.database("Admin.getAccount"),
          Effect.flatMap(Option.match({ onNone: () => Effect.fail(AccountNotFound.of(params.account_id)), onSome: Effect.succeed })),
          answerServiceUnavailable
        ))
      .handle("setKyc", ({ params, payload }) =>
        context.sql.withTransaction(context.accounts.setKycStatus(params.account_id, payload.status).pipe(
          Effect.tap((account) =>
            Option.isSome(account)
              ? context.auditLog.record({ action: "account.kyc_changed", accountId: params.account_id, targetId: payload.status })
              : Effect.void
          )
        )).pipe(
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
          Effect.tap((revoked) =>
            Option.isSome(revoked)
              ? context.auditLog.record({ action: "api_key.revoked", accountId: revoked.value, targetId: params.key_id })
              : Effect.void
          ),
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
