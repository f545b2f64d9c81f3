/**
 * The webhook tables' row shapes, their decoding, and the context every store step runs over:
 * the SQL client and the decoders built once when the store's layer is.
 *
 * @since 0.8.0
 */
import { Effect, Option, Schema } from "effect"
import type { SqlClient, SqlError, Statement } from "effect/sql"
import { Mode } from "@pps/api/ApiKeys"
import { EventType } from "@pps/api/Events"
import type { DeliveryRecord, DeliveryStatus, Webhook } from "@pps/api/Webhooks"
import * as Invariant from "../../platform/Invariant.ts"

const WebhookRow = Schema.Struct({
  webhook_id: Schema.String,
  account_id: Schema.String,
  mode: Mode,
  url: Schema.String,
  event_types: Schema.String,
  enabled: Schema.Boolean,
  created_at: Schema.String
})

const decodeEventTypes = Schema.decodeUnknownSync(Schema.Array(EventType))

/** @internal */
export const toWebhook = (row: typeof WebhookRow.Type): Webhook => ({
  webhookId: row.webhook_id,
  accountId: row.account_id,
  mode: row.mode,
  url: row.url,
  eventTypes: decodeEventTypes(row.event_types.split(",")),
  enabled: row.enabled,
  createdAt: row.created_at
})

const DeliveryRow = Schema.Struct({
  delivery_id: Schema.String,
  event_id: Schema.String,
  event: Schema.String,
  status: Schema.Literals(["pending", "succeeded", "failed", "cancelled"]),
  response_status_code: Schema.NullOr(Schema.Number),
  attempt_count: Schema.Number,
  created_at: Schema.String,
  last_attempt_at: Schema.NullOr(Schema.String),
  next_attempt_at: Schema.NullOr(Schema.String),
  last_error: Schema.NullOr(Schema.String)
})

const SendingRow = Schema.Struct({
  url: Schema.String,
  loopback_allowed: Schema.Boolean,
  secret_sealed: Schema.Uint8Array,
  previous_secret_sealed: Schema.NullOr(Schema.Uint8Array),
  previous_secret_expires_at: Schema.NullOr(Schema.String)
})

const DueRow = Schema.Struct({
  delivery_id: Schema.String,
  event_id: Schema.String,
  payload: Schema.String,
  attempt_count: Schema.Number,
  created_at: Schema.String
})

/** A subscription's sending info beside one of its due deliveries, or beside none (its columns null). */
const SendingDueRow = Schema.Struct({
  ...SendingRow.fields,
  delivery_id: Schema.NullOr(Schema.String),
  event_id: Schema.NullOr(Schema.String),
  payload: Schema.NullOr(Schema.String),
  attempt_count: Schema.NullOr(Schema.Number),
  created_at: Schema.NullOr(Schema.String)
})

/**
 * What the sender needs to know about a subscription.
 *
 * @since 0.1.0
 * @category models
 */
export type SendingInfo = typeof SendingRow.Type

/**
 * A delivery due for an attempt.
 *
 * @since 0.1.0
 * @category models
 */
export type DueDelivery = typeof DueRow.Type

/**
 * A served subscription's next batch: what its sender needs, and its due deliveries.
 *
 * @since 0.8.0
 * @category models
 */
export interface DueBatch {
  readonly sending: SendingInfo
  readonly due: ReadonlyArray<DueDelivery>
}

/**
 * A new delivery row.
 *
 * @since 0.1.0
 * @category models
 */
export interface NewDelivery {
  readonly deliveryId: string
  readonly webhookId: string
  readonly eventId: string
  readonly trigger: "event" | "replay"
  readonly createdAt: string
}

/**
 * The result of one attempt, as recorded.
 *
 * @since 0.1.0
 * @category models
 */
export interface AttemptRecord {
  readonly deliveryId: string
  readonly attemptNumber: number
  readonly nodeId: string
  readonly startedAt: string
  readonly durationMs: number
  readonly statusCode: number | undefined
  readonly error: string | undefined
  /** What the delivery becomes: done, or pending until `nextAttemptAt`. */
  readonly status: Exclude<DeliveryStatus, "pending"> | { readonly nextAttemptAt: string }
  /** The subscription whose lease the sender holds, and the lease's new end. */
  readonly webhookId: string
  readonly leaseUntil: string
}

