/**
 * The dispatcher's attempt-result writer. Attempt results from every subscription this node
 * serves are written together: while one batch is being written the next accumulates, so a
 * quiet node writes each at once and a busy one in few statements.
 *
 * @since 0.8.0
 */
import { Deferred, Effect, Queue } from "effect"
import { type DependencyUnavailable, fromSqlError } from "../../platform/Unavailable.ts"
import type { AttemptRecord, RecordedAttempt, WebhookStore } from "../WebhookStore.ts"
import { recordBatchMax } from "./DispatchContext.ts"

interface PendingRecord {
  readonly attempt: AttemptRecord
  readonly done: Deferred.Deferred<RecordedAttempt, DependencyUnavailable>
}

const recordFailed = fromSqlError("Dispatcher.recordAttempts")

/** Writes one batch and answers each waiting attempt; a failed write fails them all, typed. */
const writeBatch = (store: WebhookStore["Service"], pending: Queue.Queue<PendingRecord>) =>
  Effect.gen(function*() {
    const batch = yield* Queue.takeBetween(pending, 1, recordBatchMax)
    yield* store.recordAttempts(batch.map((entry) => entry.attempt)).pipe(
      Effect.matchEffect({
        onSuccess: (results) =>
          Effect.forEach(batch, (entry, index) => Deferred.succeed(entry.done, results[index]!), { discard: true }),
        onFailure: (error) => {
          const failure = recordFailed(error)
          return Effect.forEach(batch, (entry) => Deferred.fail(entry.done, failure), { discard: true })
        }
      })
    )
  })

/**
 * Starts the writer for the life of the current scope and returns how an attempt waits for its
 * result to be written.
 *
 * @since 0.8.0
 * @category constructors
 */
export const makeAttemptRecorder = Effect.fnUntraced(function*(store: WebhookStore["Service"]) {
  const pending = yield* Queue.unbounded<PendingRecord>()
  yield* writeBatch(store, pending).pipe(Effect.forever, Effect.forkScoped)
  return (attempt: AttemptRecord): Effect.Effect<RecordedAttempt, DependencyUnavailable> =>
    Effect.gen(function*() {
      const done = yield* Deferred.make<RecordedAttempt, DependencyUnavailable>()
      yield* Queue.offer(pending, { attempt, done })
      return yield* Deferred.await(done)
    })
})
