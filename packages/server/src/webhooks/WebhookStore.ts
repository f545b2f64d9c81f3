/**
 * The webhook tables: subscriptions, deliveries and the attempt log.
 *
 * Every read of a subscription for the API is scoped by account and mode (and
 * skips deleted ones), so another tenant's id is simply not found. Times come
 * from the caller (Effect's Clock), never from the database's `now()`, so one
 * clock rules the schedule and TestClock can drive it.
 *
 * Delivery concurrency is settled here, in SQL:
 * - a subscription's deliveries are sent by whoever holds its lease
 *   (`webhooks.lease_owner`/`lease_until`), taken with `FOR UPDATE SKIP LOCKED`
 *   only when free or expired: one sender per subscription across all nodes;
 * - the lease is extended before every attempt and is longer than an attempt
 *   can last, so it cannot lapse mid-attempt;
 * - an attempt's result is written only while the delivery is still `pending`
 *   at the attempt count the sender read: a subscription deleted meanwhile
 *   stays cancelled, and a stale sender cannot overwrite a newer result.
 *
 * The queries are top-level steps over a {@link StoreContext} (store/subscriptions.ts,
 * store/leases.ts, store/deliveries.ts, store/recordAttempts.ts); this layer only wires them.
 *
 * @since 0.1.0
 */
import { Context, type Effect, Layer, type Option } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import type { Mode } from "@pps/api/ApiKeys"
import type { DeliveryRecord, Webhook } from "@pps/api/Webhooks"
import * as Deliveries from "./store/deliveries.ts"
import * as Leases from "./store/leases.ts"
import { type ClaimOptions } from "./store/leases.ts"
import { type RecordedAttempt, recordAttempts } from "./store/recordAttempts.ts"
import {
  type AttemptRecord,
  type DueBatch,
  type DueDelivery,
  makeStoreContext,
  type NewDelivery,
  type SendingInfo,
  type StoreContext
} from "./store/rows.ts"
import * as Subscriptions from "./store/subscriptions.ts"
import { type RotateSecretOptions, type UpdateOptions } from "./store/subscriptions.ts"

export type { AttemptRecord, ClaimOptions, DueBatch, DueDelivery, NewDelivery, RecordedAttempt, RotateSecretOptions, SendingInfo, UpdateOptions }

/**
 * @since 0.1.0
 * @category services
 */
