/**
 * The audit log (D60): security actions on accounts (keys created and revoked, passkeys added and
 * removed, invites issued and used, spend policies changed, agents created, KYC changed, accounts
 * suspended and reactivated), each with who did it, when, and from where (the client address and
 * the request id of the request that did it).
 *
 * The table is append-only in SQL (migration 0020's trigger refuses UPDATE, DELETE and TRUNCATE),
 * and this module is its only writer: `record` inserts, nothing else here changes a row. A step
 * records inside its own transaction where it has one, so the action and its record commit
 * together. Entries hold ids, never an amount, memo, key value or secret.
 *
 * @since 0.11.0
 */
import { Clock, Context, DateTime, Effect, Layer, Option, Schema } from "effect"
import { HttpServerRequest } from "effect/http"
import { SqlClient, type SqlError } from "effect/sql"
import { CurrentPrincipal } from "@pps/api/Api"
import { clientAddress } from "../http/ClientAddress.ts"
import { CurrentRequestId } from "../http/CurrentRequestId.ts"
import { DashboardConfig } from "../dashboard/DashboardConfig.ts"
import { CurrentSession } from "../dashboard/DashboardAuth.ts"
import * as Invariant from "../platform/Invariant.ts"
import { makeId } from "../platform/Ids.ts"
import { auditActions } from "./auditActions.ts"

/**
 * What was done. Stable names: operators filter on them (`admin audit --action`).
 *
 * @since 0.11.0
 * @category models
 */
export const AuditAction = Schema.Literals(auditActions)
export type AuditAction = typeof AuditAction.Type

/**
 * One entry as the admin API shows it.
 *
 * @since 0.11.0
 * @category models
 */
export const AuditRecord = Schema.Struct({
  audit_id: Schema.String,
  occurred_at: Schema.String,
  action: AuditAction,
  account_id: Schema.NullOr(Schema.String),
  actor: Schema.String,
  target_id: Schema.NullOr(Schema.String),
  ip: Schema.NullOr(Schema.String),
  request_id: Schema.NullOr(Schema.String)
})
export type AuditRecord = typeof AuditRecord.Type

/**
 * What a step records. `actor` defaults to the request's caller: `key:<key_id>` for an API key,
 * `dashboard:<account_id>` for a dashboard session, else `operator` on the admin listener and
 * `system` outside any request.
 *
 * @since 0.11.0
 * @category models
 */
export interface AuditEntry {
  readonly action: AuditAction
  readonly accountId: string | null
  readonly targetId?: string | null
  readonly actor?: string
}

/**
 * A query of the log, newest first.
 *
 * @since 0.11.0
 * @category models
 */
export interface AuditQuery {
  readonly accountId?: string | undefined
  readonly action?: AuditAction | undefined
  readonly limit: number
  readonly offset: number
}

/**
 * @since 0.11.0
 * @category services
 */
export class AuditLog extends Context.Service<AuditLog, {
  /** Appends one entry (in the caller's transaction, if any). */
  readonly record: (entry: AuditEntry) => Effect.Effect<void, SqlError.SqlError>
  /** Entries newest first (in the order they were written); `limit` rows at most. */
  readonly list: (query: AuditQuery) => Effect.Effect<ReadonlyArray<AuditRecord>, SqlError.SqlError>
}>()("server/audit/AuditLog") {
  static readonly layer = Layer.effect(
    AuditLog,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const { trustedProxies } = yield* DashboardConfig
      const origin = Effect.gen(function*() {
        const request = yield* Effect.serviceOption(HttpServerRequest.HttpServerRequest)
        const ip = Option.map(request, (found) =>
          clientAddress(Option.getOrUndefined(found.remoteAddress ?? Option.none()), found.headers["x-forwarded-for"], trustedProxies))
        return { ip: Option.getOrNull(ip), requestId: yield* CurrentRequestId, inRequest: Option.isSome(request) }
      })
      const actorOf = (inRequest: boolean) =>
        Effect.gen(function*() {
          const session = yield* CurrentSession
          if (Option.isSome(session)) return `dashboard:${session.value.accountId}`
          const principal = yield* Effect.serviceOption(CurrentPrincipal)
          if (Option.isSome(principal)) return `key:${principal.value.keyId}`
          return inRequest ? "operator" : "system"
        })
      return AuditLog.of({
        record: Effect.fn("AuditLog.record")(function*(entry) {
          const nowMs = yield* Clock.currentTimeMillis
          const where = yield* origin
          const actor = entry.actor ?? (yield* actorOf(where.inRequest))
          yield* sql`
            INSERT INTO audit_events (audit_id, occurred_at, action, account_id, actor, target_id, ip, request_id)
            VALUES (${makeId("aud", nowMs)}, ${DateTime.formatIso(DateTime.makeUnsafe(nowMs))}::timestamptz, ${entry.action},
                    ${entry.accountId}, ${actor}, ${entry.targetId ?? null}, ${where.ip}, ${where.requestId})`
        }),
        list: (query) =>
          sql`
            SELECT audit_id, iso_utc(occurred_at) AS occurred_at, action, account_id, actor, target_id, ip, request_id
            FROM audit_events
            WHERE ${query.accountId === undefined ? sql`TRUE` : sql`account_id = ${query.accountId}`}
              AND ${query.action === undefined ? sql`TRUE` : sql`action = ${query.action}`}
            ORDER BY seq DESC
            LIMIT ${query.limit} OFFSET ${query.offset}`.pipe(
            Effect.flatMap((rows) =>
              Schema.decodeUnknownEffect(Schema.Array(AuditRecord))(rows).pipe(
                Invariant.orDie("an audit_events row decodes as the entry it stores")
              )
            )
          )
      })
    })
  )
}
