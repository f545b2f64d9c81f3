/**
 * The store's delivery steps: fan-out and replay insert deliveries, the API pages through them,
 * the dispatcher reads what is due.
 *
 * @since 0.8.0
 */
import { Effect, Option } from "effect"
import { dueOf, loopbackAllowed, type NewDelivery, type StoreContext, toDeliveryRecord } from "./rows.ts"

/**
 * Inserts deliveries; a second fan-out of the same event to the same subscription is ignored.
 * The rows travel as one JSON parameter, as attempt results do (recordAttempts.ts): one statement
 * text whatever the batch's size, so it is parsed and planned once, not a VALUES list of seven
 * parameters a row parsed anew for each size.
 */
export const insertDeliveries = ({ sql }: StoreContext, rows: ReadonlyArray<NewDelivery>, nextAttemptAt: string) =>
  rows.length === 0
    ? Effect.succeed(0)
    : sql<{ delivery_id: string }>`
        INSERT INTO webhook_deliveries (delivery_id, webhook_id, event_id, trigger, status, next_attempt_at, created_at)
        SELECT delivery_id, webhook_id, event_id, trigger, 'pending', ${nextAttemptAt}::timestamptz, created_at
        FROM json_to_recordset(${JSON.stringify(rows.map(toInputRow))}::json) AS x(
          delivery_id text, webhook_id text, event_id text, trigger text, created_at timestamptz)
        ON CONFLICT (event_id, webhook_id) WHERE trigger = 'event' DO NOTHING
        RETURNING delivery_id`.pipe(Effect.map((inserted) => inserted.length), Effect.withSpan("WebhookStore.insertDeliveries"))

const toInputRow = (row: NewDelivery) => ({
  delivery_id: row.deliveryId,
  webhook_id: row.webhookId,
  event_id: row.eventId,
  trigger: row.trigger,
  created_at: row.createdAt
})

/** @since 0.8.0 */
export const listDeliveries = ({ deliveries, sql }: StoreContext, webhookId: string, limit: number, offset: number) =>
  deliveries(sql`
    SELECT d.delivery_id, d.event_id, e.type AS event, d.status, d.response_status_code, d.attempt_count,
           iso_utc(d.created_at) AS created_at, iso_utc(d.last_attempt_at) AS last_attempt_at,
           iso_utc(d.next_attempt_at) AS next_attempt_at, d.last_error
    FROM webhook_deliveries d JOIN events e ON e.event_id = d.event_id
    WHERE d.webhook_id = ${webhookId} AND d.status <> 'cancelled'
    ORDER BY d.created_at DESC, d.delivery_id DESC
    LIMIT ${limit} OFFSET ${offset}`).pipe(Effect.map((rows) => rows.map(toDeliveryRecord)))

/** The earliest due time after `now` of any pending delivery (an index lookup). */
export const nextDueAfter = ({ sql }: StoreContext, now: string) =>
  sql<{ next_ms: string | null }>`
    SELECT (extract(epoch FROM min(next_attempt_at)) * 1000)::bigint::text AS next_ms
    FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at > ${now}::timestamptz`.pipe(
    Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]?.next_ms), Number))
  )

/**
 * A subscription's sending info and its due deliveries (oldest due first, at most `limit`), in
 * one statement; None when it is deleted or disabled (D59: its deliveries wait). One statement, not the subscription then its
 * deliveries: at a steady trickle of events every serving round serves one delivery, so a
 * second statement a round is a large share of the statements a delivery costs. The
 * subscription's columns repeat on each row. `excluding`: deliveries already sent whose results
 * are on their way to the database (the sender reads its next batch before they are written,
 * dispatch/serveSubscription.ts); one JSON parameter, so the statement's text is one whatever
 * their number.
 */
export const dueDeliveries = (
  { sendingDue, sql }: StoreContext,
  webhookId: string,
  now: string,
  limit: number,
  excluding: ReadonlyArray<string>
) =>
  sendingDue(sql`
    SELECT w.url, ${loopbackAllowed(sql)}, w.secret_sealed, w.previous_secret_sealed,
           iso_utc(w.previous_secret_expires_at) AS previous_secret_expires_at,
           d.delivery_id, d.event_id, d.payload, d.attempt_count, d.created_at
    FROM webhooks w
    LEFT JOIN LATERAL (
      SELECT d.delivery_id, d.event_id, e.payload, d.attempt_count, iso_utc(d.created_at) AS created_at,
             d.next_attempt_at
      FROM webhook_deliveries d JOIN events e ON e.event_id = d.event_id
      WHERE d.webhook_id = ${webhookId} AND d.status = 'pending' AND d.next_attempt_at <= ${now}::timestamptz
        AND d.delivery_id NOT IN (SELECT json_array_elements_text(${JSON.stringify(excluding)}::json))
      ORDER BY d.next_attempt_at, d.delivery_id
      LIMIT ${limit}
    ) d ON true
    WHERE w.webhook_id = ${webhookId} AND w.deleted_at IS NULL AND w.disabled_at IS NULL
    ORDER BY d.next_attempt_at, d.delivery_id`).pipe(Effect.map(dueOf))
