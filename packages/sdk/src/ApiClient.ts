/**
 * The typed client of the API for Effect programs, derived from the contract
 * (`@pps/api`) with Effect's `HttpApiClient`: one method per operation, grouped as
 * the contract groups them (`client.transfers.list({ query })`,
 * `client.webhooks.remove({ params })`, ...), its arguments and answers typed by the
 * wire schemas, and each declared error decoded into the contract's error class
 * (`TransferNotFound`, `InsufficientBalance`, ...: match them with `Effect.catchTag`).
 * Nothing here is written by hand per endpoint, so an operation added to the
 * contract is in this client at once.
 *
 * Like the Promise facade (`Pps`), every POST carries an `Idempotency-Key` (yours, with
 * `withIdempotencyKey`, or 128 random bits drawn once per call) and retries of that call
 * reuse it. The retries are the facade's own (`internal/retry.ts`, one policy for every
 * surface): network failures, attempts without an answer (`attemptTimeoutMs`), 408, 429, 502,
 * 503 and 504 are retried with jittered exponential backoff, honouring `Retry-After`, for up to
 * `retryBudgetMs` (15 s, longer than a server restart) after the first failure; 409
 * `idempotency_key_in_progress` is waited out with the same key. The transport is `fetch`, so
 * it runs in Node and in browsers.
 *
 * @example
 * ```ts
 * import { ApiClient } from "@pps/sdk"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const client = yield* ApiClient.ApiClient
 *   const page = yield* client.transfers.list({ query: { limit: 5 } })
 *   const transfer = yield* client.transfers.get({ params: { transfer_id: page.data[0]!.transfer_id } })
 *   return transfer.status
 * }).pipe(
 *   Effect.catchTag("TransferNotFound", () => Effect.succeed("gone")),
 *   Effect.provide(ApiClient.layer({ apiKey: process.env.PPS_API_KEY! }))
 * )
 * ```
 *
 * @since 0.4.0
 */
import { PublicApi } from "@pps/api/Api"
import type { EncryptionKey } from "@pps/crypto"
import { Context, Effect, Layer } from "effect"
import { FetchHttpClient, HttpClient, HttpClientRequest } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import { createdTransfer } from "./internal/created.ts"
import { IdempotencyKey as idempotencyKeyReference } from "./internal/idempotency.ts"
import * as Retry from "./internal/retry.ts"
import * as SealedTransfers from "./SealedTransfers.ts"

/**
 * `transfers.create` answers a Transfer (201) or an agent's held transaction (202, D26);
 * `createdTransfer` tags the answer with a literal `kind` (`"transfer"` or `"held"`), the
 * same `CreatedTransfer` as the Promise surface's:
 * `client.transfers.create({ payload }).pipe(Effect.map(ApiClient.createdTransfer))`.
 *
 * @since 0.5.0
 * @category models
 */
export { type CreatedTransfer, createdTransfer } from "./internal/created.ts"

/**
 * The client's type: every group of the contract with its operations.
 *
 * @since 0.4.0
 * @category models
 */
export type Client = HttpApiClient.ForApi<typeof PublicApi>

/**
 * @since 0.4.0
 * @category models
 */
export interface Options {
  /** The bearer key (`hc_test_…` / `hc_live_…`). */
  readonly apiKey: string
  /** Default `http://127.0.0.1:8080` (the embedded server). */
  readonly baseUrl?: string
  /** Retries after the first attempt of a call, at most (default 12; `retryBudgetMs` ends them first). */
  readonly retriesMax?: number
  /**
   * How long after a call's first failed attempt a retry may still start (default 15 000 ms,
   * longer than a server restart; 0: no retries). `Retry-After` is honoured within it.
   */
  readonly retryBudgetMs?: number
  /** The first retry's delay; each next one doubles it, up to 4 s, jittered (default 250 ms). */
  readonly retryBaseDelayMs?: number
  /** How long one attempt may wait for the answer's headers before it is retried (default 30 000 ms). */
  readonly attemptTimeoutMs?: number
  /** Told before each retry is waited for (to log it): the method, URL, Idempotency-Key, wait and cause. */
  readonly onRetry?: (retry: RetryNotice) => void
}

