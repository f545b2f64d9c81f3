/**
 * The process: both listeners and everything they share, as one Layer.
 *
 * - the public listener (`HOST`:`PORT`): `/v1` (the PublicApi), its OpenAPI
 *   document at `/v1/openapi.json`, `/healthz` and `/readyz`;
 * - the admin listener (`ADMIN_HOST`:`ADMIN_PORT`, loopback by default): `/admin`, and
 *   `/metrics` (Prometheus, observability/http.ts).
 *
 * Services shared by both listeners (SQL, API keys, accounts) are provided
 * outside `HttpRouter.serve`, which builds what it is given privately per server.
 *
 * @since 0.1.0
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Data, Duration, Effect, Layer } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { HttpApi, HttpApiBuilder, type HttpApiGroup } from "effect/http-api"
import { Accounts } from "./accounts/Accounts.ts"
import { Agents } from "./agents/Agents.ts"
import { AgentKeys } from "./agents/AgentKeys.ts"
import { Approvals } from "./agents/Approvals.ts"
import { AgentsHttpLive } from "./agents/http.ts"
import { EncryptionKeys } from "./accounts/EncryptionKeys.ts"
import { Balances } from "./balances/Balances.ts"
import { FaucetHttpLive } from "./faucet/http.ts"
import { GuardianConnectionLive } from "./guardian/GuardianConnection.ts"
import { CryptoBackendLive } from "./platform/CryptoBackend.ts"
import { Lanes } from "./platform/Lanes.ts"
import { Chains } from "./settlement/Chains.ts"
import { DevChain } from "./settlement/DevChain.ts"
import { Faucet } from "./settlement/Faucet.ts"
import { GuardianIdentity } from "./settlement/GuardianIdentity.ts"
import { Settlement } from "./settlement/Settlement.ts"
import { TransfersHttpLive } from "./transfers/http.ts"
import { TransferSealerLive } from "./transfers/TransferSealer.ts"
import { Transfers } from "./transfers/Transfers.ts"
import { AccountsHttpLive } from "./accounts/http.ts"
import { EventsHttpLive } from "./events/http.ts"
import { AdminApi } from "./admin/api.ts"
import { AdminAuthorizationLive, AdminHttpLive } from "./admin/http.ts"
import { WebhookHealth } from "./admin/WebhookHealth.ts"
import { AuditLog } from "./audit/AuditLog.ts"
import { Reseal } from "./admin/Reseal.ts"
import { KeyRotations } from "./accounts/KeyRotations.ts"
import { AdminWebhookLoopbackLive } from "./admin/webhookLoopbackHttp.ts"
import { ApiKeys } from "./apikeys/ApiKeys.ts"
import { AppConfig, servesApi } from "./config/AppConfig.ts"
import { HealthRoutes, healthRoutePaths } from "./health/http.ts"
import { DashboardAuth } from "./dashboard/DashboardAuth.ts"
import { DashboardConfig } from "./dashboard/DashboardConfig.ts"
import { DashboardRoutes, dashboardRoutePaths } from "./dashboard/http.ts"
import { PublicApi } from "@pps/api/Api"
import * as ApiReference from "./http/ApiReference.ts"
import { AuthorizationLive } from "./http/Authorization.ts"
import { apiReferencePath, envelopeMiddleware, makeNodeServer, makeRouteTable } from "./http/Envelope.ts"
import { acceptorsPerListener, withAcceptors } from "./http/Acceptors.ts"
import { IdempotencyLive } from "./http/Idempotency.ts"
import { refuseAtLimit, shedTransferLoad } from "./http/LoadShedding.ts"
import { RateLimiter } from "./http/RateLimiter.ts"
import { RequestValidationLive } from "./http/RequestValidation.ts"
import { Admission } from "./platform/Admission.ts"
import { MigrationsLive, SqlLive } from "./platform/Database.ts"
import { DataDir } from "./platform/DataDir.ts"
import { FaucetGrants } from "./faucet/FaucetGrants.ts"
import { VetoRelayLive } from "./guardian/VetoRelay.ts"
import { OperationReplay } from "./platform/IdempotentOperations.ts"
import { NodeLiveness } from "./platform/NodeLiveness.ts"
import { SecretBox } from "./platform/SecretBox.ts"
import { Secrets } from "./platform/Secrets.ts"
import { MetricsRegistryLive } from "./observability/Metrics.ts"
import { MetricsRoutes, metricsRoutePaths } from "./observability/http.ts"
import * as Otlp from "./observability/Otlp.ts"
import { EventsAndWebhooksLive } from "./webhooks/EventsAndWebhooksLive.ts"
import { WebhooksHttpLive } from "./webhooks/http.ts"

/**
 * The (method, path) pairs an HttpApi serves.
 *
 * @since 0.1.0
 * @category constructors
 */
