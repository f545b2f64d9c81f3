/**
 * The guardian as the api server sees it: one service, two deployments.
 *
 * - `layerInProcess`: the guardian runs inside the server's process (the embedded
 *   default), with its own database and key; the client calls it directly.
 * - `layerHttp`: the guardian is its own process (`pnpm guardian`); the client speaks
 *   effect/rpc over HTTP with a shared bearer secret.
 * - `layerConfig`: `layerHttp` when `GUARDIAN_URL` is set (then
 *   `GUARDIAN_SHARED_SECRET` is required), the given in-process layer otherwise.
 *
 * Both deployments answer identically; one test suite runs against each.
 *
 * @since 0.1.0
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Cause, Config, Context, Effect, Layer, Option, Redacted } from "effect"
import { HttpClient, HttpClientError, HttpClientRequest } from "effect/http"
import { RpcClient, RpcClientError } from "effect/rpc"
import { type AuthorizeOutcome, type AuthorizeRequest, GuardianError } from "./Domain.ts"
import { Guardian, type GuardianShape } from "./Guardian.ts"
import { GuardianRpcs, rpcBatching, rpcPath, rpcSerialization } from "./GuardianRpc.ts"
import * as GuardianConfig from "./GuardianConfig.ts"
import { type GuardianOptions, layer as guardianLayer } from "./GuardianLive.ts"

/**
 * The operations a client may call: the guardian's, without its maintenance loops.
 *
 * @since 0.1.0
 * @category models
 */
export interface GuardianClientShape {
  readonly info: Effect.Effect<GuardianShape["info"], GuardianError>
  readonly authorize: GuardianShape["authorize"]
  /** One sender's transfers of an actor's turn (D73); the whole call fails only when the guardian could not be asked. */
  readonly authorizeMany: (requests: ReadonlyArray<AuthorizeRequest>) => Effect.Effect<ReadonlyArray<AuthorizeOutcome>, GuardianError>
  readonly settle: GuardianShape["settle"]
  readonly credit: GuardianShape["credit"]
  readonly sync: GuardianShape["sync"]
  readonly nonZero: GuardianShape["nonZero"]
  readonly sealedBalance: GuardianShape["sealedBalance"]
  readonly sealedKeyTotals: GuardianShape["sealedKeyTotals"]
  readonly rotationVeto: GuardianShape["rotationVeto"]
  readonly keyRotation: GuardianShape["keyRotation"]
  readonly forgetKey: (request: Parameters<GuardianShape["forgetKey"]>[0]) => Effect.Effect<void, GuardianError>
  readonly reconcile: GuardianShape["reconcile"]
  readonly health: Effect.Effect<Effect.Success<GuardianShape["health"]>, GuardianError>
}

/**
 * Requests to a remote guardian that take longer fail as `unavailable` (an
 * authorization is a few milliseconds of work; a reconciliation reads the chain).
 *
 * @since 0.1.0
 * @category constants
 */
export const requestTimeoutMs = 30_000

/**
 * One client over several guardians: calls go to the current one; an `unavailable`
 * failure moves later calls to the next (unless another call moved them already).
 */
const failover = (clients: ReadonlyArray<GuardianClientShape>): GuardianClientShape => {
  let current = 0
  const via = <A, E>(use: (client: GuardianClientShape) => Effect.Effect<A, E>): Effect.Effect<A, E> =>
    Effect.suspend(() => {
      const index = current
      return use(clients[index]!).pipe(
        Effect.tapError((error) =>
          Effect.sync(() => {
            if (error instanceof GuardianError && error.reason === "unavailable" && current === index) {
              current = (index + 1) % clients.length
            }
          })
        )
      )
    })
  return {
    info: via((client) => client.info),
    authorize: (request) => via((client) => client.authorize(request)),
    authorizeMany: (requests) => via((client) => client.authorizeMany(requests)),
    settle: (request) => via((client) => client.settle(request)),
    credit: (request) => via((client) => client.credit(request)),
    sync: (request) => via((client) => client.sync(request)),
    nonZero: (request) => via((client) => client.nonZero(request)),
    sealedBalance: (request) => via((client) => client.sealedBalance(request)),
    sealedKeyTotals: (request) => via((client) => client.sealedKeyTotals(request)),
    rotationVeto: (request) => via((client) => client.rotationVeto(request)),
    keyRotation: (request) => via((client) => client.keyRotation(request)),
    forgetKey: (request) => via((client) => client.forgetKey(request)),
    reconcile: (request) => via((client) => client.reconcile(request)),
    health: via((client) => client.health)
  }
}