/**
 * What `Options.onRetry` is told before a retry.
 *
 * @since 0.5.0
 * @category models
 */
export type RetryNotice = Retry.Retry

const baseUrlDefault = "http://127.0.0.1:8080"
// A transfer waits for settlement up to the server's create timeout (D14) before answering,
// so an attempt must be allowed longer than that.
const attemptTimeoutMsDefault = 30_000


/**
 * The Idempotency-Key the POSTs of an effect send, when the caller chose it (see
 * `withIdempotencyKey`); otherwise each POST draws its own.
 *
 * @since 0.4.0
 * @category references
 */
export const IdempotencyKey = idempotencyKeyReference

/**
 * Sends the POST of `effect` with this Idempotency-Key. Keep the key with the intent it
 * names (an order id, a row): after a crash or a lost answer, running the same call again
 * with the same key answers the first outcome instead of acting twice (D6, D36).
 *
 * @example
 * ```ts
 * client.transfers.create({ payload: { to: "@bob", amount: "12.5", confidential: false } }).pipe(
 *   ApiClient.withIdempotencyKey("order-42")
 * )
 * ```
 *
 * @since 0.4.0
 * @category combinators
 */
export const withIdempotencyKey = (key: string) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.provideService(effect, IdempotencyKey, key)

/** The shared policy (`internal/retry.ts`) with this client's options. */
const policyOf = (options: Options): Retry.Policy => ({
  maxRetries: options.retriesMax ?? Retry.defaults.maxRetries,
  budgetMs: options.retryBudgetMs ?? Retry.defaults.budgetMs,
  attemptTimeoutMs: options.attemptTimeoutMs ?? attemptTimeoutMsDefault,
  baseDelayMs: options.retryBaseDelayMs ?? Retry.defaults.baseDelayMs,
  onRetry: options.onRetry
})

/**
 * The transport under the derived client: the bearer key, the caller's Idempotency-Key
 * (`withIdempotencyKey`), and the shared retries at the `fetch` level: the request runs its
 * `fetch` once, whose attempts all send one key (a POST without the caller's gets one drawn
 * there). Retries at the `HttpClient` level would re-run the request's transformations per
 * attempt instead, which is where a key drawn per attempt would let a POST act twice (D6).
 */
const transport = (options: Options) => {
  const policy = policyOf(options)
  return (client: HttpClient.HttpClient): HttpClient.HttpClient =>
    client.pipe(
      HttpClient.mapRequestEffect((request) =>
        Effect.gen(function*() {
          const key = yield* idempotencyKeyReference
          const authorized = HttpClientRequest.bearerToken(request, options.apiKey)
          return key === undefined ? authorized : HttpClientRequest.setHeader(authorized, "idempotency-key", key)
        })
      ),
      HttpClient.transform((response) =>
        Effect.gen(function*() {
          const fetch = yield* FetchHttpClient.Fetch
          const retrying = Retry.retryingFetch((url, init) => fetch(url, init), policy)
          return yield* Effect.provideService(response, FetchHttpClient.Fetch, adaptFetch(retrying))
        })
      )
    )
}

/** A `Client.Fetch` (a URL string) as the platform's `fetch` (Effect's fetch client passes a `URL`). */
const adaptFetch = (fetch: (url: string, init: RequestInit) => Promise<Response>): typeof globalThis.fetch =>
  (input, init) => fetch(input instanceof Request ? input.url : String(input), init ?? {})

/**
 * The client, over the `HttpClient` in context. The retries run in Effect's fetch client (the
 * `Fetch` it reads per request, wrapped here); over another `HttpClient` there are none but its own.
 *
 * @since 0.4.0
 * @category constructors
 */
export const make = (options: Options): Effect.Effect<Client, never, HttpClient.HttpClient> =>
  HttpApiClient.make(PublicApi, { baseUrl: options.baseUrl ?? baseUrlDefault, transformClient: transport(options) })

/**
 * The client as a service.
 *
 * @since 0.4.0
 * @category services
 */
