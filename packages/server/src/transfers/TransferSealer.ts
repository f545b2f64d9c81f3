/**
 * Seals a plain-form transfer's three boxes (`Note.sealTransfer`: {amount, memo} to the sender
 * and to the recipient, {amount, r} to the guardian), on the server's event loop (the default)
 * or on a thread of its own (`SEALING_THREAD=own`).
 *
 * Why a thread: the server's one event loop runs every request, and sealing is the largest piece
 * of pure computation on it: four constant-time BN254 multiplications, 1.3-2 ms on this
 * repository's 2-vCPU VMs, during which no other request moves (sealing twice on the event loop,
 * an experiment, cost 13 % of the 64-client rate). Nothing in it needs the server's state, so it
 * runs beside the event loop, on another core; on the event loop's side a sealing then costs
 * ~0.1 ms (a message each way). Why not the default: on the 2-core VM the rate at 64 clients held
 * (the event loop's share of the server's CPU fell from ~0.85 to ~0.7) but under overload (1,024
 * clients) it lost by a half to a quarter, and the admission limit took long to recover after it
 * (docs/benchmarks.md). A reading, not measured: the thread is one more runnable thread on two
 * cores, beside the guardian and anvil, which every transfer waits on too.
 *
 * Why plain `worker_threads` messages (`ThreadCalls`, the guardian package's, shared with the
 * embedded database's thread) and not effect/rpc's worker protocol: measured here, an RPC call
 * cost the event loop 0.24-0.46 ms and the thread ~0.7 ms more than the sealing itself, most of
 * what the thread is for.
 *
 * A thread that dies is replaced at the next call, and the calls it had in flight are made once
 * more on its replacement (nothing is recorded yet: a transfer is sealed before its nonce, its
 * authorization and its record); only a call whose second thread dies too fails (500). The amount crosses to the thread in the process's memory only, as it
 * is on the event loop: never logged, and no failure's message holds it.
 *
 * @since 0.9.0
 */
import type { Note } from "@pps/crypto"
import { Context, Effect, Layer, Scope, Semaphore } from "effect"
import * as ThreadCalls from "@pps/guardian/ThreadCalls"
import { Worker } from "node:worker_threads"
import { AppConfig } from "../config/AppConfig.ts"
import { type Call, describe, type SealInput, sealHere, threadMarker } from "./sealingThread.ts"

/**
 * @since 0.9.0
 * @category services
 */
export class TransferSealer extends Context.Service<TransferSealer, {
  /** Seals the three boxes with a fresh opening. Dies on a key that does not parse. */
  readonly seal: (input: SealInput) => Effect.Effect<Note.TransferBoxes>
}>()("server/transfers/TransferSealer") {
  /** On the caller's thread (the event loop). */
  static readonly inline: Layer.Layer<TransferSealer> = Layer.succeed(TransferSealer, {
    seal: (input) =>
      Effect.suspend(() => {
        const boxes = sealHere(input)
        return boxes === undefined ? Effect.die(new Error(unparsedKey)) : Effect.succeed(boxes)
      })
  })

  /**
   * On a worker thread with its own mcl-wasm, started with the layer (a thread that is gone is
   * replaced at the next call) and ended with the layer's scope.
   */
  static readonly thread: Layer.Layer<TransferSealer> = Layer.suspend(() => threadLayer(startSealingThread))
}

/**
 * `TransferSealer.thread` with the threads started by `start` (tests watch them through it).
 *
 * @since 0.9.0
 * @category layers
 */
export const threadLayer = (start: () => Promise<ThreadCalls.ThreadCalls<Call>>): Layer.Layer<TransferSealer> =>
  Layer.effect(
    TransferSealer,
    Effect.gen(function*() {
      const scope = yield* Effect.scope
      const started = Effect.promise(start).pipe(
        Effect.tap((calls) => Scope.addFinalizer(scope, closeSealingThread(calls)))
      )
      let current = yield* started
      // One start at a time, however many calls find the thread gone.
      const restart = yield* Semaphore.make(1)
      const replaced = Effect.suspend(() =>
        current.gone
          ? started.pipe(Effect.tap((calls) =>
            Effect.sync(() => {
              current = calls
            })
          ))
          : Effect.succeed(current)
      )
      const live = Effect.suspend(() => current.gone ? restart.withPermits(1)(replaced) : Effect.succeed(current))
      const callOnce = (input: SealInput) =>
        live.pipe(Effect.flatMap((calls) =>
          Effect.tryPromise({
            try: () => calls.call<Note.TransferBoxes | null>({ kind: "seal", input }),
            catch: (cause) => ({ threadGone: calls.gone, cause })
          })
        ))
      return {
        seal: (input) =>
          callOnce(input).pipe(
            // The thread died with this call in flight: sealing is pure and nothing is recorded
            // yet, so the call is made once more, on the thread that replaces it.
            Effect.catch((failure) => failure.threadGone ? callOnce(input) : Effect.fail(failure)),
            Effect.catch((failure) => Effect.die(failure.cause)),
            Effect.flatMap((boxes) => boxes === null ? Effect.die(new Error(unparsedKey)) : Effect.succeed(boxes))
          )
      }
    })
  )

/**
 * The sealer `SEALING_THREAD` chooses (AppConfig).
 *
 * @since 0.9.0
 * @category layers
 */
export const TransferSealerLive: Layer.Layer<TransferSealer, never, AppConfig> = Layer.unwrap(
  Effect.gen(function*() {
    const config = yield* AppConfig
    return config.sealingThread === "own" ? TransferSealer.thread : TransferSealer.inline
  })
)

const unparsedKey = "a key to seal a transfer to did not parse"

/**
 * Starts a sealing thread; resolves once its mcl-wasm is loaded.
 *
 * @since 0.9.0
 * @category constructors
 */
export const startSealingThread = async (): Promise<ThreadCalls.ThreadCalls<Call>> => {
  const { exited, worker } = await ThreadCalls.startThread(
    new Worker(new URL("./sealingThread.ts", import.meta.url), { workerData: { [threadMarker]: true } }),
    describe
  )
  return new ThreadCalls.ThreadCalls<Call>(worker, exited, describe, (message) => new Error(message))
}

const closeSealingThread = (calls: ThreadCalls.ThreadCalls<Call>) =>
  Effect.promise(() => calls.close({ kind: "close" }, new Error("the transfer sealing thread is closed"), 5_000))

export type { SealInput }
