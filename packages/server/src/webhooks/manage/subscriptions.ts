/**
 * The subscription API's steps: create, list, delete, rotate the secret (ext). Everything is
 * scoped to the caller's account and mode: another account's subscription, or one of the other
 * mode, is not found. Secrets are generated here, sealed under the KEK with the subscription id
 * as associated data, and returned only by create and rotate. A store failure is typed as the
 * database being unavailable (answered 503).
 *
 * @since 0.8.0
 */
import { Clock, Effect, Option } from "effect"
import { InvalidRequest, WebhookNotFound } from "@pps/api/Errors"
import {
  type CreatedWebhook,
  parseEventTypes,
  type RotatedSecret,
  secretBinding,
  subscriptionsPerAccountMax,
  toWebhookRecord,
  type WebhookRecord
} from "@pps/api/Webhooks"
import { makeId } from "../../platform/Ids.ts"
import { database } from "../../platform/Unavailable.ts"
import { checkUrl, type UrlRefusal } from "../AddressPolicy.ts"
import { generateSecret } from "../Signature.ts"
import { encoder, iso, type Owner, type WebhooksContext } from "./WebhooksContext.ts"

const urlMessages: Record<UrlRefusal, string> = {
  malformed: "The body field 'url' is not a valid absolute URL.",
  scheme: "The body field 'url' must use https (http is allowed only to loopback when the operator enables it).",
  credentials: "The body field 'url' must not contain a user name or password.",
  address: "The body field 'url' points to an address deliveries may not reach (private, loopback, link-local or metadata)."
}

/**
 * The caller's subscription, or 404 `webhook_not_found`.
 *
 * @since 0.8.0
 */
export const requireWebhook = ({ store }: WebhooksContext, owner: Owner, webhookId: string) =>
  store.findActive(webhookId, owner.accountId, owner.mode).pipe(
    Effect.flatMap(Option.match({
      onNone: () => Effect.fail(WebhookNotFound.of(webhookId)),
      onSome: Effect.succeed
    }))
  )

/** @since 0.8.0 */
export const create = Effect.fn("Webhooks.create")(function*(
  { box, client, operations, sql, store }: WebhooksContext,
  owner: Owner,
  input: { readonly url: string; readonly events: ReadonlyArray<string> }
) {
  const checked = checkUrl(client.policy, input.url)
  if (checked._tag === "Refused") {
    return yield* Effect.fail(InvalidRequest.of(urlMessages[checked.reason], { param: "url" }))
  }
  const parsed = parseEventTypes(input.events)
  if (parsed._tag === "Invalid") return yield* Effect.fail(InvalidRequest.of(parsed.message, { param: parsed.param }))
  if ((yield* store.countActive(owner.accountId, owner.mode)) >= subscriptionsPerAccountMax) {
    return yield* Effect.fail(
      InvalidRequest.of(`An account may have at most ${subscriptionsPerAccountMax} webhook subscriptions per mode.`)
    )
  }
  const nowMs = yield* Clock.currentTimeMillis
  const webhookId = makeId("wh", nowMs)
  const secret = generateSecret()
  const webhook = {
    webhookId,
    accountId: owner.accountId,
    mode: owner.mode,
    // The normalised form (WHATWG): what is shown is what deliveries use.
    url: checked.url.href,
    eventTypes: parsed.types,
    createdAt: iso(nowMs)
  }
  yield* sql.withTransaction(Effect.gen(function*() {
    yield* store.insert({ ...webhook, secretSealed: box.seal(encoder.encode(secret), secretBinding(webhookId)) })
    yield* operations.bind("webhook", webhookId)
  }))
  const record = toWebhookRecord(webhook)
  const created: CreatedWebhook = {
    webhook_id: record.webhook_id,
    url: record.url,
    events: record.events,
    secret,
    created_at: record.created_at
  }
  return created
}, database("Webhooks.create"))

/** @since 0.8.0 */
export const list = ({ store }: WebhooksContext, owner: Owner) =>
  store.listActive(owner.accountId, owner.mode).pipe(
    Effect.map((rows): ReadonlyArray<WebhookRecord> => rows.map(toWebhookRecord)),
    database("Webhooks.list")
  )

/** @since 0.8.0 */
export const remove = Effect.fn("Webhooks.remove")(function*(
  { dispatcher, store }: WebhooksContext,
  owner: Owner,
  webhookId: string
) {
  const nowMs = yield* Clock.currentTimeMillis
  const deleted = yield* store.softDelete(webhookId, owner.accountId, owner.mode, iso(nowMs))
  if (!deleted) return yield* Effect.fail(WebhookNotFound.of(webhookId))
  yield* dispatcher.cancel(webhookId)
}, database("Webhooks.remove"))

/** @since 0.8.0 */
export const rotateSecret = Effect.fn("Webhooks.rotateSecret")(function*(
  { box, config, store }: WebhooksContext,
  owner: Owner,
  webhookId: string
) {
  const nowMs = yield* Clock.currentTimeMillis
  const secret = generateSecret()
  const previousExpiresAt = iso(nowMs + config.webhookSecretOverlapSeconds * 1_000)
  const rotated = yield* store.rotateSecret({
    webhookId,
    accountId: owner.accountId,
    mode: owner.mode,
    // The previous secret is re-sealed as is: it never leaves its sealed form here.
    seal: (previous) => Effect.succeed({ current: box.seal(encoder.encode(secret), secretBinding(webhookId)), previous }),
    previousExpiresAt
  })
  if (!rotated) return yield* Effect.fail(WebhookNotFound.of(webhookId))
  const answer: RotatedSecret = { webhook_id: webhookId, secret, previous_secret_expires_at: previousExpiresAt }
  return answer
}, database("Webhooks.rotateSecret"))