export class WebhookStore extends Context.Service<WebhookStore, {
  readonly insert: (webhook: Webhook & { readonly secretSealed: Uint8Array }) => Effect.Effect<void, SqlError.SqlError>
  readonly countActive: (accountId: string, mode: Mode) => Effect.Effect<number, SqlError.SqlError>
  readonly listActive: (accountId: string, mode: Mode) => Effect.Effect<ReadonlyArray<Webhook>, SqlError.SqlError>
  readonly findActive: (
    webhookId: string,
    accountId: string,
    mode: Mode
  ) => Effect.Effect<Option.Option<Webhook>, SqlError.SqlError>
  /** Marks it deleted and cancels its pending deliveries, in one transaction; false when not found. */
  readonly softDelete: (webhookId: string, accountId: string, mode: Mode, at: string) => Effect.Effect<boolean, SqlError.SqlError>
  readonly rotateSecret: (options: RotateSecretOptions) => Effect.Effect<boolean, SqlError.SqlError>
  /** D59: changes url, events or enabled; None when not found. */
  readonly update: (options: UpdateOptions) => Effect.Effect<Option.Option<Webhook>, SqlError.SqlError>
  /** D59: whether the operator lets the account (in the mode) deliver to loopback. */
  readonly loopbackGranted: (accountId: string, mode: Mode) => Effect.Effect<boolean, SqlError.SqlError>
  readonly setLoopbackGrant: (accountId: string, mode: Mode, allowed: boolean, at: string) => Effect.Effect<void, SqlError.SqlError>
  /** Active subscriptions of these accounts (for fan-out). */
  readonly subscribersOf: (accountIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<Webhook>, SqlError.SqlError>
  /** Inserts deliveries; a second fan-out of the same event to the same subscription is ignored. */
  readonly insertDeliveries: (deliveries: ReadonlyArray<NewDelivery>, nextAttemptAt: string) => Effect.Effect<number, SqlError.SqlError>
  readonly listDeliveries: (
    webhookId: string,
    limit: number,
    offset: number
  ) => Effect.Effect<ReadonlyArray<DeliveryRecord>, SqlError.SqlError>
  /** Takes the lease of up to `limit` free subscriptions that have a due delivery. */
  readonly claimSubscriptions: (options: ClaimOptions) => Effect.Effect<ReadonlyArray<string>, SqlError.SqlError>
  /** Extends a held lease; false when it is not ours any more or the subscription was deleted. */
  readonly extendLease: (webhookId: string, nodeId: string, leaseUntil: string) => Effect.Effect<boolean, SqlError.SqlError>
  readonly releaseLease: (webhookId: string, nodeId: string) => Effect.Effect<void, SqlError.SqlError>
  /** Embedded mode only (one process owns the database): drops leases a killed process left. */
  readonly releaseAllLeases: Effect.Effect<void, SqlError.SqlError>
  /** The earliest due time after `now` of any pending delivery (an index lookup). */
  readonly nextDueAfter: (now: string) => Effect.Effect<Option.Option<number>, SqlError.SqlError>
  readonly sendingInfo: (webhookId: string) => Effect.Effect<Option.Option<SendingInfo>, SqlError.SqlError>
  /**
   * A subscription's sending info and its due deliveries (oldest due first, at most `limit`, none
   * of `excluding`: sent, their results not yet written), in one statement; None when it is
   * deleted or disabled.
   */
  readonly dueDeliveries: (
    webhookId: string,
    now: string,
    limit: number,
    excluding: ReadonlyArray<string>
  ) => Effect.Effect<Option.Option<DueBatch>, SqlError.SqlError>
  /**
   * Logs attempts, moves their deliveries on (`recorded` is false for a
   * delivery no longer pending at that count) and renews each sender's lease,
   * all in one statement (`leaseHeld` is false when the lease was lost or the
   * subscription deleted: that sender must stop). Batched because on one
   * database connection (PGlite) the statement count bounds throughput. `waitForDisk` false
   * (default true): the commit does not wait for the disk (D72).
   */
  readonly recordAttempts: (
    attempts: ReadonlyArray<AttemptRecord>,
    waitForDisk?: boolean
  ) => Effect.Effect<ReadonlyArray<RecordedAttempt>, SqlError.SqlError>
}>()("server/webhooks/WebhookStore") {
  static readonly layer = Layer.effect(
    WebhookStore,
    SqlClient.SqlClient.useSync((sql) => storeOf(makeStoreContext(sql)))
  )
}

const storeOf = (context: StoreContext): WebhookStore["Service"] =>
  WebhookStore.of({
    insert: (webhook) => Subscriptions.insert(context, webhook),
    countActive: (accountId, mode) => Subscriptions.countActive(context, accountId, mode),
    listActive: (accountId, mode) => Subscriptions.listActive(context, accountId, mode),
    findActive: (webhookId, accountId, mode) => Subscriptions.findActive(context, webhookId, accountId, mode),
    softDelete: (webhookId, accountId, mode, at) => Subscriptions.softDelete(context, webhookId, accountId, mode, at),
    rotateSecret: (options) => Subscriptions.rotateSecret(context, options),
    update: (options) => Subscriptions.update(context, options),
    loopbackGranted: (accountId, mode) => Subscriptions.loopbackGranted(context, accountId, mode),
    setLoopbackGrant: (accountId, mode, allowed, at) => Subscriptions.setLoopbackGrant(context, accountId, mode, allowed, at),
    subscribersOf: (accountIds) => Subscriptions.subscribersOf(context, accountIds),
    sendingInfo: (webhookId) => Subscriptions.sendingInfo(context, webhookId),
    insertDeliveries: (rows, nextAttemptAt) => Deliveries.insertDeliveries(context, rows, nextAttemptAt),
    listDeliveries: (webhookId, limit, offset) => Deliveries.listDeliveries(context, webhookId, limit, offset),
    nextDueAfter: (now) => Deliveries.nextDueAfter(context, now),
    dueDeliveries: (webhookId, now, limit, excluding) => Deliveries.dueDeliveries(context, webhookId, now, limit, excluding),
    claimSubscriptions: (options) => Leases.claimSubscriptions(context, options),
    extendLease: (webhookId, nodeId, leaseUntil) => Leases.extendLease(context, webhookId, nodeId, leaseUntil),
    releaseLease: (webhookId, nodeId) => Leases.releaseLease(context, webhookId, nodeId),
    releaseAllLeases: Leases.releaseAllLeases(context),
    recordAttempts: (attempts, waitForDisk) => recordAttempts(context, attempts, waitForDisk)
  })
