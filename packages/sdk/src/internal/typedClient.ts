/**
 * The typed client of the contract (`@pps/api`, Effect's `HttpApiClient`) behind a
 * `Client`, and its calls run as Promises that reject with the SDK's errors. Every request
 * the Promise API sends goes through here (the facade `Pps`, `Confidential`,
 * `SealedTransfers`, `ApiKeys`, `Account`, the command line), so paths, request and answer
 * types are the contract's and no operation's wire shape is written by hand in the SDK.
 *
 * @since 0.4.0
 */
import { PublicApi } from "@pps/api/Api"
import { catalogue, ErrorBody } from "@pps/api/Errors"
import { Cause, Effect, Exit, Option, Schema, Stream } from "effect"
import { FetchHttpClient, HttpClient, HttpClientError, HttpClientRequest } from "effect/http"
import { HttpApi, HttpApiClient } from "effect/http-api"
import type * as ApiClient from "../ApiClient.ts"
import type { Client } from "../Client.ts"
import { type ErrorObject, TransportError } from "../Errors.ts"
import * as Errors from "../Errors.ts"
import { IdempotencyKey } from "./idempotency.ts"

/**
 * The contract as the Promise API sends it: the same endpoints and schemas, but path ids,
 * queries and bodies are not checked here before sending. The server checks them and
 * answers its own D1 error (its code, the `param` at fault, a request id, and its order:
 * a bad key is 401 before a malformed id is 404), which is what the SDK's error classes
 * stand for. Answers are decoded against the contract as usual.
 */
const SentApi = PublicApi.annotate(HttpApi.ParamsParseOptions, { disableChecks: true })
  .annotate(HttpApi.QueryParseOptions, { disableChecks: true })
  .annotate(HttpApi.PayloadParseOptions, { disableChecks: true })

/** D1's envelope as the contract declares it (`ErrorBody`), read from a body's text. */
const decodeErrorEnvelope = Schema.decodeUnknownOption(Schema.fromJsonString(Schema.Struct({ error: ErrorBody })))

/** The D1 error object of a body, when the body is one (an undeclared status's answer). */
const errorObjectOf = (text: string): ErrorObject | undefined =>
  Option.getOrUndefined(decodeErrorEnvelope(text))?.error

/** The status of each contract error, by the tag its class decodes to. */
const statusByTag: ReadonlyMap<string, number> = new Map(Object.entries(catalogue).map(([tag, Class]) => [tag, Class.status]))

/** A declared error as the typed client fails with it: an instance of the catalogue's class. */
const isContractError = (error: unknown): error is { readonly _tag: string; readonly error: ErrorObject } =>
  typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string" &&
  statusByTag.has(error._tag) && "error" in error && typeof error.error === "object" && error.error !== null

/**
 * What a failed call rejects with: the SDK's class for the API's code (`Errors`),
 * `TransportError` when no usable answer came, or the failure itself when it is none of
 * those (a `ConfidentialError` or `SealedTransferError` of the SDK's own checks, or what
 * the platform's fetch threw when that is not a network failure).
 */
const rejectionOf = async (cause: Cause.Cause<unknown>, baseUrl: string): Promise<unknown> => {
  const error = Cause.squash(cause)
  if (isContractError(error)) {
    return Errors.fromAnswer(statusByTag.get(error._tag) ?? 500, JSON.stringify({ error: error.error }), error.error)
  }
  if (Schema.isSchemaError(error)) {
    // The answer did not decode against the contract (the request's own types are the
    // contract's, and the checks on what is sent are the server's: see SentApi).
    return new TransportError("malformed_response", `an answer that is not the contract's: ${error.message}`, { cause: error })
  }
  if (!HttpClientError.isHttpClientError(error)) return error
  const reason = error.reason
  switch (reason._tag) {
    case "StatusCodeError": {
      // A status the endpoint does not declare (the router's 404/405, a proxy's 502, ...):
      // the body is read again (the client caches it) for its D1 error, when it is one.
      const text = await Effect.runPromise(Effect.orElseSucceed(reason.response.text, () => ""))
      return Errors.fromAnswer(reason.response.status, text, errorObjectOf(text))
    }
    case "TransportError":
      // The URL is safe to show (no key in it); the cause names the network failure.
      return new TransportError("unreachable", `cannot reach the API at ${baseUrl}: ${String(reason.cause)}`, {
        cause: reason.cause
      })
    default:
      return new TransportError(
        "malformed_response",
        `${reason.request.method} ${reason.request.url} got an answer that is not the contract's (${reason._tag})`,
        { cause: error }
      )
  }
}

/**
 * The typed client of each `Client`, made once: a `Client` holds no state, and the typed
 * client holds none either (its fetch is provided per call, from the `Client`).
 */
const typedClients = new WeakMap<Client, ApiClient.Client>()

const typedClientOf = (client: Client): ApiClient.Client => {
  const cached = typedClients.get(client)
  if (cached !== undefined) return cached
  const made = Effect.runSync(
    HttpApiClient.make(SentApi, {
      baseUrl: client.baseUrl,
      transformClient: HttpClient.mapRequestEffect((request) =>
        Effect.gen(function*() {
          // The caller's Idempotency-Key; without one, a retrying fetch (the facade's) draws
          // one per call and its retries reuse it.
          const key = yield* IdempotencyKey
          const authorized = HttpClientRequest.bearerToken(request, client.apiKey)
          return key === undefined ? authorized : HttpClientRequest.setHeader(authorized, "idempotency-key", key)
        })
      )
    }).pipe(Effect.provide(FetchHttpClient.layer))
  )
  typedClients.set(client, made)
  return made
}

/**
 * Runs one call of the typed client over the client's fetch, as a Promise: resolves with
 * the decoded answer, rejects as `rejectionOf` says. With `idempotencyKey`, the call's
 * POST carries it.
 *
 * @since 0.4.0
 */
export const run = async <A, E>(
  client: Client,
  call: (api: ApiClient.Client) => Effect.Effect<A, E>,
  idempotencyKey?: string
): Promise<A> => {
  // Effect's fetch client reads its fetch from the calling fiber.
  const fetch: typeof globalThis.fetch = (input, init) =>
    client.fetch(input instanceof Request ? input.url : String(input), init ?? {})
  const effect = call(typedClientOf(client)).pipe(Effect.provideService(FetchHttpClient.Fetch, fetch))
  const exit = await Effect.runPromiseExit(
    idempotencyKey === undefined ? effect : effect.pipe(Effect.provideService(IdempotencyKey, idempotencyKey))
  )
  if (Exit.isSuccess(exit)) return exit.value
  throw await rejectionOf(exit.cause, client.baseUrl)
}

/**
 * The elements of a stream the typed client answered (the live event stream), as an async
 * iteration that fails as `run` rejects. Ending the iteration early (a `break`) closes the
 * stream and its connection.
 *
 * @since 0.4.0
 */
export async function* iterate<A, E>(client: Client, stream: Stream.Stream<A, E>): AsyncGenerator<A> {
  try {
    yield* Stream.toAsyncIterable(stream)
  } catch (error) {
    throw await rejectionOf(Cause.fail(error), client.baseUrl)
  }
}
