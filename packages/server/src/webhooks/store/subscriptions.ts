/**
 * The store's subscription steps: every read for the API is scoped by account and mode and skips
 * deleted subscriptions, so another tenant's id is simply not found.
 *
 * @since 0.8.0
 */
import { Effect, Option } from "effect"
import type { Mode } from "@pps/api/ApiKeys"
import type { Webhook } from "@pps/api/Webhooks"
import { loopbackAllowed, plainSecrets, type StoreContext, toWebhook } from "./rows.ts"

/** @since 0.8.0 */
export const insert = Effect.fn("WebhookStore.insert")(function*(
  { sql }: StoreContext,
  webhook: Webhook & { readonly secretSealed: Uint8Array }
) {
  yield* sql`
    INSERT INTO webhooks (webhook_id, account_id, mode, url, event_types, secret_sealed, created_at)
    VALUES (${webhook.webhookId}, ${webhook.accountId}, ${webhook.mode}, ${webhook.url},
            ${webhook.eventTypes.join(",")}, ${webhook.secretSealed}, ${webhook.createdAt}::timestamptz)`
})

/** @since 0.8.0 */
export const countActive = ({ sql }: StoreContext, accountId: string, mode: Mode) =>
  sql<{ count: string }>`
    SELECT count(*)::text AS count FROM webhooks
    WHERE account_id = ${accountId} AND mode = ${mode} AND deleted_at IS NULL`.pipe(
    Effect.map((rows) => Number(rows[0]?.count ?? "0"))
  )

/** @since 0.8.0 */
export const listActive = ({ sql, webhookColumns, webhooks }: StoreContext, accountId: string, mode: Mode) =>
  webhooks(sql`
    SELECT ${webhookColumns} FROM webhooks
    WHERE account_id = ${accountId} AND mode = ${mode} AND deleted_at IS NULL
    ORDER BY created_at DESC, webhook_id DESC`).pipe(Effect.map((rows) => rows.map(toWebhook)))

/** @since 0.8.0 */
export const findActive = (
  { sql, webhookColumns, webhooks }: StoreContext,
  webhookId: string,
  accountId: string,
  mode: Mode
) =>
  webhooks(sql`
    SELECT ${webhookColumns} FROM webhooks
    WHERE webhook_id = ${webhookId} AND account_id = ${accountId} AND mode = ${mode} AND deleted_at IS NULL`).pipe(
    Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toWebhook))
  )

/** Marks it deleted and cancels its pending deliveries, in one transaction; false when not found. */
export const softDelete = ({ sql }: StoreContext, webhookId: string, accountId: string, mode: Mode, at: string) =>
  sql.withTransaction(Effect.gen(function*() {
    const deleted = yield* sql`
      UPDATE webhooks SET deleted_at = ${at}::timestamptz, lease_owner = NULL, lease_until = NULL
      WHERE webhook_id = ${webhookId} AND account_id = ${accountId} AND mode = ${mode} AND deleted_at IS NULL
      RETURNING webhook_id`
    if (deleted.length === 0) return false
    yield* sql`
      UPDATE webhook_deliveries SET status = 'cancelled', next_attempt_at = NULL
      WHERE webhook_id = ${webhookId} AND status = 'pending'`
    return true
  })).pipe(Effect.withSpan("WebhookStore.softDelete"))

/**
 * The options of {@link rotateSecret}.
 *
 * @since 0.8.0
 * @category models
 */
export interface RotateSecretOptions {
  readonly webhookId: string
  readonly accountId: string
  readonly mode: Mode
  readonly seal: (previous: Uint8Array) => Effect.Effect<{ readonly current: Uint8Array; readonly previous: Uint8Array }>
  readonly previousExpiresAt: string
}

