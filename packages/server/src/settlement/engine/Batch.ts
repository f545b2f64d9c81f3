/**
 * Batch: recorded calls wait in the engine's queue only while every relayer has
 * `SettlementLimits.sendsPerRelayer` sends in progress; a relayer that becomes free takes what
 * queued, and confidential transfers to one contract leave as one batch transaction. No timer:
 * a lone call leaves at once, alone (after one turn of the event loop).
 *
 * Also the claim that keeps two callers in this process from signing one submission.
 *
 * @since 0.5.0
 */
import { Deferred, Effect } from "effect"
import { SettlementLimits, type SubmissionRequest } from "../domain.ts"
import type { Relayer } from "../Relayer.ts"
import type { EngineContext, Queued, StepError } from "./EngineContext.ts"
import { signAndSend } from "./Send.ts"

/** The relayer with the fewest sends in progress, if one has room for another. */
const freeRelayer = (context: EngineContext): Relayer | undefined => {
  const { sending } = context
  return context.relayers.reduce<Relayer | undefined>((best, r) =>
    sending.get(r)! < SettlementLimits.sendsPerRelayer && (best === undefined || sending.get(r)! < sending.get(best)!) ? r : best, undefined)
}

/** The oldest queued call and, if it is a confidential transfer, those queued for the same contract, up to `batchMax`. */
const takeBatch = (context: EngineContext): Array<Queued> => {
  const { queue } = context
  const first = queue.shift()!
  const taken = [first]
  if (first.request.kind !== "confidential_transfer") return taken
  for (let i = 0; i < queue.length && taken.length < context.batchMax;) {
    const next = queue[i]!
    if (next.request.kind === "confidential_transfer" && next.request.target === first.request.target) {
      taken.push(next)
      queue.splice(i, 1)
    } else {
      i++
    }
  }
  return taken
}

/**
 * Hands queued calls to free relayers, each send forked in the engine's scope; a send that ends
 * dispatches again, so what queued meanwhile leaves with the relayer that became free.
 *
 * @since 0.5.0
 * @category steps
 */
export const dispatch = (context: EngineContext): Effect.Effect<void> =>
  Effect.gen(function*() {
    const { queue, sending } = context
    for (let relayer = freeRelayer(context); queue.length > 0 && relayer !== undefined; relayer = freeRelayer(context)) {
      const chosen = relayer
      sending.set(chosen, sending.get(chosen)! + 1)
      const taken = takeBatch(context)
      yield* signAndSend(context, taken.map((item) => item.request), [], chosen).pipe(
        Effect.exit,
        Effect.flatMap((exit) => Effect.forEach(taken, (item) => Deferred.done(item.sent, exit), { discard: true })),
        Effect.ensuring(Effect.sync(() => sending.set(chosen, sending.get(chosen)! - 1))),
        Effect.andThen(Effect.suspend(() => dispatch(context))),
        Effect.forkIn(context.scope)
      )
    }
  })

/**
 * Queues a recorded call and waits until its transaction is signed, recorded and broadcast.
 * Without batching every call is signed at once, as many at a time as callers submit: a
 * queue would only cap how many sends overlap.
 *
 * @since 0.5.0
 * @category steps
 */
export const enqueue = (context: EngineContext, request: SubmissionRequest): Effect.Effect<void, StepError> =>
  context.batchMax === 1 ? signAndSend(context, [request], []) : Effect.gen(function*() {
    const sent = yield* Deferred.make<void, StepError>()
    context.queue.push({ request, sent })
    // One turn before taking from the queue: the calls submitted in the same turn (the
    // transfers recorded in one transaction submit together) then leave in one transaction.
    yield* Effect.yieldNow
    yield* dispatch(context)
    yield* Deferred.await(sent)
  })

/**
 * Runs `send` for a submission this node neither signs nor tracks now, claimed for it: checked
 * and claimed in one step, so two callers in this process never both sign it. Not
 * interruptible: a caller that goes away (a client that hung up) must not cut a submission
 * between its signature and its record, which would leave the relayer's nonce taken and never
 * broadcast, and every later transaction of that relayer stuck behind the gap. Every step is
 * bounded (SQL, and RPC calls with the transport's timeout).
 *
 * @since 0.5.0
 * @category steps
 */
export const claimed = (context: EngineContext, id: string, send: Effect.Effect<void, StepError>): Effect.Effect<void, StepError> =>
  Effect.suspend(() => {
    if (context.signing.has(id) || context.bySubmission.has(id)) return Effect.void
    context.signing.add(id)
    return Effect.uninterruptible(send).pipe(Effect.ensuring(Effect.sync(() => context.signing.delete(id))))
  })
