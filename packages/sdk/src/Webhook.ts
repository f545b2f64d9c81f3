/**
 * Receiving webhook deliveries: check the signature over the exact raw body
 * bytes, in constant time, and only then parse the JSON.
 *
 * Every delivery carries `X-Service-Signature`: the lowercase hex
 * HMAC-SHA256 of the raw body, keyed with the UTF-8 bytes of the whole secret
 * (`whsec_...`). It also carries the Standard Webhooks headers
 * (`webhook-id`, `webhook-timestamp`, `webhook-signature`); when they are
 * present `verify` checks them too and refuses a delivery whose timestamp is
 * more than `toleranceSeconds` (default 300) away from now, so a captured
 * request cannot be replayed later. During a secret rotation pass both
 * secrets: a delivery signed with either is accepted.
 *
 * Always hand `verify` the body exactly as received (a Buffer or the raw
 * string), never a re-serialised JSON object: re-encoding changes the bytes
 * and the signature no longer matches.
 *
 * @example
 * ```ts
 * import { createServer } from "node:http"
 * import { Webhook } from "@pps/sdk"
 *
 * const secret = process.env.PPS_WEBHOOK_SECRET! // whsec_..., shown once at creation
 *
 * createServer((request, response) => {
 *   const chunks: Array<Buffer> = []
 *   request.on("data", (chunk) => chunks.push(chunk))
 *   request.on("end", () => {
 *     try {
 *       const event = Webhook.verify({ payload: Buffer.concat(chunks), headers: request.headers, secret })
 *       // Deduplicate on event.id (= webhook-id): a delivery may arrive more than once.
 *       console.log(event.event, event.id)
 *       response.writeHead(204).end()
 *     } catch (error) {
 *       response.writeHead(error instanceof Webhook.WebhookVerificationError ? 401 : 500).end()
 *     }
 *   })
 * }).listen(3000)
 * ```
 *
 * @since 0.1.0
 */
import type { AgentPolicyEventPayload, AgentTransactionEventPayload, EventPayload, TransferEventPayload } from "@pps/api/Events"
import { equalConstantTime, hmacBase64, hmacHex } from "./internal/hmac.ts"

/**
 * Every event type a subscription may ask for (D30, ext `agent.transaction.expired`), as the
 * contract declares them.
 *
 * @since 0.4.0
 * @category models
 */
export { eventTypes } from "@pps/api/Events"

/**
 * Why a delivery was refused.
 *
 * @since 0.1.0
 * @category models
 */
export type VerificationFailure =
  | "missing_signature"
  | "signature_mismatch"
  | "timestamp_out_of_tolerance"
  | "invalid_payload"

/**
 * A delivery did not verify; answer it with 4xx and do not process it.
 *
 * @since 0.1.0
 * @category errors
 */
export class WebhookVerificationError extends Error {
  override readonly name = "WebhookVerificationError"
  readonly reason: VerificationFailure
  constructor(reason: VerificationFailure) {
    super(`webhook delivery refused: ${reason}`)
    this.reason = reason
  }
}

/**
 * Request headers as Node (`IncomingHttpHeaders`) or fetch (`Headers`) give them.
 *
 * @since 0.1.0
 * @category models
 */
export type HeadersLike =
  | { readonly get: (name: string) => string | null }
  | Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

/**
 * `transfer.initiated`, `transfer.confirmed`, `transfer.failed`: the contract's payload
 * (`@pps/api/Events`). There is no amount: amounts are encrypted and the service cannot
 * read them.
 *
 * @since 0.1.0
 * @category models
 */
export type TransferEvent = TransferEventPayload

/**
 * `agent.transaction.*`: the contract's payload (`@pps/api/Events`).
 *
 * @since 0.1.0
 * @category models
 */
export type AgentTransactionEvent = AgentTransactionEventPayload

/**
 * `agent.policy.updated`: the contract's payload (`@pps/api/Events`).
 *
 * @since 0.1.0
 * @category models
 */
export type AgentPolicyEvent = AgentPolicyEventPayload

/**
 * Any event a delivery carries, discriminated by `event`: the contract's `EventPayload`.
 *
 * @since 0.1.0
 * @category models
 */
export type WebhookEvent = EventPayload

const encoder = new TextEncoder()
const secretPrefix = "whsec_"

const headerOf = (headers: HeadersLike, name: string): string | undefined => {
  if ("get" in headers && typeof headers.get === "function") return headers.get(name) ?? undefined
  const record = headers as Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  const value = record[name] ?? record[name.toLowerCase()]
  return typeof value === "string" ? value : value?.[0]
}

const bytesOf = (payload: Uint8Array | string): Uint8Array => (typeof payload === "string" ? encoder.encode(payload) : payload)

const secretsOf = (secret: string | ReadonlyArray<string>): ReadonlyArray<string> =>
  typeof secret === "string" ? [secret] : secret

/**
 * The `X-Service-Signature` a body should carry under a secret.
 *
 * @since 0.1.0
 * @category signatures
 */
export const sign = (payload: Uint8Array | string, secret: string): string =>
  hmacHex(encoder.encode(secret), bytesOf(payload))