/** @since 0.8.0 */
export const rotateSecret = ({ sql }: StoreContext, options: RotateSecretOptions) =>
  sql.withTransaction(Effect.gen(function*() {
    const rows = yield* sql<{ secret_sealed: Uint8Array }>`
      SELECT secret_sealed FROM webhooks
      WHERE webhook_id = ${options.webhookId} AND account_id = ${options.accountId} AND mode = ${options.mode}
        AND deleted_at IS NULL
      FOR UPDATE`
    const row = rows[0]
    if (row === undefined) return false
    const sealed = yield* options.seal(new Uint8Array(row.secret_sealed))
    yield* sql`
      UPDATE webhooks SET secret_sealed = ${sealed.current}, previous_secret_sealed = ${sealed.previous},
        previous_secret_expires_at = ${options.previousExpiresAt}::timestamptz
      WHERE webhook_id = ${options.webhookId}`
    return true
  })).pipe(Effect.withSpan("WebhookStore.rotateSecret"))

/** Active subscriptions of these accounts (for fan-out). */
export const subscribersOf = ({ sql, webhookColumns, webhooks }: StoreContext, accountIds: ReadonlyArray<string>) =>
  accountIds.length === 0
    ? Effect.succeed([])
    : webhooks(sql`
        SELECT ${webhookColumns} FROM webhooks
        WHERE ${sql.in("account_id", accountIds)} AND deleted_at IS NULL AND disabled_at IS NULL`).pipe(
      Effect.map((rows) => rows.map(toWebhook))
    )

/** @since 0.8.0 */
export const sendingInfo = ({ sending, sql }: StoreContext, webhookId: string) =>
  sending(sql`
    SELECT url, ${loopbackAllowed(sql)}, secret_sealed, previous_secret_sealed, iso_utc(previous_secret_expires_at) AS previous_secret_expires_at
    FROM webhooks w WHERE webhook_id = ${webhookId} AND deleted_at IS NULL`).pipe(
    Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), plainSecrets))
  )

/**
 * The changes of {@link update} (D59): absent fields stay.
 *
 * @since 0.9.0
 * @category models
 */
export interface UpdateOptions {
  readonly webhookId: string
  readonly accountId: string
  readonly mode: Mode
  readonly url: string | undefined
  readonly eventTypes: ReadonlyArray<string> | undefined
  readonly enabled: boolean | undefined
  readonly at: string
}

/** Changes a subscription's url, events or enabled state; None when not found. */
export const update = ({ sql, webhookColumns, webhooks }: StoreContext, options: UpdateOptions) =>
  webhooks(sql`
    UPDATE webhooks SET
      url = COALESCE(${options.url ?? null}, url),
      event_types = COALESCE(${options.eventTypes?.join(",") ?? null}, event_types),
      disabled_at = ${
    options.enabled === undefined
      ? sql`disabled_at`
      : options.enabled
      ? sql`NULL`
      : sql`COALESCE(disabled_at, ${options.at}::timestamptz)`
  }
    WHERE webhook_id = ${options.webhookId} AND account_id = ${options.accountId} AND mode = ${options.mode}
      AND deleted_at IS NULL
    RETURNING ${webhookColumns}`).pipe(
    Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toWebhook)),
    Effect.withSpan("WebhookStore.update")
  )

/** D59: whether the operator lets this account (in this mode) deliver to loopback. */
export const loopbackGranted = ({ sql }: StoreContext, accountId: string, mode: Mode) =>
  sql`SELECT 1 FROM webhook_loopback_accounts WHERE account_id = ${accountId} AND mode = ${mode}`.pipe(
    Effect.map((rows) => rows.length > 0)
  )

/** D59: the operator grants (or withdraws) loopback delivery for an account in a mode. */
export const setLoopbackGrant = ({ sql }: StoreContext, accountId: string, mode: Mode, allowed: boolean, at: string) =>
  (allowed
    ? sql`
        INSERT INTO webhook_loopback_accounts (account_id, mode, granted_at) VALUES (${accountId}, ${mode}, ${at}::timestamptz)
        ON CONFLICT (account_id, mode) DO NOTHING`
    : sql`DELETE FROM webhook_loopback_accounts WHERE account_id = ${accountId} AND mode = ${mode}`).pipe(Effect.asVoid)
