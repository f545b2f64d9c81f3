/**
 * `TransferSealer` (src/transfers/TransferSealer.ts): on the event loop and on its own thread it
 * seals boxes that open, for the right keys only, to the note and the amount with a fresh
 * randomness, bound to the transfer; a key that does not parse is a defect; a thread that is gone is
 * replaced at the next call, and the calls a dying thread had in flight are sealed on its replacement.
 */
import { assert, describe, it } from "@effect/vitest"
import { Backend, EncryptionKey, Note } from "@pps/crypto"
import { Effect, Exit, Fiber, Layer } from "effect"
import type { Address } from "viem"
import { hexToBytes } from "viem"
import * as ThreadCalls from "@pps/guardian/ThreadCalls"
import { Worker } from "node:worker_threads"
import { type Call, describe as sealingThread, threadMarker } from "../src/transfers/sealingThread.ts"
import { startSealingThread, threadLayer, TransferSealer } from "../src/transfers/TransferSealer.ts"

const sender = EncryptionKey.generate()
const recipient = EncryptionKey.generate()
const guardian = EncryptionKey.generate()

const context: Note.TransferContext = {
  chainId: 31_337n,
  contract: "0x5FbDB2315678afecb367f032d93F642f64180aa3" as Address,
  transferId: hexToBytes(`0x${"ab".repeat(32)}`)
}

const input = (amount: bigint, memo: string) => ({
  context,
  note: { amount, memo },
  senderKey: sender.publicKey as Uint8Array,
  recipientKey: recipient.publicKey as Uint8Array,
  guardianKey: guardian.publicKey as Uint8Array
})

const layers: ReadonlyArray<readonly [string, Layer.Layer<TransferSealer>]> = [
  ["the event loop", TransferSealer.inline],
  ["its own thread", TransferSealer.thread]
]

describe("a transfer's boxes", () => {
  // The event loop's sealing uses this process's backend, as the server's does (CryptoBackendLive).
  it.effect("mcl is loaded in this process", () => Effect.promise(() => Backend.init({ backend: "mcl" })))

  for (const [where, layer] of layers) {
    it.effect(`sealed on ${where} open for their keys only, to the note and the amount with a fresh randomness`, () =>
      Effect.gen(function*() {
        const sealer = yield* TransferSealer
        const boxes = yield* sealer.seal(input(1_234_567n, "rent, november"))

        for (const [keyPair, box, role] of [[sender, boxes.sender, "sender"], [recipient, boxes.recipient, "recipient"]] as const) {
          const opened = Note.openTransferNote(keyPair, box, context, role)
          assert.isTrue(opened.ok, `the ${role}'s box opens`)
          if (opened.ok) assert.deepStrictEqual(opened.value, { amount: 1_234_567n, memo: "rent, november" })
        }
        const opening = Note.openGuardianNote(guardian, boxes.guardian, context)
        assert.isTrue(opening.ok, "the guardian's box opens")
        if (opening.ok) assert.strictEqual(opening.value.amount, 1_234_567n)

        // Nobody else's key opens them, and they are bound to this transfer.
        assert.isFalse(Note.openTransferNote(recipient, boxes.sender, context, "sender").ok)
        assert.isFalse(Note.openGuardianNote(sender, boxes.guardian, context).ok)
        const other = { ...context, transferId: hexToBytes(`0x${"cd".repeat(32)}`) }
        assert.isFalse(Note.openTransferNote(sender, boxes.sender, other, "sender").ok)
        assert.isFalse(Note.openGuardianNote(guardian, boxes.guardian, other).ok)

        // A fresh opening each time: the same amount, another randomness.
        const again = Note.openGuardianNote(guardian, (yield* sealer.seal(input(1_234_567n, "rent, november"))).guardian, context)
        assert.isTrue(again.ok && opening.ok && again.value.amount === 1_234_567n && again.value.randomness !== opening.value.randomness)
      }).pipe(Effect.provide(layer)))

    it.effect(`sealed on ${where}: a key that does not parse is a defect, and the sealer goes on`, () =>
      Effect.gen(function*() {
        const sealer = yield* TransferSealer
        const exit = yield* Effect.exit(sealer.seal({ ...input(5n, ""), recipientKey: new Uint8Array(64).fill(1) }))
        assert.isTrue(Exit.isFailure(exit) && Exit.hasDies(exit), "dies")
        const boxes = yield* sealer.seal(input(5n, ""))
        assert.isTrue(Note.openTransferNote(recipient, boxes.recipient, context, "recipient").ok)
      }).pipe(Effect.provide(layer)))
  }

  it.effect("a thread that is gone is replaced at the next call, once however many calls find it gone", () =>
    Effect.gen(function*() {
      const started: Array<Awaited<ReturnType<typeof startSealingThread>>> = []
      const layer = threadLayer(() =>
        startSealingThread().then((calls) => {
          started.push(calls)
          return calls
        })
      )
      yield* Effect.gen(function*() {
        const sealer = yield* TransferSealer
        yield* sealer.seal(input(1n, ""))
        assert.strictEqual(started.length, 1)

        // The thread ends (as one that died would be: gone, every later call refused).
        yield* Effect.promise(() => started[0]!.close({ kind: "close" }, new Error("ended by the test"), 5_000))
        assert.strictEqual(started[0]!.exitCode, 0, "it ended by itself")

        const all = yield* Effect.forEach([1n, 2n, 3n, 4n], (amount) => sealer.seal(input(amount, "")), { concurrency: "unbounded" })
        assert.strictEqual(started.length, 2, "one new thread for the four calls")
        for (const [index, boxes] of all.entries()) {
          const opening = Note.openGuardianNote(guardian, boxes.guardian, context)
          assert.isTrue(opening.ok && opening.value.amount === BigInt(index + 1))
        }
      }).pipe(Effect.provide(layer))
      // The layer's scope ended: so did the thread it started.
      assert.isTrue(started[1]!.gone)
      assert.strictEqual(started[1]!.exitCode, 0, "closed, not terminated")
    }))
  it.effect("the calls a thread had in flight when it died are sealed on the thread that replaces it", () =>
    Effect.gen(function*() {
      const workers: Array<Worker> = []
      // As startSealingThread, keeping each thread's Worker so that the test can kill it.
      const layer = threadLayer(async () => {
        const { exited, worker } = await ThreadCalls.startThread(
          new Worker(new URL("../src/transfers/sealingThread.ts", import.meta.url), { workerData: { [threadMarker]: true } }),
          sealingThread
        )
        workers.push(worker)
        return new ThreadCalls.ThreadCalls<Call>(worker, exited, sealingThread, (message) => new Error(message))
      })
      yield* Effect.gen(function*() {
        const sealer = yield* TransferSealer
        const amounts = Array.from({ length: 40 }, (_, i) => BigInt(i + 1))
        const sealing = yield* Effect.forkChild(
          Effect.forEach(amounts, (amount) => sealer.seal(input(amount, "")), { concurrency: "unbounded" })
        )
        // Killed while the calls are in flight (forty sealings take far longer than this).
        // (A timer of the process: `it.effect`'s clock is a TestClock.)
        yield* Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 2)))
        yield* Effect.promise(() => workers[0]!.terminate())
        const all = yield* Fiber.join(sealing)
        assert.strictEqual(workers.length, 2, "one new thread")
        for (const [index, boxes] of all.entries()) {
          const opening = Note.openGuardianNote(guardian, boxes.guardian, context)
          assert.isTrue(opening.ok && opening.value.amount === amounts[index])
        }
      }).pipe(Effect.provide(layer))
    }))
})
