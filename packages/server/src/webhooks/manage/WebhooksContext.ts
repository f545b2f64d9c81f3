/**
 * What every step of the subscription API runs over (Webhooks.ts builds it once).
 *
 * @since 0.8.0
 */
import { DateTime } from "effect"
import type { SqlClient } from "effect/sql"
import type { Mode } from "@pps/api/ApiKeys"
import type { AppConfig } from "../../config/AppConfig.ts"
import type { EventStore } from "../../events/EventStore.ts"
import type { OperationReplay } from "../../platform/IdempotentOperations.ts"
import type { SecretBox } from "../../platform/SecretBox.ts"
import type { Dispatcher } from "../Dispatcher.ts"
import type { WebhookClient } from "../WebhookClient.ts"
import type { WebhookStore } from "../WebhookStore.ts"

/**
 * Whose subscriptions: the API key's account and mode.
 *
 * @since 0.1.0
 * @category models
 */
export interface Owner {
  readonly accountId: string
  readonly mode: Mode
}

/**
 * @since 0.8.0
 * @category models
 */
export interface WebhooksContext {
  readonly config: AppConfig["Service"]
  readonly store: WebhookStore["Service"]
  readonly events: EventStore["Service"]
  readonly box: SecretBox["Service"]
  readonly client: WebhookClient["Service"]
  readonly dispatcher: Dispatcher["Service"]
  readonly sql: SqlClient.SqlClient
  readonly operations: OperationReplay["Service"]
}

/** @internal */
export const iso = (ms: number) => DateTime.formatIso(DateTime.makeUnsafe(ms))

/** @internal */
export const encoder = new TextEncoder()
