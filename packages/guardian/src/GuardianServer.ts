/**
 * The guardian as its own HTTP service: the RPC group on `POST /rpc` behind a shared
 * bearer secret, `/healthz` (the process is up) and `/readyz` (the database answers),
 * for orchestrators. Alerts never take readiness down: each concerns one balance, and
 * an outsider must not be able to take the guardian out of service (D39).
 *
 * Authentication: `Authorization: Bearer <GUARDIAN_SHARED_SECRET>`, compared in
 * constant time (SHA-256 of both sides, then `timingSafeEqual`, so neither the content
 * nor the length leaks through timing). Anything else answers 401 before any RPC is
 * decoded. The channel itself is plain HTTP on a private interface; for TLS or mTLS put
 * a terminating proxy in front (docs/guardian.md).
 *
 * @since 0.1.0
 */
import { createHash, timingSafeEqual } from "node:crypto"
import { Effect, Layer, Redacted } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { RpcServer } from "effect/rpc"
import { Guardian } from "./Guardian.ts"
import { GuardianRpcs, rpcPath, rpcSerialization } from "./GuardianRpc.ts"

/**
 * The RPC handlers over the `Guardian` service.
 *
 * @since 0.1.0
 * @category layers
 */
export const HandlersLive = GuardianRpcs.toLayer(
  Effect.gen(function*() {
    const guardian = yield* Guardian
    return GuardianRpcs.of({
      Authorize: (request) => guardian.authorize(request),
      AuthorizeMany: ({ requests }) => Effect.map(guardian.authorizeMany(requests), (results) => ({ results })),
      Settle: (request) => guardian.settle(request),
      Credit: (request) => guardian.credit(request),
      Sync: (request) => guardian.sync(request),
      NonZero: (request) => guardian.nonZero(request),
      SealedBalance: (request) => guardian.sealedBalance(request),
      SealedKeyTotals: (request) => guardian.sealedKeyTotals(request),
      RotationVeto: (request) => guardian.rotationVeto(request),
      KeyRotation: (request) => guardian.keyRotation(request),
      ForgetKey: (request) => guardian.forgetKey(request),
      Reconcile: (request) => guardian.reconcile(request),
      Health: () => guardian.health,
      Info: () => Effect.succeed(guardian.info)
    })
  })
)

const digestOf = (text: string): Buffer => createHash("sha256").update(text, "utf8").digest()

/**
 * Whether an Authorization header carries the shared secret, in constant time.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isAuthorized = (header: string | undefined, sharedSecret: Redacted.Redacted<string>): boolean => {
  const presented = header !== undefined && header.startsWith("Bearer ") ? header.slice("Bearer ".length) : ""
  const equal = timingSafeEqual(digestOf(presented), digestOf(Redacted.value(sharedSecret)))
  return equal && presented.length > 0
}

const unauthorized = HttpServerResponse.jsonUnsafe(
  { error: { code: "unauthorized", message: "missing or invalid guardian credentials" } },
  { status: 401 }
)

/**
 * The guardian's routes; serve them with `HttpRouter.serve` on a listener.
 *
 * @since 0.1.0
 * @category layers
 */
export const routes = (sharedSecret: Redacted.Redacted<string>) =>
  Layer.mergeAll(
    HttpRouter.use((router) =>
      Effect.gen(function*() {
        const rpc = yield* RpcServer.toHttpEffect(GuardianRpcs)
        yield* router.add("POST", rpcPath, (request: HttpServerRequest.HttpServerRequest) =>
          isAuthorized(request.headers["authorization"], sharedSecret) ? rpc : Effect.succeed(unauthorized))
      })
    ),
    HttpRouter.add("GET", "/healthz", HttpServerResponse.jsonUnsafe({ status: "ok" })),
    HttpRouter.add(
      "GET",
      "/readyz",
      Effect.gen(function*() {
        const health = yield* (yield* Guardian).health
        // Counts only: /readyz is unauthenticated, the listing is the Health RPC's.
        return health.ready
          ? HttpServerResponse.jsonUnsafe({ status: "ok", alerts: health.alertCount, frozen_accounts: health.frozenAccounts })
          : HttpServerResponse.jsonUnsafe(
            { error: { code: "service_unavailable", message: "guardian storage unavailable" } },
            { status: 503 }
          )
      })
    )
  ).pipe(Layer.provide(HandlersLive), Layer.provide(rpcSerialization))
