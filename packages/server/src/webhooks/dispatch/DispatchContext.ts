/**
 * What every step of the webhook delivery worker runs over (Dispatcher.ts builds it once per
 * node), and the worker's limits with their reasons.
 *
 * @since 0.8.0
 */
import { DateTime, type Fiber, type Scope } from "effect"
import type { AppConfig } from "../../config/AppConfig.ts"
import type { Wakeup } from "../../events/Wakeup.ts"
import type { SecretBox } from "../../platform/SecretBox.ts"
import { attemptTimeoutMs, type WebhookClient } from "../WebhookClient.ts"
import type { WebhookStore } from "../WebhookStore.ts"
import type { AttemptRecorder } from "./recordAttempts.ts"

/** A subscription's lease: renewed before each attempt, so it must outlast one. */
export const leaseMs = 30_000
/**
 * A lease this node set less than this long ago is not renewed again before a batch: the claim and
 * every attempt's record renew it, so each serving round would otherwise cost one more UPDATE
 * (where a round serves one delivery, at a steady trickle of events, that is a large share of a
 * delivery's statements). What is left of such a lease (25 s) still outlasts an attempt (10 s)
 * with room for clocks that disagree between nodes.
 */
export const leaseFreshMs = 5_000
/** Attempt results written per statement (at most `dueBatchMax` per served subscription are waiting). */
export const recordBatchMax = 256
/**
 * How long the result writer waits, at most, for the results of requests in flight before it
 * writes a batch (recordAttempts.ts): a commit syncs the disk (a few milliseconds, on the
 * embedded database's thread, which is the caller's), so results written one a commit bound a
 * busy subscription at one sync a delivery. It ends early when a batch is full or a sender
 * hurries it (it waits for a result, or has `senderHurryAt` unwritten), so this bound matters
 * only to results no sender waits for yet.
 */
export const recordLingerMs = 50
/**
 * Due deliveries read per query while serving a subscription; also how many of its attempts may
 * be sent before their results are written (serveSubscription.ts waits for the oldest before it
 * sends more): what a crash can send again, besides what D72 allows.
 */
export const dueBatchMax = 50
/**
 * A sender with this many results unwritten hurries the writer: half its room, so a sender
 * alone is never stopped by its room while the writer lingers for more.
 */
export const senderHurryAt = dueBatchMax / 2
/** The shortest wait between claim rounds, so a due delivery another node is serving cannot spin the loop. */
export const idleWaitMinMs = 20
/** After a failed claim round (database down), wait this long. */
export const failureBackoffMs = 1_000

if (leaseMs - leaseFreshMs < 2 * attemptTimeoutMs) throw new Error("the delivery lease must outlast an attempt twice over")

/** @internal */
export const iso = (ms: number) => DateTime.formatIso(DateTime.makeUnsafe(ms))

/**
 * A subscription this node serves; `fiber` is set once its server is forked.
 *
 * @since 0.8.0
 * @category models
 */
export interface Serving {
  fiber?: Fiber.Fiber<void>
}

/**
 * @since 0.8.0
 * @category models
 */
export interface DispatchContext {
  readonly config: AppConfig["Service"]
  readonly store: WebhookStore["Service"]
  readonly client: WebhookClient["Service"]
  readonly box: SecretBox["Service"]
  /** The layer's scope: serving fibers live as long as the node. */
  readonly scope: Scope.Scope
  /** This node's lease owner id. */
  readonly nodeId: string
  readonly wakeup: Wakeup
  /** The subscriptions this node serves now, so a delete can interrupt its server. */
  readonly serving: Map<string, Serving>
  /** Queues attempts' results to be written together, and counts requests in flight (see recordAttempts.ts). */
  readonly recorder: AttemptRecorder
  /**
   * The clock reading of the last round's claim: `waitForWork` looks for what falls due after
   * it, not after its own later reading, so a delivery that fell due while the claim's query
   * ran (time passes in a query: a loaded database, or the embedded one on its own thread) is
   * claimed at the next round instead of after a whole poll interval.
   */
  claimedAtMs: number
}
