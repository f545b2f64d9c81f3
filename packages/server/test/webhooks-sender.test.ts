/**
 * A subscription's sender (dispatch/serveSubscription.ts) over a backlog: after a full batch it
 * reads the next one while the last batch's results are still being written, excluding those
 * deliveries from the read, so its requests go on instead of waiting for the write (and for the
 * write's wait for the disk when the writer goes idle); no delivery is sent twice, they go out
 * oldest first, and at most `dueBatchMax` results are unwritten at once. The store and the HTTP
 * client are in memory: this is the sender's rule, not the database's (the SQL's exclusion runs
 * in the webhook API suites and the rate benchmark).
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Option, References } from "effect"
import { dueBatchMax, type DispatchContext } from "../src/webhooks/dispatch/DispatchContext.ts"
import { makeAttemptRecorder } from "../src/webhooks/dispatch/recordAttempts.ts"
import { serveSubscription } from "../src/webhooks/dispatch/serveSubscription.ts"
import type { WebhookClient } from "../src/webhooks/WebhookClient.ts"
import type { AttemptRecord, DueDelivery, WebhookStore } from "../src/webhooks/WebhookStore.ts"

const backlog = 2 * dueBatchMax + 20

/** The attempts' info lines are not what is tested. */
const quiet = Layer.succeed(References.MinimumLogLevel, "Warn")

const pad = (n: number) => String(n).padStart(4, "0")

/** In memory: `backlog` pending deliveries of one subscription, written only once `writable` is done. */
const memoryStore = (writable: Deferred.Deferred<void>) => {
  const pending = new Map<string, DueDelivery>(Array.from({ length: backlog }, (_, i) => [`dlv_${pad(i)}`, {
    delivery_id: `dlv_${pad(i)}`,
    event_id: `evt_${pad(i)}`,
    payload: `{"n":${i}}`,
    attempt_count: 0,
    created_at: new Date(0).toISOString()
  }]))
  const reads: Array<{ readonly excluding: ReadonlyArray<string>; readonly writtenBefore: number }> = []
  const written: Array<string> = []
  const store = {
    dueDeliveries: (_webhookId: string, _now: string, limit: number, excluding: ReadonlyArray<string> = []) =>
      Effect.sync(() => {
        reads.push({ excluding: [...excluding], writtenBefore: written.length })
        const due = [...pending.values()].filter((row) => !excluding.includes(row.delivery_id)).slice(0, limit)
        return Option.some({
          sending: {
            url: "https://receiver.example/hook",
            loopback_allowed: false,
            secret_sealed: new TextEncoder().encode("whsec_dGVzdA=="),
            previous_secret_sealed: null,
            previous_secret_expires_at: null
          },
          due
        })
      }),
    extendLease: () => Effect.succeed(true),
    recordAttempts: (attempts: ReadonlyArray<AttemptRecord>) =>
      Effect.gen(function*() {
        yield* Deferred.await(writable)
        for (const attempt of attempts) {
          pending.delete(attempt.deliveryId)
          written.push(attempt.deliveryId)
        }
        return attempts.map(() => ({ recorded: true, leaseHeld: true }))
      })
  }
  return { store: store as unknown as WebhookStore["Service"], reads, written }
}

/** Answers 200 at once and notes each request's `webhook-id` (here, one event per delivery). */
const memoryClient = (sent: Array<string>) =>
  ({
    send: (request: { readonly headers: Record<string, string> }) =>
      Effect.sync(() => {
        sent.push(request.headers["webhook-id"]!)
        return { statusCode: 200, error: undefined, retryAfter: undefined, durationMs: 1 }
      })
  }) as unknown as WebhookClient["Service"]

describe("webhook sender over a backlog", () => {
  it.live("reads its next batch while the last one's results are written, never sends one twice, oldest first", () =>
    Effect.gen(function*() {
      const writable = yield* Deferred.make<void>()
      const { reads, store, written } = memoryStore(writable)
      const sent: Array<string> = []
      const context = {
        store,
        client: memoryClient(sent),
        box: { open: (sealed: Uint8Array) => Effect.succeed(sealed) },
        nodeId: "node_test",
        serving: new Map(),
        recorder: yield* makeAttemptRecorder(store),
        claimedAtMs: 0
      } as unknown as DispatchContext
      const sender = yield* Effect.forkChild(serveSubscription(context, "wh_test", Date.now() + 30_000))
      // With every write held back, the sender sends one full batch, then reads the next,
      // excluding the batch it sent, before any result is written.
      const deadline = Date.now() + 5_000
      while (reads.length < 2 && Date.now() < deadline) yield* Effect.sleep("5 millis")
      assert.strictEqual(reads.length, 2, "the sender read its next batch while the results were unwritten")
      assert.strictEqual(written.length, 0)
      assert.strictEqual(reads[1]!.writtenBefore, 0, "the second read came before any result was written")
      assert.deepStrictEqual(reads[1]!.excluding, sent.map((eventId) => eventId.replace("evt_", "dlv_")))
      assert.strictEqual(sent.length, dueBatchMax, "no more than a batch of results unwritten at once")
      yield* Deferred.succeed(writable, undefined)
      yield* Fiber.join(sender)
      const expected = Array.from({ length: backlog }, (_, i) => `evt_${pad(i)}`)
      assert.deepStrictEqual(sent, expected, "each delivery sent once, oldest first")
      assert.strictEqual(written.length, backlog, "every result written")
    }).pipe(Effect.provide(quiet)), { timeout: 30_000 })
})
