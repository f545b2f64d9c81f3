/**
 * Loads the crypto package's mcl-wasm backend once at start: constant-time
 * scalar multiplication, about ten times faster than the pure-JS default
 * (docs/benchmarks.md). Every sealing and proof check in this process uses it.
 *
 * @since 0.1.0
 */
import { Backend } from "@pps/crypto"
import { Effect, Layer } from "effect"

/**
 * @since 0.1.0
 * @category layers
 */
export const CryptoBackendLive = Layer.effectDiscard(Effect.promise(() => Backend.init({ backend: "mcl" })))