export const routesOf = <Id extends string, Groups extends HttpApiGroup.Constraint>(api: HttpApi.HttpApi<Id, Groups>): Array<readonly [string, string]> => {
  const routes: Array<readonly [string, string]> = []
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      routes.push([endpoint.method, endpoint.path])
    }
  })
  return routes
}

const openApiPath = "/v1/openapi.json"

const publicRoutes = makeRouteTable([...routesOf(PublicApi), ["GET", openApiPath], ["GET", apiReferencePath], ...healthRoutePaths, ...dashboardRoutePaths])
const adminRoutes = makeRouteTable([...routesOf(AdminApi), ...metricsRoutePaths])

/** A request's route template on either listener, for span names. */
const routeOf: Otlp.RouteNamer = (method, url) => publicRoutes.templateOf(method, url) ?? adminRoutes.templateOf(method, url)

/**
 * The public application (routes and middleware), without a listener: tests
 * and the server both serve it.
 *
 * @since 0.1.0
 * @category layers
 */
export const PublicApp = Layer.mergeAll(
  HttpApiBuilder.layer(PublicApi, { openapiPath: openApiPath }).pipe(
    Layer.provide([AccountsHttpLive, TransfersHttpLive, AgentsHttpLive, FaucetHttpLive, WebhooksHttpLive, EventsHttpLive]),
    // Groups need their middleware too, so it is provided after them.
    Layer.provide([AuthorizationLive, RequestValidationLive, IdempotencyLive])
  ),
  ApiReference.layer(PublicApi, apiReferencePath),
  HealthRoutes,
  DashboardRoutes,
  // One middleware, so their order is stated: the envelope outside; inside it, before the body
  // is read, the early refusal of a transfer decision while the node is full (a refusal reads
  // nothing); around the endpoint, after the body, the transfer gate (a slow upload holds no place).
  HttpRouter.middleware(
    Effect.gen(function*() {
      const admission = yield* Admission
      return (httpEffect) => envelopeMiddleware(publicRoutes, refuseAtLimit(admission))(shedTransferLoad(admission)(httpEffect))
    }),
    { global: true }
  )
)

/**
 * What a worker-only node (`NODE_ROLE=worker`) serves on the public port: its health, so an
 * orchestrator can watch it; every other path is 404, since it is in no balancer.
 *
 * @since 0.4.0
 * @category layers
 */
export const WorkerApp = Layer.mergeAll(
  HealthRoutes,
  HttpRouter.middleware(envelopeMiddleware(makeRouteTable(healthRoutePaths)), { global: true })
)

/**
 * The admin application.
 *
 * @since 0.1.0
 * @category layers
 */
export const AdminApp = Layer.mergeAll(
  HttpApiBuilder.layer(AdminApi).pipe(
    Layer.provide([AdminHttpLive, AdminWebhookLoopbackLive]),
    Layer.provide([AdminAuthorizationLive, RequestValidationLive])
  ),
  MetricsRoutes,
  HttpRouter.middleware(envelopeMiddleware(adminRoutes), { global: true })
)

/**
 * What both listeners share.
 *
 * @since 0.1.0
 * @category layers
 */