export class ApiClient extends Context.Service<ApiClient, Client>()("@pps/sdk/ApiClient") {}

/**
 * The client over `fetch` (Node ≥ 22, browsers).
 *
 * @since 0.4.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<ApiClient> =>
  Layer.effect(ApiClient, make(options)).pipe(Layer.provide(FetchHttpClient.layer))

/**
 * What a sealed transfer is checked against and sealed with (`sealedTransfer`): the
 * sender's key (absent for an agent's key), the owner's wallet, a sealing secret, the
 * pinned deployment, an RPC URL, a pinned recipient address and the trust (docs/sdk.md).
 *
 * @since 0.5.0
 * @category models
 */
export type SealOptions = SealedTransfers.SealOptions

/**
 * A transfer sealed here (docs/api.md "Client-sealed transfers"): prepared, its answer
 * checked against what `options` pin, the amount and memo sealed in this process, then
 * created, so no request carries them in clear. With an account's key give its
 * `senderKey` (its key pair's public key); an agent's key needs none, its copy being
 * sealed to its owner's key (D21), checked against the chain with `ownerWallet` and
 * `rpcUrl`. The create carries the caller's Idempotency-Key (`withIdempotencyKey`); with a
 * `sealingSecret` too, running it again after a lost answer sends the very same request
 * and answers the first outcome. Succeeds with the created transfer or, for an agent above
 * its threshold, the held transaction (`kind: "held"`, D26); a refusal before sending is an
 * `Errors.SealedTransferError`, an API refusal is the contract's error class
 * (`PolicyViolation`, `InsufficientBalance`, ...).
 *
 * @example
 * ```ts
 * import { ApiClient } from "@pps/sdk"
 * import { Effect } from "effect"
 *
 * // An agent's key alone: its copy is sealed to its owner's key.
 * const pay = ApiClient.sealedTransfer({ to: "@bob", amount: "4", memo: "coffee" }).pipe(
 *   ApiClient.withIdempotencyKey("order-43"),
 *   Effect.catchTag("PolicyViolation", (refused) => Effect.succeed(`refused: ${refused.error.reason}`)),
 *   Effect.provide(ApiClient.layer({ apiKey: process.env.PPS_API_KEY! }))
 * )
 * ```
 *
 * @since 0.5.0
 * @category requests
 */
export const sealedTransfer = (transfer: SealedTransfers.SealedTransferRequest, options: SealOptions = {}) =>
  Effect.gen(function*() {
    const client = yield* ApiClient
    const sent = yield* SealedTransfers.sealed(client, transfer, options)
    return createdTransfer(sent.body)
  })

/**
 * A refund sealed here (D43): the original received transfer is read, the amount defaults to
 * the whole of it (opened from the caller's copy with `keyPair`; an agent's key must name it),
 * a transfer to the original's sender is prepared, checked against what `options` pin and
 * sealed, and `POST /v1/transfers/{transfer_id}/refund` carries the boxes with the caller's
 * Idempotency-Key (`withIdempotencyKey`). Succeeds with the refund (`kind: "transfer"`, its
 * `refund_of` the original) or an agent's refund held for its owner; the guardian's refusal of
 * one that would exceed the original is `RefundExceedsOriginal`.
 *
 * @example
 * ```ts
 * import { ApiClient } from "@pps/sdk"
 * import { Effect } from "effect"
 *
 * const refund = ApiClient.sealedRefund({ transferId: "tr_...", amount: "2.5" }, { senderKey: keyPair.publicKey }).pipe(
 *   ApiClient.withIdempotencyKey("refund-order-43"),
 *   Effect.provide(ApiClient.layer({ apiKey: process.env.PPS_API_KEY! }))
 * )
 * ```
 *
 * @since 0.10.0
 * @category requests
 */
export const sealedRefund = (
  refund: SealedTransfers.SealedRefundRequest,
  options: SealOptions = {},
  keyPair?: EncryptionKey.KeyPair
) =>
  Effect.gen(function*() {
    const client = yield* ApiClient
    const sent = yield* SealedTransfers.sealedRefund(client, refund, options, keyPair)
    return createdTransfer(sent.body)
  })
