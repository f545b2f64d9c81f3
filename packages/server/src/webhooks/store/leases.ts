/**
 * The store's lease steps: a subscription's deliveries are sent by whoever holds its lease
 * (`webhooks.lease_owner`/`lease_until`), taken with `FOR UPDATE SKIP LOCKED` only when free or
 * expired, so one sender serves a subscription across all nodes.
 *
 * @since 0.8.0
 */
import { Effect } from "effect"
import { statementWithoutWaitingForDisk } from "../../platform/CommitDurability.ts"
import type { StoreContext } from "./rows.ts"

/**
 * The options of {@link claimSubscriptions}.
 *
 * @since 0.8.0
 * @category models
 */
export interface ClaimOptions {
  readonly nodeId: string
  readonly now: string
  readonly leaseUntil: string
  readonly limit: number
}

/** Takes the lease of up to `limit` free subscriptions that have a due delivery. */
export const claimSubscriptions = ({ sql }: StoreContext, { leaseUntil, limit, nodeId, now }: ClaimOptions) =>
  statementWithoutWaitingForDisk(sql, (commitSetting) => sql<{ webhook_id: string }>`
    UPDATE webhooks SET lease_owner = ${nodeId}, lease_until = ${leaseUntil}::timestamptz
    FROM (SELECT ${commitSetting}) AS commit_mode
    WHERE webhook_id IN (
      SELECT w.webhook_id FROM webhooks w
      WHERE w.deleted_at IS NULL AND w.disabled_at IS NULL
        AND (w.lease_until IS NULL OR w.lease_until < ${now}::timestamptz)
        AND EXISTS (
          SELECT 1 FROM webhook_deliveries d
          WHERE d.webhook_id = w.webhook_id AND d.status = 'pending' AND d.next_attempt_at <= ${now}::timestamptz)
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED)
    RETURNING webhook_id`).pipe(
    Effect.map((rows) => rows.map((row) => row.webhook_id)),
    Effect.withSpan("WebhookStore.claimSubscriptions")
  )

/** Extends a held lease; false when it is not ours any more or the subscription was deleted. */
export const extendLease = ({ sql }: StoreContext, webhookId: string, nodeId: string, leaseUntil: string) =>
  statementWithoutWaitingForDisk(sql, (commitSetting) => sql`
    UPDATE webhooks SET lease_until = ${leaseUntil}::timestamptz
    FROM (SELECT ${commitSetting}) AS commit_mode
    WHERE webhook_id = ${webhookId} AND lease_owner = ${nodeId} AND deleted_at IS NULL
    RETURNING webhook_id`).pipe(Effect.map((rows) => rows.length === 1))

/** @since 0.8.0 */
export const releaseLease = ({ sql }: StoreContext, webhookId: string, nodeId: string) =>
  statementWithoutWaitingForDisk(sql, (commitSetting) => sql`
    UPDATE webhooks SET lease_owner = NULL, lease_until = NULL
    FROM (SELECT ${commitSetting}) AS commit_mode
    WHERE webhook_id = ${webhookId} AND lease_owner = ${nodeId}`).pipe(Effect.asVoid)

/** Embedded mode only (one process owns the database): drops leases a killed process left. */
export const releaseAllLeases = ({ sql }: StoreContext) =>
  sql`UPDATE webhooks SET lease_owner = NULL, lease_until = NULL WHERE lease_owner IS NOT NULL`.pipe(Effect.asVoid)
