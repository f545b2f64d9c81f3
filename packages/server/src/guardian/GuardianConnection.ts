/**
 * The api server's connection to the guardian: a client to the guardian's own
 * process (`GUARDIAN_URL`, bearer `GUARDIAN_SHARED_SECRET`), or the guardian
 * running inside this process (the embedded default), on its own PGlite in
 * `DATA_DIR/guardian` with its own secret there, reading the same chains.
 *
 * The server holds no guardian key either way: in process, the keys live in the
 * guardian's layer, behind the same narrow client interface.
 *
 * @since 0.1.0
 */
import * as path from "node:path"
import { GuardianClient, GuardianLive } from "@pps/guardian"
import { Data, Effect, Layer, Option } from "effect"
import { chainIdOfMode } from "../apikeys/domain.ts"
import { AppConfig } from "../config/AppConfig.ts"
import { DataDir } from "../platform/DataDir.ts"
import { DevChain } from "../settlement/DevChain.ts"

/**
 * The guardian cannot be reached or configured.
 *
 * @since 0.1.0
 * @category errors
 */
export class GuardianUnavailable extends Data.TaggedError("GuardianUnavailable")<{ readonly message: string }> {}

/**
 * @since 0.1.0
 * @category layers
 */
export const GuardianConnectionLive = Layer.unwrap(
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
    const guardianDir = path.join(dataDir.path, "guardian")
    const secret = yield* GuardianLive.loadOrCreateSecret(guardianDir).pipe(
      Effect.mapError((error) => new GuardianUnavailable({ message: error.message }))
    )
    const testnetUrl = Option.orElse(devChain.rpcUrl, () => config.rpcUrlTestnet)
    const chains = [
      ...Option.toArray(Option.map(testnetUrl, (rpcUrl) => ({ chainId: BigInt(chainIdOfMode.test), rpcUrl }))),
      ...Option.toArray(Option.map(config.rpcUrlMainnet, (rpcUrl) => ({ chainId: BigInt(chainIdOfMode.live), rpcUrl })))
    ]
    return GuardianClient.GuardianClient.layerInProcess({
      database: { _tag: "pglite", dataDir: guardianDir },
      secret,
      chains
    })
  })
)