/** The status a refusing guardian answered with (`filterStatusOk` turns a non-2xx answer into an error). */
const refusedStatus = (error: RpcClientError.RpcClientError): number | undefined =>
  error.reason._tag === "HttpError" && error.reason.cause instanceof HttpClientError.StatusCodeError
    ? error.reason.cause.response.status
    : undefined

const unavailable = (error: RpcClientError.RpcClientError) => {
  const status = refusedStatus(error)
  return new GuardianError({
    reason: status === 401 ? "unauthorized" : "unavailable",
    message: `guardian unreachable: ${status === undefined ? error.message.split("\n")[0] : `it answered ${status}`}`
  })
}

/**
 * One call to a remote guardian, its transport failures typed as `unavailable` (retryable) and
 * bounded by `requestTimeoutMs`; the guardian's own answers and errors pass through.
 */
const call = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, Exclude<E, RpcClientError.RpcClientError> | GuardianError> =>
  effect.pipe(
    Effect.mapError((error) =>
      error instanceof RpcClientError.RpcClientError
        ? unavailable(error)
        : (error as Exclude<E, RpcClientError.RpcClientError>)
    ),
    Effect.timeoutOrElse({
      duration: requestTimeoutMs,
      orElse: () => Effect.fail(new GuardianError({ reason: "unavailable", message: "guardian request timed out" }))
    }),
    // A call still waiting when this client's scope closes (the embedded server's supervisor
    // closes it when the guardian child dies) ends with that scope's interruption, not the
    // caller's: passed on, it would end whatever made the call as if it had been interrupted,
    // unseen by `Effect.catch` (the fault harness saw it stop the server's outcome stream and
    // recovery loop). It is a guardian that became unavailable mid-call. The caller's own
    // interruption still takes effect after it.
    Effect.catchCauseIf(
      Cause.hasInterruptsOnly,
      () => Effect.fail(new GuardianError({ reason: "unavailable", message: "the guardian client closed during the call" }))
    )
  )

/** The RPC protocol to the guardian at `url`: HTTP, batched, the shared secret as a bearer token. */
const rpcProtocol = (url: string, sharedSecret: Redacted.Redacted<string>) =>
  RpcClient.layerProtocolHttp({
    url: `${url.replace(/\/+$/, "")}${rpcPath}`,
    transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(Redacted.value(sharedSecret))),
    batch: rpcBatching
  }).pipe(
    Layer.provide(rpcSerialization),
    // A refusal (401 for a wrong secret) fails with its status, which `unavailable` reads: its
    // body is not an RPC answer, and would otherwise read as an empty one (an outage).
    Layer.provide(Layer.effect(
      HttpClient.HttpClient,
      Effect.gen(function*() {
        return HttpClient.filterStatusOk(yield* HttpClient.HttpClient)
      })
    )),
    // undici's own request API, not fetch: fetch's Request/Response/Headers machinery was
    // ~3.4 % of the server's CPU under the throughput benchmark, for one small POST a call.
    // Its timeouts bound a POST as `requestTimeoutMs` bounds a call: a batch runs in the
    // client's scope, not its callers', so a caller's timeout does not abort the POST.
    Layer.provide(NodeHttpClient.layerUndiciOptions({ headersTimeout: requestTimeoutMs, bodyTimeout: requestTimeoutMs }))
  )

/**
 * @since 0.1.0
 * @category services
 */
export class GuardianClient extends Context.Service<GuardianClient, GuardianClientShape>()("guardian/GuardianClient") {
  /**
   * A client backed by a `Guardian` in this process.
   *
   * @since 0.1.0
   */
  static readonly fromGuardian: Layer.Layer<GuardianClient, never, Guardian> = Layer.effect(
    GuardianClient,
    Effect.gen(function*() {
      const guardian = yield* Guardian
      return GuardianClient.of({
        info: Effect.succeed(guardian.info),
        authorize: guardian.authorize,
        authorizeMany: guardian.authorizeMany,
        settle: guardian.settle,
        credit: guardian.credit,
        sync: guardian.sync,
        nonZero: guardian.nonZero,
        sealedBalance: guardian.sealedBalance,
        sealedKeyTotals: guardian.sealedKeyTotals,
        rotationVeto: guardian.rotationVeto,
        keyRotation: guardian.keyRotation,
        forgetKey: guardian.forgetKey,
        reconcile: guardian.reconcile,
        health: guardian.health
      })
    })
  )

