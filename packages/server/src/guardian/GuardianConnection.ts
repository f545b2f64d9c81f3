/**
 * The api server's connection to the guardian, in one of three deployments:
 *
 * - `GUARDIAN_URL` set: a client to the guardian's own process (`pnpm guardian`, ideally on
 *   a host of its own), bearer `GUARDIAN_SHARED_SECRET`.
 * - Otherwise (the embedded default): the same guardian program as this server's child
 *   process (EmbeddedGuardian), with its own directory `DATA_DIR/guardian` and its own
 *   secret, which this process never opens.
 * - `guardianInProcess` (TEST ONLY, never read from the environment): the guardian's layer
 *   inside this process, for the test harness's speed. This process then reads the
 *   guardian's secret itself: never a deployment.
 *
 * Every call through it is timed (`pps_guardian_call_duration_seconds`, observability/Metrics.ts).
 *
 * @since 0.1.0
 */
import * as path from "node:path"
import { GuardianClient, GuardianLive } from "@pps/guardian"
import { Effect, Layer, Option } from "effect"
import { chainIdOfMode } from "@pps/api/ApiKeys"
import { AppConfig } from "../config/AppConfig.ts"
import { timeGuardianCall } from "../observability/Metrics.ts"
import { DataDir } from "../platform/DataDir.ts"
import { DevChain } from "../settlement/DevChain.ts"
import * as EmbeddedGuardian from "./EmbeddedGuardian.ts"
import { GuardianUnavailable } from "./errors.ts"

// Its home was this module; importers keep finding it here.
export { GuardianUnavailable } from "./errors.ts"

/** The client whose every call is timed under its operation's name. */
const timed = (client: GuardianClient.GuardianClientShape): GuardianClient.GuardianClientShape => ({
  info: client.info.pipe(timeGuardianCall("info")),
  authorize: (request) => client.authorize(request).pipe(timeGuardianCall("authorize")),
  authorizeMany: (requests) => client.authorizeMany(requests).pipe(timeGuardianCall("authorizeMany")),
  settle: (request) => client.settle(request).pipe(timeGuardianCall("settle")),
  credit: (request) => client.credit(request).pipe(timeGuardianCall("credit")),
  sync: (request) => client.sync(request).pipe(timeGuardianCall("sync")),
  nonZero: (request) => client.nonZero(request).pipe(timeGuardianCall("nonZero")),
  sealedBalance: (request) => client.sealedBalance(request).pipe(timeGuardianCall("sealedBalance")),
  sealedKeyTotals: (request) => client.sealedKeyTotals(request).pipe(timeGuardianCall("sealedKeyTotals")),
  rotationVeto: (request) => client.rotationVeto(request).pipe(timeGuardianCall("rotationVeto")),
  keyRotation: (request) => client.keyRotation(request).pipe(timeGuardianCall("keyRotation")),
  forgetKey: (request) => client.forgetKey(request).pipe(timeGuardianCall("forgetKey")),
  reconcile: (request) => client.reconcile(request).pipe(timeGuardianCall("reconcile")),
  health: client.health.pipe(timeGuardianCall("health"))
})

const connection = Layer.unwrap(
  Effect.gen(function*() {
    const config = yield* AppConfig
    if (Option.isSome(config.guardianUrl)) {
      if (Option.isNone(config.guardianSharedSecret)) {
        return yield* Effect.fail(new GuardianUnavailable({ message: "GUARDIAN_SHARED_SECRET is required with GUARDIAN_URL" }))
      }
      return GuardianClient.GuardianClient.layerHttp(config.guardianUrl.value, config.guardianSharedSecret.value)
    }
    const dataDir = yield* DataDir
    const devChain = yield* DevChain
    const testnetUrl = Option.orElse(devChain.rpcUrl, () => config.rpcUrlTestnet)
    const chains = [
      ...Option.toArray(Option.map(testnetUrl, (rpcUrl) => ({ chainId: BigInt(chainIdOfMode.test), rpcUrl }))),
      ...Option.toArray(Option.map(config.rpcUrlMainnet, (rpcUrl) => ({ chainId: BigInt(chainIdOfMode.live), rpcUrl })))
    ]
    if (!config.guardianInProcess) {
      return EmbeddedGuardian.layer({
        dataDir: dataDir.path,
        chains,
        logLevel: config.logLevel,
        confirmations: config.chainConfirmations,
        startTimeoutMs: config.guardianStartTimeoutMs,
        databaseTemplate: Option.getOrUndefined(config.embeddedDatabaseTemplate)
      })
    }
    // TEST ONLY (see the module header): this process opens the guardian's secret.
    const guardianDir = path.join(dataDir.path, "guardian")
    const secret = yield* GuardianLive.loadOrCreateSecret(guardianDir).pipe(
      Effect.mapError((error) => new GuardianUnavailable({ message: error.message }))
    )
    return GuardianClient.GuardianClient.layerInProcess({
      database: { _tag: "pglite", dataDir: guardianDir, template: Option.getOrUndefined(config.embeddedDatabaseTemplate) },
      secret,
      chains
    })
  })
)

/**
 * @since 0.1.0
 * @category layers
 */
export const GuardianConnectionLive = Layer.effect(
  GuardianClient.GuardianClient,
  Effect.gen(function*() {
    return timed(yield* GuardianClient.GuardianClient)
  })
).pipe(Layer.provide(connection))