/**
 * Whether `signature` (the `X-Service-Signature` value) is the body's HMAC
 * under any of the secrets; compared in constant time.
 *
 * @since 0.1.0
 * @category signatures
 */
export const verifySignature = (options: {
  readonly payload: Uint8Array | string
  readonly signature: string | null | undefined
  readonly secret: string | ReadonlyArray<string>
}): boolean => {
  if (options.signature === null || options.signature === undefined) return false
  const body = bytesOf(options.payload)
  let matched = false
  // Every secret is tried (no early exit), so timing does not tell which matched.
  for (const secret of secretsOf(options.secret)) {
    if (equalConstantTime(sign(body, secret), options.signature.trim())) matched = true
  }
  return matched
}

const verifyStandard = (
  body: Uint8Array,
  secrets: ReadonlyArray<string>,
  id: string,
  timestamp: string,
  signatures: string
): boolean => {
  const offered = signatures.split(" ").filter((entry) => entry.startsWith("v1,")).map((entry) => entry.slice(3))
  let matched = false
  for (const secret of secrets) {
    if (!secret.startsWith(secretPrefix)) continue
    const key = Buffer.from(secret.slice(secretPrefix.length), "base64")
    const expected = hmacBase64(key, [encoder.encode(`${id}.${timestamp}.`), body])
    for (const signature of offered) if (equalConstantTime(expected, signature)) matched = true
  }
  return matched
}

/**
 * Verifies a delivery and returns its event; throws WebhookVerificationError
 * before parsing anything when the signature does not match.
 *
 * @since 0.1.0
 * @category verification
 */
export const verify = (options: {
  /** The raw body bytes (or string) exactly as received. */
  readonly payload: Uint8Array | string
  readonly headers: HeadersLike
  /** The subscription's secret; during a rotation, both. */
  readonly secret: string | ReadonlyArray<string>
  /** Largest accepted distance of `webhook-timestamp` from now; null skips the check. Default 300. */
  readonly toleranceSeconds?: number | null
  /** Now, in Unix seconds (for tests). */
  readonly nowSeconds?: number
}): WebhookEvent => {
  const body = bytesOf(options.payload)
  const secrets = secretsOf(options.secret)
  const current = headerOf(options.headers, "x-service-signature")
  const previous = headerOf(options.headers, "x-service-signature-previous")
  if (current === undefined) throw new WebhookVerificationError("missing_signature")
  const signed = verifySignature({ payload: body, signature: current, secret: secrets }) ||
    verifySignature({ payload: body, signature: previous, secret: secrets })
  if (!signed) throw new WebhookVerificationError("signature_mismatch")
  const id = headerOf(options.headers, "webhook-id")
  const timestamp = headerOf(options.headers, "webhook-timestamp")
  const standard = headerOf(options.headers, "webhook-signature")
  const tolerance = options.toleranceSeconds === undefined ? 300 : options.toleranceSeconds
  if (tolerance !== null) {
    if (id === undefined || timestamp === undefined || standard === undefined) {
      throw new WebhookVerificationError("missing_signature")
    }
    if (!verifyStandard(body, secrets, id, timestamp, standard)) throw new WebhookVerificationError("signature_mismatch")
    const nowSeconds = options.nowSeconds ?? Math.floor(Date.now() / 1000)
    if (!/^\d{1,12}$/.test(timestamp) || Math.abs(nowSeconds - Number(timestamp)) > tolerance) {
      throw new WebhookVerificationError("timestamp_out_of_tolerance")
    }
  }
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body)) as WebhookEvent
  } catch {
    throw new WebhookVerificationError("invalid_payload")
  }
}

/**
 * A new signing secret (`whsec_` and 32 random bytes, base64), as the service makes them.
 *
 * @since 0.3.0
 * @category signatures
 */
export const generateSecret = (): string => {
  const bytes = new Uint8Array(32)
  globalThis.crypto.getRandomValues(bytes)
  return `${secretPrefix}${Buffer.from(bytes).toString("base64")}`
}

/**
 * The headers a delivery of `payload` carries under `secret` (D31: `X-Service-Signature`
 * and the Standard Webhooks trio), so that `verify` accepts it. `pps listen` signs what it
 * forwards with these.
 *
 * @since 0.3.0
 * @category signatures
 */
export const signedHeaders = (options: {
  readonly payload: Uint8Array | string
  readonly secret: string
  readonly eventId: string
  readonly deliveryId: string
  readonly timestampSeconds: number
}): Record<string, string> => {
  const body = bytesOf(options.payload)
  const key = Buffer.from(options.secret.slice(secretPrefix.length), "base64")
  const standard = hmacBase64(key, [encoder.encode(`${options.eventId}.${options.timestampSeconds}.`), body])
  return {
    "content-type": "application/json",
    "x-service-signature": sign(body, options.secret),
    "x-service-event-id": options.eventId,
    "x-service-delivery-id": options.deliveryId,
    "webhook-id": options.eventId,
    "webhook-timestamp": String(options.timestampSeconds),
    "webhook-signature": `v1,${standard}`
  }
}