  /**
   * The embedded deployment: the guardian (its own database, keys and sweepers) inside
   * this process.
   *
   * @since 0.1.0
   */
  static readonly layerInProcess = (options: GuardianOptions) =>
    GuardianClient.fromGuardian.pipe(Layer.provide(guardianLayer(options)))

  /**
   * A client of a guardian process at `url` (its base URL, e.g. http://127.0.0.1:8090),
   * authenticated with the shared secret as a bearer token. `url` may list several
   * guardians of one database, comma-separated (Lease.ts: one serves, the others stand
   * by): calls go to one of them, and a call that finds it unavailable moves later calls
   * to the next. That call itself still fails as `unavailable` (retryable): it may have
   * reached the guardian that died, so only its caller's retry, which the guardian
   * answers idempotently, can say what it did.
   *
   * @since 0.1.0
   */
  static readonly layerHttp = (url: string, sharedSecret: Redacted.Redacted<string>): Layer.Layer<GuardianClient> => {
    const urls = url.split(",").map((entry) => entry.trim()).filter((entry) => entry !== "")
    if (urls.length <= 1) return GuardianClient.layerHttpOne(urls[0] ?? url, sharedSecret)
    return Layer.effect(
      GuardianClient,
      Effect.gen(function*() {
        const clients: Array<GuardianClientShape> = []
        for (const one of urls) clients.push(Context.get(yield* Layer.build(GuardianClient.layerHttpOne(one, sharedSecret)), GuardianClient))
        return GuardianClient.of(failover(clients))
      })
    )
  }

  private static readonly layerHttpOne = (url: string, sharedSecret: Redacted.Redacted<string>) =>
    Layer.effect(
      GuardianClient,
      Effect.gen(function*() {
        const client = yield* RpcClient.make(GuardianRpcs)
        return GuardianClient.of({
          info: call(client.Info()),
          authorize: (request) => call(client.Authorize(request)),
          authorizeMany: (requests) => Effect.map(call(client.AuthorizeMany({ requests })), ({ results }) => results),
          settle: (request) => call(client.Settle(request)),
          credit: (request) => call(client.Credit(request)),
          sync: (request) => call(client.Sync(request)),
          nonZero: (request) => call(client.NonZero(request)),
          sealedBalance: (request) => call(client.SealedBalance(request)),
          sealedKeyTotals: (request) => call(client.SealedKeyTotals(request)),
          rotationVeto: (request) => call(client.RotationVeto(request)),
          keyRotation: (request) => call(client.KeyRotation(request)),
          forgetKey: (request) => call(client.ForgetKey(request)),
          reconcile: (request) => call(client.Reconcile(request)),
          health: call(client.Health())
        })
      })
    ).pipe(Layer.provide(rpcProtocol(url, sharedSecret)))

  /**
   * `layerHttp` when GUARDIAN_URL is set, `inProcess` otherwise.
   *
   * @since 0.1.0
   */
  static readonly layerConfig = <E, R>(inProcess: Layer.Layer<GuardianClient, E, R>) =>
    Layer.unwrap(
      Effect.gen(function*() {
        const url = yield* Config.option(Config.String("GUARDIAN_URL"))
        if (Option.isNone(url)) return inProcess
        const secret = yield* Config.Redacted("GUARDIAN_SHARED_SECRET")
        return GuardianClient.layerHttp(url.value, secret)
      })
    )

  /**
   * The deployment the environment chooses: GUARDIAN_URL (with GUARDIAN_SHARED_SECRET)
   * for a guardian process, otherwise the in-process guardian configured by
   * `GuardianConfig.options` (DATA_DIR/guardian or GUARDIAN_DATABASE_URL).
   *
   * @since 0.1.0
   */
  static readonly layerFromEnv = GuardianClient.layerConfig(
    Layer.unwrap(Effect.map(GuardianConfig.options, (options) => GuardianClient.layerInProcess(options)))
  )
}
