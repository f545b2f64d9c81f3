/**
 * The server's services without listeners, for tests that drive events and
 * webhooks directly (through the services the HTTP handlers use), on the
 * clock of the calling fiber: inside `it.effect` that is TestClock, so the
 * relay, fan-out and delivery worker run on virtual time.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Context, Effect, Layer, Logger, Option, References } from "effect"
import { SqlClient } from "effect/sql"
import { Accounts } from "../../src/accounts/Accounts.ts"
import type { Mode } from "@pps/api/ApiKeys"
import { type AppConfigShape, AppConfig } from "../../src/config/AppConfig.ts"
import type { EventInput, EventType } from "@pps/api/Events"
import { Outbox } from "../../src/events/Outbox.ts"
import { formatLogLine } from "../../src/platform/Logging.ts"
import { MigrationsLive, SqlLive } from "../../src/platform/Database.ts"
import { DataDir } from "../../src/platform/DataDir.ts"
import { OperationReplay } from "../../src/platform/IdempotentOperations.ts"
import { SecretBox } from "../../src/platform/SecretBox.ts"
import { Secrets } from "../../src/platform/Secrets.ts"
import { EventsAndWebhooksLive } from "../../src/webhooks/EventsAndWebhooksLive.ts"
import { Webhooks } from "../../src/webhooks/Webhooks.ts"
import { testConfig } from "./TestServer.ts"

/**
 * Only what events and webhooks need (and accounts, to have owners): other
 * concerns' workers stay out, so virtual time moves only these.
 */
export const EventsServicesLive = Layer.mergeAll(EventsAndWebhooksLive, Accounts.layer).pipe(
  Layer.provideMerge(SecretBox.layer),
  Layer.provideMerge(OperationReplay.layer),
  Layer.provideMerge(MigrationsLive),
  Layer.provideMerge(SqlLive),
  Layer.provideMerge(Secrets.layer),
  Layer.provideMerge(DataDir.layer)
)

export type Services = Context.Context<Layer.Success<typeof EventsServicesLive>>

/** Builds the services in the current scope; returns them and the captured log lines. */
export const buildServices = (overrides: Partial<AppConfigShape> = {}) =>
  Effect.gen(function*() {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "pps-wh-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dataDir, { recursive: true, force: true })))
    const logs: Array<string> = []
    const capture = Logger.make((options) => {
      logs.push(formatLogLine(options))
    })
    const services = yield* Layer.build(
      EventsServicesLive.pipe(
        Layer.provideMerge(Layer.succeed(AppConfig, testConfig(dataDir, overrides))),
        Layer.provide(Layer.mergeAll(Logger.layer([capture]), Layer.succeed(References.MinimumLogLevel, "Debug")))
      )
    )
    return { services, logs, dataDir }
  })

/** A fresh account; returns its id and canonical handle. */
export const newAccount = (services: Context.Context<Accounts>, handle: string, ownerAccountId?: string) =>
  Context.get(services, Accounts).create({
    handle,
    type: ownerAccountId === undefined ? "personal" : "agent",
    kycStatus: "verified",
    ...(ownerAccountId === undefined ? {} : { ownerAccountId })
  }).pipe(Effect.orDie)

export const newWebhook = (
  services: Context.Context<Webhooks>,
  owner: { readonly accountId: string; readonly mode: Mode },
  url: string,
  events: ReadonlyArray<EventType> = ["transfer.confirmed"]
) => Context.get(services, Webhooks).create(owner, { url, events }).pipe(Effect.orDie)

export const append = (services: Context.Context<Outbox>, events: ReadonlyArray<EventInput>) =>
  Context.get(services, Outbox).append(events).pipe(Effect.orDie)

/** A `transfer.confirmed` event for `accountId`. */
export const confirmedEvent = (accountId: string, handle: string, mode: Mode = "test", transferId = "tr_TEST"): EventInput => ({
  mode,
  recipientAccountId: accountId,
  payload: {
    event: "transfer.confirmed",
    account: `@${handle}`,
    direction: "sent",
    counterparty: "@somebody",
    asset: "USDG",
    confidential: true,
    tx_hash: `0x${"ab".repeat(32)}`,
    transfer_id: transferId
  }
})

export interface DeliveryRow {
  readonly delivery_id: string
  readonly event_id: string
  readonly status: string
  readonly attempt_count: number
  readonly next_attempt_ms: number | null
  readonly created_ms: number
}

/** Reads the deliveries of a subscription straight from the database. */
export const deliveriesOf = (services: Context.Context<SqlClient.SqlClient>, webhookId: string) =>
  Effect.gen(function*() {
    const sql = Context.get(services, SqlClient.SqlClient)
    const rows = yield* sql<{
      delivery_id: string
      event_id: string
      status: string
      attempt_count: number
      next_attempt_ms: string | null
      created_ms: string
    }>`
      SELECT delivery_id, event_id, status, attempt_count,
             (extract(epoch FROM next_attempt_at) * 1000)::bigint::text AS next_attempt_ms,
             (extract(epoch FROM created_at) * 1000)::bigint::text AS created_ms
      FROM webhook_deliveries WHERE webhook_id = ${webhookId} ORDER BY created_at, delivery_id`
    return rows.map((row): DeliveryRow => ({
      ...row,
      next_attempt_ms: row.next_attempt_ms === null ? null : Number(row.next_attempt_ms),
      created_ms: Number(row.created_ms)
    }))
  }).pipe(Effect.orDie)

export interface AttemptRow {
  readonly attempt_number: number
  readonly started_ms: number
  readonly response_status_code: number | null
  readonly error: string | null
}

export const attemptsOf = (services: Context.Context<SqlClient.SqlClient>, deliveryId: string) =>
  Effect.gen(function*() {
    const sql = Context.get(services, SqlClient.SqlClient)
    const rows = yield* sql<{ attempt_number: number; started_ms: string; response_status_code: number | null; error: string | null }>`
      SELECT attempt_number, (extract(epoch FROM started_at) * 1000)::bigint::text AS started_ms, response_status_code, error
      FROM webhook_attempts WHERE delivery_id = ${deliveryId} ORDER BY attempt_number`
    return rows.map((row): AttemptRow => ({ ...row, started_ms: Number(row.started_ms) }))
  }).pipe(Effect.orDie)

export const noOverrides: Partial<AppConfigShape> = { databaseUrl: Option.none() }
