/**
 * The operator's read-only view of an account's webhook subscriptions and how their deliveries
 * fare (D60): per subscription, its deliveries by status over the retained history (D35), when
 * one last succeeded and last failed, the last answer's status code and the oldest pending one's
 * due time. It never changes a subscription (the account holder manages them, `/v1/webhooks`) and
 * never shows a secret or a payload.
 *
 * @since 0.11.0
 */
import { Context, Effect, Layer, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { Mode } from "@pps/api/ApiKeys"
import * as Invariant from "../platform/Invariant.ts"

/**
 * `ok`: the last attempt that ended succeeded; `failing`: it failed (or an attempt is being
 * retried); `idle`: nothing delivered yet.
 *
 * @since 0.11.0
 * @category models
 */
export const WebhookHealthStatus = Schema.Literals(["ok", "failing", "idle"])

const Row = Schema.Struct({
  webhook_id: Schema.String,
  mode: Mode,
  url: Schema.String,
  event_types: Schema.String,
  created_at: Schema.String,
  pending: Schema.NumberFromString,
  succeeded: Schema.NumberFromString,
  failed: Schema.NumberFromString,
  retrying: Schema.NumberFromString,
  last_success_at: Schema.NullOr(Schema.String),
  last_failure_at: Schema.NullOr(Schema.String),
  last_response_status_code: Schema.NullOr(Schema.Number),
  oldest_pending_due_at: Schema.NullOr(Schema.String)
})

/**
 * One subscription with its delivery health.
 *
 * @since 0.11.0
 * @category models
 */
export const WebhookHealthRecord = Schema.Struct({
  webhook_id: Schema.String,
  mode: Mode,
  url: Schema.String,
  events: Schema.Array(Schema.String),
  created_at: Schema.String,
  health: WebhookHealthStatus,
  deliveries: Schema.Struct({
    pending: Schema.Number,
    retrying: Schema.Number,
    succeeded: Schema.Number,
    failed: Schema.Number
  }),
  last_success_at: Schema.NullOr(Schema.String),
  last_failure_at: Schema.NullOr(Schema.String),
  last_response_status_code: Schema.NullOr(Schema.Number),
  oldest_pending_due_at: Schema.NullOr(Schema.String)
})
export type WebhookHealthRecord = typeof WebhookHealthRecord.Type

const healthOf = (row: typeof Row.Type): typeof WebhookHealthStatus.Type => {
  if (row.last_success_at === null && row.last_failure_at === null) return "idle"
  if (row.last_failure_at === null) return "ok"
  if (row.last_success_at === null) return "failing"
  return row.last_failure_at > row.last_success_at ? "failing" : "ok"
}

const toRecord = (row: typeof Row.Type): WebhookHealthRecord => ({
  webhook_id: row.webhook_id,
  mode: row.mode,
  url: row.url,
  events: row.event_types.split(","),
  created_at: row.created_at,
  health: healthOf(row),
  deliveries: { pending: row.pending, retrying: row.retrying, succeeded: row.succeeded, failed: row.failed },
  last_success_at: row.last_success_at,
  last_failure_at: row.last_failure_at,
  last_response_status_code: row.last_response_status_code,
  oldest_pending_due_at: row.oldest_pending_due_at
})

/**
 * @since 0.11.0
 * @category services
 */
export class WebhookHealth extends Context.Service<WebhookHealth, {
  /** The account's live subscriptions (both modes), oldest first, with their delivery health. */
  readonly ofAccount: (accountId: string) => Effect.Effect<ReadonlyArray<WebhookHealthRecord>, SqlError.SqlError>
}>()("server/admin/WebhookHealth") {
  static readonly layer = Layer.effect(
    WebhookHealth,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return WebhookHealth.of({
        ofAccount: (accountId) =>
          sql`
            SELECT w.webhook_id, w.mode, w.url, w.event_types, iso_utc(w.created_at) AS created_at,
              count(d.delivery_id) FILTER (WHERE d.status = 'pending')::text AS pending,
              count(d.delivery_id) FILTER (WHERE d.status = 'pending' AND d.attempt_count > 0)::text AS retrying,
              count(d.delivery_id) FILTER (WHERE d.status = 'succeeded')::text AS succeeded,
              count(d.delivery_id) FILTER (WHERE d.status = 'failed')::text AS failed,
              iso_utc(max(d.last_attempt_at) FILTER (WHERE d.status = 'succeeded')) AS last_success_at,
              iso_utc(max(d.last_attempt_at) FILTER (WHERE d.status = 'failed' OR (d.status = 'pending' AND d.attempt_count > 0)))
                AS last_failure_at,
              (SELECT l.response_status_code FROM webhook_deliveries l
                WHERE l.webhook_id = w.webhook_id AND l.last_attempt_at IS NOT NULL
                ORDER BY l.last_attempt_at DESC, l.delivery_id DESC LIMIT 1) AS last_response_status_code,
              iso_utc(min(d.next_attempt_at) FILTER (WHERE d.status = 'pending')) AS oldest_pending_due_at
            FROM webhooks w LEFT JOIN webhook_deliveries d ON d.webhook_id = w.webhook_id
            WHERE w.account_id = ${accountId} AND w.deleted_at IS NULL
            GROUP BY w.webhook_id, w.mode, w.url, w.event_types, w.created_at
            ORDER BY w.created_at, w.webhook_id`.pipe(
            Effect.flatMap((rows) =>
              Schema.decodeUnknownEffect(Schema.Array(Row))(rows).pipe(
                Invariant.orDie("a webhooks row and its delivery counts decode")
              )
            ),
            Effect.map((rows) => rows.map(toRecord))
          )
      })
    })
  )
}
