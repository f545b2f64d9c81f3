/**
 * The dispatcher's attempt-result writer. Attempt results from every subscription this node
 * serves are written together, in one statement and one commit (one sync of the disk) a batch.
 * A sender queues a result and goes on with its next request: it waits for the write only when
 * it needs what the write found (serveSubscription.ts).
 *
 * While some request is in flight on this node, the writer lingers up to `recordLingerMs` (real
 * time) for its result before it writes the batch: the embedded database syncs its log on the
 * caller's thread, so nothing accumulates during a write, and without the wait each result would
 * cost a sync of its own (the delivery rate was one sync's time a delivery, docs/benchmarks.md,
 * "webhook-rate"). With nothing in flight a result is written at once. The linger ends early
 * when the batch is full or when a sender asks (`hurry`): it waits for a result, or half of what
 * it may leave unwritten is (serveSubscription.ts), so a sender sending alone never has to stop
 * for its results. A statement's fixed cost is most of what a few results cost to write, so
 * results are written in batches that size rather than of whatever arrived in a fixed few
 * milliseconds (D82; 0.19 record statements a delivery with one subscription at load 10).
 *
 * A write does not wait for the disk while more results are coming (requests in flight, results
 * queued): the last write before the writer goes idle does, and makes the earlier ones durable
 * with it (D72). Under a backlog that never lets the writer go idle, one write in every
 * `recordSyncEveryMs` waits anyway: the embedded database has no WAL writer, so without it a
 * kill -9 would send again every delivery since the backlog began, not only the last second's.
 *
 * @since 0.8.0
 */
import { Deferred, Effect, Queue } from "effect"
import { type DependencyUnavailable, fromSqlError } from "../../platform/Unavailable.ts"
import type { AttemptRecord, RecordedAttempt, WebhookStore } from "../WebhookStore.ts"
import { recordBatchMax, recordLingerMs } from "./DispatchContext.ts"

interface PendingRecord {
  readonly attempt: AttemptRecord
  readonly done: Deferred.Deferred<RecordedAttempt, DependencyUnavailable>
}

/**
 * Queues results and counts requests in flight.
 *
 * @since 0.8.0
 * @category models
 */