/** @internal */
export const toDeliveryRecord = (row: typeof DeliveryRow.Type): DeliveryRecord => ({
  delivery_id: row.delivery_id,
  event_id: row.event_id,
  event: row.event,
  // Cancelled rows are filtered out by every query that builds a record.
  status: row.status === "cancelled" ? "failed" : row.status,
  response_status_code: row.response_status_code,
  retry_count: Math.max(0, row.attempt_count - 1),
  created_at: row.created_at,
  last_attempt_at: row.last_attempt_at,
  next_attempt_at: row.next_attempt_at,
  failure_reason: failureReason(row)
})

/**
 * D59: why the last attempt failed, from what the attempt log kept (an error class, or a status).
 * A success, or no attempt yet, has none; `cancelled` (an attempt cut short by a stopping node)
 * is no failure of the receiver's.
 */
const failureReason = (row: typeof DeliveryRow.Type): string | null => {
  if (row.status === "succeeded") return null
  if (row.last_error !== null) return row.last_error === "cancelled" ? null : row.last_error
  if (row.response_status_code !== null && (row.response_status_code < 200 || row.response_status_code > 299)) {
    return `http_${row.response_status_code}`
  }
  return null
}

/**
 * D59: whether the subscription's account may deliver to loopback, read at each attempt (the
 * operator's grant takes effect without a restart). `w` is the webhooks row.
 *
 * @internal
 */
export const loopbackAllowed = (sql: SqlClient.SqlClient) =>
  sql`EXISTS (SELECT 1 FROM webhook_loopback_accounts g WHERE g.account_id = w.account_id AND g.mode = w.mode) AS loopback_allowed`

/** pg hands back Buffers; the secret box wants plain bytes. */
export const plainSecrets = (row: SendingInfo): SendingInfo => ({
  url: row.url,
  loopback_allowed: row.loopback_allowed,
  secret_sealed: new Uint8Array(row.secret_sealed),
  previous_secret_sealed: row.previous_secret_sealed === null ? null : new Uint8Array(row.previous_secret_sealed),
  previous_secret_expires_at: row.previous_secret_expires_at
})

/** The due deliveries of a `SendingDueRow` batch (a row whose delivery columns are null has none). */
export const dueOf = (rows: ReadonlyArray<typeof SendingDueRow.Type>): Option.Option<DueBatch> =>
  Option.map(Option.fromNullishOr(rows[0]), (first) => ({
    sending: plainSecrets(first),
    due: rows.flatMap((row) =>
      row.delivery_id === null || row.event_id === null || row.payload === null || row.attempt_count === null ||
        row.created_at === null
        ? []
        : [{
          delivery_id: row.delivery_id,
          event_id: row.event_id,
          payload: row.payload,
          attempt_count: row.attempt_count,
          created_at: row.created_at
        }]
    )
  }))

type Decoder<S extends Schema.Top> = (
  statement: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>
) => Effect.Effect<ReadonlyArray<S["Type"]>, SqlError.SqlError>

// Rows that do not decode break our own schema (the migrations write what it reads): a defect.
const rowsDecode = Invariant.orDie("the webhook tables' rows decode with the schema their migrations define")

const decoder = <S extends Schema.Top>(schema: S): Decoder<S> => {
  const decodeRows = Schema.decodeUnknownEffect(Schema.Array(schema))
  return (statement) =>
    Effect.flatMap(statement, (rows) => rowsDecode(decodeRows(rows))) as Effect.Effect<
      ReadonlyArray<S["Type"]>,
      SqlError.SqlError
    >
}

/**
 * What every store step runs over, built once by the layer.
 *
 * @since 0.8.0
 * @category models
 */
export interface StoreContext {
  readonly sql: SqlClient.SqlClient
  readonly webhookColumns: Statement.Fragment
  readonly webhooks: Decoder<typeof WebhookRow>
  readonly deliveries: Decoder<typeof DeliveryRow>
  readonly sending: Decoder<typeof SendingRow>
  readonly sendingDue: Decoder<typeof SendingDueRow>
}

/**
 * @since 0.8.0
 * @category constructors
 */
export const makeStoreContext = (sql: SqlClient.SqlClient): StoreContext => ({
  sql,
  webhookColumns: sql`webhook_id, account_id, mode, url, event_types, disabled_at IS NULL AS enabled, iso_utc(created_at) AS created_at`,
  webhooks: decoder(WebhookRow),
  deliveries: decoder(DeliveryRow),
  sending: decoder(SendingRow),
  sendingDue: decoder(SendingDueRow)
})