export const ServicesLive = Layer.mergeAll(
  Agents.layer,
  Approvals.layer,
  AgentKeys.layer,
  Balances.layer,
  RateLimiter.layer,
  Admission.layer,
  FaucetGrants.layer,
  VetoRelayLive,
  Reseal.layer,
  KeyRotations.layer,
  DashboardAuth.layer,
  WebhookHealth.layer
).pipe(
  // D60: every step that records a security action appends here; the client address it notes
  // is read behind the same trusted proxies as the dashboard's.
  Layer.provideMerge(AuditLog.layer.pipe(Layer.provideMerge(DashboardConfig.layer))),
  // An owner's keys for its agents are API keys: the one service that issues, caches and revokes them.
  Layer.provideMerge(ApiKeys.layer),
  // Agents and approvals use Transfers and the agent stores it brings.
  Layer.provideMerge(Transfers.layer),
  Layer.provideMerge(Layer.mergeAll(EncryptionKeys.layer, Faucet.layer, Lanes.layer, TransferSealerLive)),
  Layer.provideMerge(Settlement.layer),
  Layer.provideMerge(Chains.layer),
  Layer.provideMerge(GuardianIdentity.layer),
  Layer.provideMerge(GuardianConnectionLive),
  Layer.provideMerge(DevChain.layer),
  Layer.provideMerge(Layer.mergeAll(Accounts.layer, EventsAndWebhooksLive, CryptoBackendLive)),
  Layer.provideMerge(SecretBox.layer),
  Layer.provideMerge(Layer.mergeAll(NodeLiveness.layer, OperationReplay.layer)),
  Layer.provideMerge(MigrationsLive),
  Layer.provideMerge(SqlLive),
  Layer.provideMerge(Secrets.layer),
  Layer.provideMerge(DataDir.layer),
  // Beneath everything: whatever records a metric or a span finds this server's registry and,
  // when configured, the OTLP tracer.
  Layer.provideMerge(Otlp.layer(routeOf).pipe(Layer.provideMerge(MetricsRegistryLive)))
)

/**
 * A listener could not take its address (e.g. the port is in use). The platform's own
 * error carries no message of its own, so start-up would say nothing about why.
 *
 * @since 0.1.0
 * @category errors
 */
export class ListenError extends Data.TaggedError("ListenError")<{
  readonly host: string
  readonly port: number
  readonly cause: unknown
}> {
  override get message() {
    const reason = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `Cannot listen on ${this.host}:${this.port}: ${reason}`
  }
}

/**
 * A listener on `host:port`. makeNodeServer: what Node's parser refuses also gets D1's envelope
 * and a request id, and a half-closed request is still answered. With `acceptors` above 1 (Linux:
 * `SO_REUSEPORT`), that many listening sockets, each accepting one connection a turn of the event
 * loop (http/Acceptors.ts, D81); start-up fails if another process listens on the same port.
 */
const listener = (host: string, port: number, shutdownTimeoutMs: number, acceptors = 1) =>
  Layer.mergeAll(
    Layer.effect(HttpServer.HttpServer)(
      acceptors > 1 && process.platform === "linux"
        ? severalAcceptors(host, port, shutdownTimeoutMs, acceptors)
        : NodeHttpServer.make(makeNodeServer, { host, port, gracefulShutdownTimeout: Duration.millis(shutdownTimeoutMs) }).pipe(
          Effect.mapError((error) => new ListenError({ host, port, cause: error.cause }))
        )
    ),
    NodeHttpServer.layerHttpServices
  )

/** The HTTP server on `acceptors` listening sockets of one port, once all listen and it is ours alone. */
const severalAcceptors = Effect.fnUntraced(function*(host: string, port: number, shutdownTimeoutMs: number, acceptors: number) {
  const { ready, server } = withAcceptors(makeNodeServer(), acceptors)
  const made = yield* NodeHttpServer.make(() => server, {
    host,
    port,
    reusePort: true,
    gracefulShutdownTimeout: Duration.millis(shutdownTimeoutMs)
  }).pipe(Effect.mapError((error) => new ListenError({ host, port, cause: error.cause })))
  const listening = yield* Effect.tryPromise({ try: () => ready, catch: (cause) => new ListenError({ host, port, cause }) })
  if (listening < acceptors) {
    yield* Effect.logWarning("fewer listening sockets than asked: connections are accepted fewer at a time").pipe(
      Effect.annotateLogs({ port, listening, asked: acceptors })
    )
  }
  return made
})

/**
 * Both listeners on the configured addresses.
 *
 * @since 0.1.0
 * @category layers
 */
export const ListenersLive = Layer.unwrap(
  Effect.gen(function*() {
    const config = yield* AppConfig
    return Layer.mergeAll(
      HttpRouter.serve(servesApi(config) ? PublicApp : WorkerApp, { disableLogger: true, disableListenLog: true }).pipe(
        Layer.provide(listener(config.host, config.port, config.shutdownTimeoutMs, acceptorsPerListener))
      ),
      HttpRouter.serve(AdminApp, { disableLogger: true, disableListenLog: true }).pipe(
        Layer.provide(listener(config.adminHost, config.adminPort, config.shutdownTimeoutMs))
      )
    )
  })
)