export interface AttemptRecorder {
  /** Queues an attempt's result; the answer is done once it is written (or the write failed). */
  readonly record: (attempt: AttemptRecord) => Effect.Effect<Deferred.Deferred<RecordedAttempt, DependencyUnavailable>>
  /** Runs an attempt's request, counted in flight while it runs. */
  readonly sending: <A, E, R>(request: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** A sender waits for a result, or soon will: write what is queued now, without lingering. */
  readonly hurry: () => void
}

/** The writer's linger: its bound, whether a sender hurried it, and how to end its current wait. */
interface Linger {
  readonly ms: number
  /** Results the lingering batch holds already (besides those queued). */
  taken: number
  hurried: boolean
  end: (() => void) | undefined
}

const recordFailed = fromSqlError("Dispatcher.recordAttempts")

/** At most this long between two writes that wait for the disk, however busy the writer (D72). */
const recordSyncEveryMs = 1_000

/**
 * Waits up to `ms` of real time, or until `linger.end` is called (a sender hurried, enough was
 * queued, the last request ended). Real time, not the Effect clock: it bounds a batching wait, not
 * a schedule (TestClock must not hold it). `stillLingering` is asked again as the wait is armed:
 * a hurry that came between the caller's check and here found no `end` to call.
 */
const lingerFor = (linger: Linger, ms: number, stillLingering: () => boolean) =>
  Effect.promise(() =>
    new Promise<void>((resolve) => {
      if (!stillLingering()) return resolve()
      const end = () => {
        clearTimeout(timer)
        linger.end = undefined
        resolve()
      }
      const timer = setTimeout(end, ms)
      linger.end = end
    })
  )

/**
 * Takes a batch: what is queued, then (up to `recordLingerMs`) what arrives while requests are in
 * flight, the batch has room and no sender hurried it.
 */
const takeBatch = (pending: Queue.Queue<PendingRecord>, inFlight: { count: number }, linger: Linger) =>
  Effect.gen(function*() {
    const batch: Array<PendingRecord> = [...(yield* Queue.takeBetween(pending, 1, recordBatchMax))]
    const startedMs = performance.now()
    const queued = () => batch.length + Queue.sizeUnsafe(pending)
    const lingering = () =>
      inFlight.count > 0 && !linger.hurried && queued() < recordBatchMax && performance.now() - startedMs < linger.ms
    linger.taken = batch.length
    while (lingering()) yield* lingerFor(linger, linger.ms - (performance.now() - startedMs), lingering)
    linger.taken = 0
    if (batch.length < recordBatchMax && Queue.sizeUnsafe(pending) > 0) {
      batch.push(...(yield* Queue.takeBetween(pending, 1, recordBatchMax - batch.length)))
    }
    // A hurry is for what was queued: while some is left for the next batch, that one does not linger.
    if (Queue.sizeUnsafe(pending) === 0) linger.hurried = false
    return batch
  })

/** Writes one batch and answers each waiting attempt; a failed write fails them all, typed. */
const writeBatch = (
  store: WebhookStore["Service"],
  pending: Queue.Queue<PendingRecord>,
  inFlight: { count: number },
  synced: { atMs: number },
  linger: Linger
) =>
  Effect.gen(function*() {
    const batch = yield* takeBatch(pending, inFlight, linger)
    // D72: only the last write before the writer goes idle waits for the disk (it makes the
    // earlier ones durable too: the log is one sequence), or the first a second after the last
    // that waited.
    const idle = inFlight.count === 0 && Queue.sizeUnsafe(pending) === 0
    const waitForDisk = idle || performance.now() - synced.atMs >= recordSyncEveryMs
    yield* store.recordAttempts(batch.map((entry) => entry.attempt), waitForDisk).pipe(
      Effect.matchEffect({
        onSuccess: (results) => {
          if (waitForDisk) synced.atMs = performance.now()
          return Effect.forEach(batch, (entry, index) => Deferred.succeed(entry.done, results[index]!), { discard: true })
        },
        onFailure: (error) => {
          const failure = recordFailed(error)
          return Effect.forEach(batch, (entry) => Deferred.fail(entry.done, failure), { discard: true })
        }
      })
    )
  })

/**
 * Starts the writer for the life of the current scope. `lingerMs`: the linger's bound (tests
 * make it long, to see what ends it early).
 *
 * @since 0.8.0
 * @category constructors
 */
export const makeAttemptRecorder = Effect.fnUntraced(function*(
  store: WebhookStore["Service"],
  lingerMs: number = recordLingerMs
) {
  const pending = yield* Queue.unbounded<PendingRecord>()
  const inFlight = { count: 0 }
  const synced = { atMs: performance.now() }
  const linger: Linger = { ms: lingerMs, taken: 0, hurried: false, end: undefined }
  yield* writeBatch(store, pending, inFlight, synced, linger).pipe(Effect.forever, Effect.forkScoped)
  const recorder: AttemptRecorder = {
    record: (attempt) =>
      Effect.gen(function*() {
        const done = yield* Deferred.make<RecordedAttempt, DependencyUnavailable>()
        yield* Queue.offer(pending, { attempt, done })
        if (linger.taken + Queue.sizeUnsafe(pending) >= recordBatchMax) linger.end?.()
        return done
      }),
    hurry: () => {
      linger.hurried = true
      linger.end?.()
    },
    sending: (request) =>
      Effect.suspend(() => {
        inFlight.count += 1
        return request.pipe(Effect.ensuring(Effect.sync(() => {
          inFlight.count -= 1
          // Nothing more can join the lingering batch: write it now (an interrupted sender's
          // result, the last at shutdown) rather than at the end of the linger.
          if (inFlight.count === 0) linger.end?.()
        })))
      })
  }
  return recorder
})
