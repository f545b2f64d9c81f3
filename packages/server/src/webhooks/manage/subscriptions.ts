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
  type UpdateWebhookRequest,
  type WebhookRecord
} from "@pps/api/Webhooks"
import { makeId } from "../../platform/Ids.ts"
import { database } from "../../platform/Unavailable.ts"
import type { UrlRefusal } from "../AddressPolicy.ts"
import { generateSecret } from "../Signature.ts"
import { encoder, iso, type Owner, type WebhooksContext } from "./WebhooksContext.ts"

/**
 * How to get a receiver on this machine accepted (D59): the operator's grant for the account,
 * named in every refusal a local receiver can meet.
 */
const loopbackHow = (owner: Owner) =>
  `A receiver on this machine (http://127.0.0.1:PORT/...) needs the operator to allow loopback for this account: ` +
  `npm run -s admin -- webhook-loopback allow --account ${owner.accountId} --mode ${owner.mode} (no restart needed).`

const urlMessage = (reason: UrlRefusal | "own_port", owner: Owner): string => {
  switch (reason) {
    case "malformed":
      return "The body field 'url' is not a valid absolute URL."
    case "scheme":
      return `The body field 'url' must use https. ${loopbackHow(owner)}`
    case "credentials":
      return "The body field 'url' must not contain a user name or password."
    case "address":
      return `The body field 'url' points to an address deliveries may not reach (private, loopback, link-local or metadata). ${loopbackHow(owner)}`
    case "own_port":
      return "The body field 'url' names a port of this service itself; a loopback receiver must listen on another port."
  }
}

/** D33 and D59: a subscription URL, checked for its account (with the operator's loopback grant, if any). */
const checkedUrl = Effect.fn("Webhooks.checkedUrl")(function*({ client, store }: WebhooksContext, owner: Owner, url: string) {
  const granted = yield* store.loopbackGranted(owner.accountId, owner.mode)
  const checked = client.check(url, granted)
  if (checked._tag === "Refused") return yield* Effect.fail(InvalidRequest.of(urlMessage(checked.reason, owner), { param: "url" }))
  // The normalised form (WHATWG): what is shown is what deliveries use.
  return checked.url.href
})

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
  context: WebhooksContext,
  owner: Owner,
  input: { readonly url: string; readonly events: ReadonlyArray<string> }
) {
  const { box, operations, sql, store } = context
  const url = yield* checkedUrl(context, owner, input.url)
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
    url,
    eventTypes: parsed.types,
    enabled: true,
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

/** D59: one subscription of the caller's. */
export const get = (context: WebhooksContext, owner: Owner, webhookId: string) =>
  requireWebhook(context, owner, webhookId).pipe(Effect.map(toWebhookRecord), database("Webhooks.get"))

/**
 * D59: changes url, events or enabled; absent fields stay, and each present one is checked as at
 * creation. Disabling keeps the pending deliveries, which wait until the subscription is enabled.
 */
export const update = Effect.fn("Webhooks.update")(function*(
  context: WebhooksContext,
  owner: Owner,
  webhookId: string,
  input: UpdateWebhookRequest
) {
  yield* requireWebhook(context, owner, webhookId)
  const url = input.url === undefined ? undefined : yield* checkedUrl(context, owner, input.url)
  let eventTypes: ReadonlyArray<string> | undefined
  if (input.events !== undefined) {
    const parsed = parseEventTypes(input.events)
    if (parsed._tag === "Invalid") return yield* Effect.fail(InvalidRequest.of(parsed.message, { param: parsed.param }))
    eventTypes = parsed.types
  }
  const nowMs = yield* Clock.currentTimeMillis
  const updated = yield* context.store.update({
    webhookId,
    accountId: owner.accountId,
    mode: owner.mode,
    url,
    eventTypes,
    enabled: input.enabled,
    at: iso(nowMs)
  })
  if (Option.isNone(updated)) return yield* Effect.fail(WebhookNotFound.of(webhookId))
  // Enabled again: its waiting deliveries are due now, so the dispatcher looks at once.
  if (input.enabled === true) yield* context.dispatcher.wake
  return toWebhookRecord(updated.value)
}, database("Webhooks.update"))

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
