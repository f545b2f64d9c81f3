/**
 * Internal: the connection the Promise surface's steps share (where the API is, which key
 * to send, which `fetch` to send with). `Pps` makes one per instance; the command line
 * (src/cli.ts) makes one from its environment. Not exported from the package: Promise users
 * hold a `Pps`, Effect users an `ApiClient`, and the errors of a call are in `Errors`.
 *
 * @since 0.1.0
 * @internal
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
 * The errors of a call, declared in `Errors` (where both surfaces' errors live) and
 * re-exported here for the modules that take a `Client`.
 *
 * @since 0.1.0
 * @category errors
 */
export { ApiError, type ErrorObject, TransportError, type TransportFailure } from "./Errors.ts"
