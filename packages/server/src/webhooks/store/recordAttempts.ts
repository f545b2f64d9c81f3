/**
 * The store's attempt step: logs attempts, moves their deliveries on and renews each sender's
 * lease, all in one statement. An attempt's result is written only while the delivery is still
 * `pending` at the attempt count the sender read: a subscription deleted meanwhile stays
 * cancelled, and a stale sender cannot overwrite a newer result.
 *
 * @since 0.8.0
 */
import { Effect } from "effect"
import { statementWithoutWaitingForDisk } from "../../platform/CommitDurability.ts"
import type { AttemptRecord, StoreContext } from "./rows.ts"

/**
 * What recording one attempt found: `recorded` is false for a delivery no longer pending at that
 * count, `leaseHeld` false when the lease was lost or the subscription deleted (that sender must
 * stop).
 *
 * @since 0.8.0
 * @category models
 */
export interface RecordedAttempt {
  readonly recorded: boolean
  readonly leaseHeld: boolean
}

const toInputRow = (attempt: AttemptRecord) => ({
  delivery_id: attempt.deliveryId,
  attempt_number: attempt.attemptNumber,
  node_id: attempt.nodeId,
  started_at: attempt.startedAt,
  duration_ms: attempt.durationMs,
  response_status_code: attempt.statusCode ?? null,
  error: attempt.error ?? null,
  status: typeof attempt.status === "string" ? attempt.status : "pending",
  next_attempt_at: typeof attempt.status === "string" ? null : attempt.status.nextAttemptAt,
  webhook_id: attempt.webhookId,
  lease_until: attempt.leaseUntil
})

/**
 * Batched because on one database connection (PGlite) the statement count bounds throughput.
 * Unless `waitForDisk`, the commit does not wait for the disk (D72): a result lost in a host crash
 * leaves its delivery pending, sent again with the same `webhook-id`, as a result not yet written
 * is; the writer waits for the disk on its last write before it goes idle, which makes every
 * earlier one durable too.
 */
export const recordAttempts = (
  { sql }: StoreContext,
  attempts: ReadonlyArray<AttemptRecord>,
  waitForDisk = true
) => {
  if (attempts.length === 0) return Effect.succeed<ReadonlyArray<RecordedAttempt>>([])
  // One parameter (a JSON array) whatever the batch size; every data-modifying CTE runs, so the
  // log, the deliveries and the leases commit together. The final SELECT reads `commit_mode`, so
  // its setting is made before the commit.
  return statementWithoutWaitingForDisk(sql, (commitSetting) => sql<{ delivery_id: string; recorded: boolean; held: boolean }>`
    WITH commit_mode AS (SELECT ${commitSetting} AS setting), input AS (
      SELECT * FROM json_to_recordset(${JSON.stringify(attempts.map(toInputRow))}::json) AS x(
        delivery_id text, attempt_number integer, node_id text, started_at timestamptz, duration_ms integer,
        response_status_code integer, error text, status text, next_attempt_at timestamptz, webhook_id text,
        lease_until timestamptz)
    ), logged AS (
      INSERT INTO webhook_attempts
        (delivery_id, attempt_number, node_id, started_at, duration_ms, response_status_code, error)
      SELECT delivery_id, attempt_number, node_id, started_at, duration_ms, response_status_code, error FROM input
      ON CONFLICT DO NOTHING
      RETURNING delivery_id
    ), lease AS (
      UPDATE webhooks w SET lease_until = i.lease_until
      FROM input i
      WHERE w.webhook_id = i.webhook_id AND w.lease_owner = i.node_id AND w.deleted_at IS NULL
      RETURNING w.webhook_id
    ), moved AS (
      UPDATE webhook_deliveries d SET
        status = i.status, attempt_count = i.attempt_number, response_status_code = i.response_status_code,
        last_error = i.error, last_attempt_at = i.started_at, next_attempt_at = i.next_attempt_at
      FROM input i
      -- The ids as an array too, so the planner finds the rows by primary key. Joined to
      -- the input alone it hashes every pending delivery when it has no statistics (it guesses
      -- 100 input rows and few pending ones; PGlite before its first ANALYZE): a scan of the
      -- whole backlog per batch.
      WHERE d.delivery_id = ANY (ARRAY(SELECT delivery_id FROM input))
        AND d.delivery_id = i.delivery_id AND d.status = 'pending' AND d.attempt_count = i.attempt_number - 1
      RETURNING d.delivery_id
    )
    SELECT i.delivery_id,
           EXISTS (SELECT 1 FROM moved m WHERE m.delivery_id = i.delivery_id) AS recorded,
           EXISTS (SELECT 1 FROM lease l WHERE l.webhook_id = i.webhook_id) AS held
    FROM input i, commit_mode`, waitForDisk).pipe(
    Effect.map((result): ReadonlyArray<RecordedAttempt> => {
      const byDelivery = new Map(result.map((row) => [row.delivery_id, row]))
      return attempts.map((attempt) => {
        const row = byDelivery.get(attempt.deliveryId)
        return { recorded: row?.recorded === true, leaseHeld: row?.held === true }
      })
    }),
    Effect.withSpan("WebhookStore.recordAttempts")
  )
}
