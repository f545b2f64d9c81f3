/**
 * A connection to the Private Payments Service: where it is, which API key to
 * send, and the two ways a call can fail. Every function of the SDK that talks
 * to the API takes a `Client` as its first argument; it holds no state beyond
 * these settings, so one may be shared freely. The requests themselves are
 * those of the typed client derived from the contract (`@pps/api`), sent with
 * this client's `fetch`.
 *
 * A call fails with `ApiError` when the API answered with an error status: it
 * carries the status and the API's error body (DECISIONS.md D1) both parsed
 * and exactly as received, so a command line can print it unchanged. It fails
 * with `TransportError` when no answer came back, or when a success answer did
 * not have the documented shape.
 *
 * @example
 * ```ts
 * import { Client } from "@pps/sdk"
 *
 * const client = Client.make({ apiKey: process.env.PPS_API_KEY!, baseUrl: "http://127.0.0.1:8080" })
 * ```
 *
 * @since 0.1.0
 */

/**
 * The `fetch` a client sends requests with (the global one by default).
 *
 * @since 0.1.0
 * @category models
 */
export type Fetch = (url: string, init: RequestInit) => Promise<Response>

/**
 * Connection settings.
 *
 * @since 0.1.0
 * @category models
 */
export interface Client {
  /** The API's base address, without `/v1` and without a trailing slash. */
  readonly baseUrl: string
  /** The API key, `hc_test_...` or `hc_live_...`, sent as a bearer token. */
  readonly apiKey: string
  readonly fetch: Fetch
}

/**
 * Where `npm start` serves the public API.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultBaseUrl = "http://127.0.0.1:8080"

/**
 * A client. A trailing slash and a trailing `/v1` are removed from `baseUrl`,
 * because the server prints its base URL with `/v1` and every path the SDK
 * sends already starts with it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: {
  readonly apiKey: string
  readonly baseUrl?: string
  readonly fetch?: Fetch
}): Client => ({
  baseUrl: (options.baseUrl ?? defaultBaseUrl).replace(/\/+$/, "").replace(/\/v1$/, ""),
  apiKey: options.apiKey,
  fetch: options.fetch ?? ((url, init) => globalThis.fetch(url, init))
})

/**
 * The error object of the API's error body (DECISIONS.md D1).
 *
 * @since 0.1.0
 * @category models
 */
export interface ErrorObject {
  readonly code: string
  readonly message: string
  readonly param?: string
  readonly reason?: string
  readonly request_id?: string
}

/**
 * The API answered with an error status. `body` is the answer exactly as
 * received; `error` is its D1 error object when it had one.
 *
 * @since 0.1.0
 * @category errors
 */
export class ApiError extends Error {
  override readonly name: string = "ApiError"
  readonly status: number
  readonly body: string
  readonly error: ErrorObject | undefined
  constructor(status: number, body: string, error: ErrorObject | undefined) {
    super(error === undefined ? `HTTP ${status}` : `HTTP ${status} ${error.code}: ${error.message}`)
    this.status = status
    this.body = body
    this.error = error
  }
  /** The D1 `code`, or undefined when the body was not a D1 error body. */
  get code(): string | undefined {
    return this.error?.code
  }
  /** The request's id (`req_…`): quote it when reporting a problem. */
  get requestId(): string | undefined {
    return this.error?.request_id
  }
  /** The field or header a validation error names (D1 `param`). */
  get param(): string | undefined {
    return this.error?.param
  }
  /** Why, for errors that say (a policy violation's rule, a refused proof). */
  get reason(): string | undefined {
    return this.error?.reason
  }
}

/**
 * Why a call got no usable answer.
 *
 * @since 0.1.0
 * @category models
 */
export type TransportFailure = "unreachable" | "malformed_response"

/**
 * No answer came back (`unreachable`), or a success answer was not the
 * documented shape (`malformed_response`).
 *
 * @since 0.1.0
 * @category errors
 */
export class TransportError extends Error {
  override readonly name = "TransportError"
  readonly reason: TransportFailure
  constructor(reason: TransportFailure, message: string, options?: { readonly cause?: unknown }) {
    super(message, options)
    this.reason = reason
  }
}
