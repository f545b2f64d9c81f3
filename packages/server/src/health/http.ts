/**
 * `/healthz` (the process is up) and `/readyz` (it can serve: the database
 * answers, and later the chain, bus and guardian), outside `/v1` and without
 * authentication, for load balancers and orchestrators.
 *
 * @since 0.1.0
 */
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { ping } from "../platform/Database.ts"

/** A readiness probe must answer well within a load balancer's timeout. */
const readinessTimeoutMs = 2_000

/**
 * @since 0.1.0
 * @category layers
 */
export const HealthRoutes = Layer.mergeAll(
  HttpRouter.add("GET", "/healthz", HttpServerResponse.jsonUnsafe({ status: "ok" })),
  HttpRouter.add(
    "GET",
    "/readyz",
    ping.pipe(
      Effect.timeout(readinessTimeoutMs),
      Effect.match({
        onSuccess: () => HttpServerResponse.jsonUnsafe({ status: "ok", checks: { database: "ok" } }),
        onFailure: () =>
          HttpServerResponse.jsonUnsafe(
            { error: { code: "service_unavailable", message: "The database does not answer." } },
            { status: 503 }
          )
      })
    )
  )
)

/**
 * The (method, path) pairs of the health routes, for the route table.
 *
 * @since 0.1.0
 * @category constants
 */
export const healthRoutePaths = [["GET", "/healthz"], ["GET", "/readyz"]] as const
