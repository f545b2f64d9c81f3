/**
 * Who may reach `pps mcp --http` (D46): the server listens on a loopback address of the holder's
 * machine and pays with the holder's key, so every request must
 *
 * 1. name that address in `Host` (`127.0.0.1:PORT` or `localhost:PORT`) and, when it has an
 *    `Origin`, come from it (`http://127.0.0.1:PORT`, `http://localhost:PORT`): else 403. A web
 *    page the holder opens elsewhere reaches a loopback port through DNS rebinding with its own
 *    name in `Host` and its own `Origin`, so both are refused before anything else is read;
 * 2. carry the bearer token printed at start (`Authorization: Bearer <token>`): else 401. A
 *    process of another user of the machine can reach the port too, but not read the token.
 *
 * The token is 256 bits from the platform's CSPRNG, made at each start; it is compared in
 * constant time.
 *
 * @since 0.1.0
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import { Effect, type Layer } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"

/**
 * The address the server listens on, as `Host` and `Origin` must name it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Address {
  readonly port: number
}

/**
 * A fresh bearer token.
 *
 * @since 0.1.0
 * @category constructors
 */
export const newToken = (): string => `mcp_${randomBytes(32).toString("base64url")}`

/**
 * The `Host` values a request may carry.
 *
 * @since 0.1.0
 * @category guards
 */
export const allowedHosts = (address: Address): ReadonlyArray<string> => [`127.0.0.1:${address.port}`, `localhost:${address.port}`]

/**
 * The `Origin` values a request may carry (none is fine: MCP clients that are not browsers send none).
 *
 * @since 0.1.0
 * @category guards
 */
export const allowedOrigins = (address: Address): ReadonlyArray<string> => allowedHosts(address).map((host) => `http://${host}`)

const digest = (text: string): Buffer => createHash("sha256").update(text).digest()

/** Whether `authorization` is `Bearer <token>`, compared in constant time (over digests, so lengths may differ). */
const bearerMatches = (authorization: string | undefined, token: string): boolean => {
  const presented = /^Bearer (\S+)$/i.exec(authorization ?? "")?.[1]
  return presented !== undefined && timingSafeEqual(digest(presented), digest(token))
}

const refusal = (status: 401 | 403, message: string) =>
  HttpServerResponse.jsonUnsafe({ error: { code: status === 401 ? "unauthorized" : "forbidden", message } }, {
    status,
    ...(status === 401 ? { headers: { "www-authenticate": "Bearer" } } : {})
  })

/**
 * The check, as a middleware of every route of the server's router.
 *
 * @since 0.1.0
 * @category middleware
 */
export const layer = (address: Address, token: string): Layer.Layer<never, never, HttpRouter.HttpRouter> =>
  HttpRouter.middleware((app) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const host = (request.headers["host"] ?? "").toLowerCase()
      if (!allowedHosts(address).includes(host)) return refusal(403, "this server answers only requests addressed to its loopback address (Host)")
      const origin = request.headers["origin"]
      if (origin !== undefined && !allowedOrigins(address).includes(origin.toLowerCase())) {
        return refusal(403, "this server answers no web page of another origin (Origin)")
      }
      if (!bearerMatches(request.headers["authorization"], token)) {
        return refusal(401, "a bearer token is required: the one pps mcp printed at start")
      }
      return yield* app
    }), { global: true })
