/**
 * The background half of step 6: settlement's outcomes completed as they happen, and a periodic
 * recovery round that picks up every transfer a crash or an outage left unfinished (still
 * pending, or final but not yet settled with the guardian).
 *
 * @since 0.1.0
 */
import { Cause, Clock, DateTime, Duration, Effect, Option, Schedule, Stream } from "effect"
import type { Mode } from "@pps/api/ApiKeys"
import * as Unavailable from "../platform/Unavailable.ts"
import { complete, settleWithGuardian } from "./complete.ts"
import type { TransfersContext } from "./context.ts"
import { resubmit } from "./submit.ts"

/** How often transfers whose outcome or guardian settlement is missing are looked at again. */
const recoveryEveryMs = 5_000

/**
 * Recovery leaves alone transfers younger than their create request can run
 * (plus this margin): those are driven by the request and by settlement's stream
 * of outcomes, and looking at every in-flight transfer each round would cost the
 * database a read per transfer on the hot path.
 */
const recoveryGraceMs = 5_000

/** Outcomes from settlement's stream completed at once (each a few statements and a guardian call). */
const completionsInParallel = 16

/**
 * Completes settlement's outcomes as they happen, for as long as the layer lives.
 *
 * One completion's fault (a defect, an interruption from a callee) is logged and the stream goes
 * on: ending it would leave every later outcome to the recovery round. Several at once: a
 * completion waits on SQL and on the guardian, and a watcher round can confirm hundreds of
 * transfers whose requests stopped waiting (answered `pending`). `complete` runs each transfer's
 * completion once, however many ask.
 *
 * @since 0.1.0
 */
export const completeOutcomes = (context: TransfersContext) =>
  context.settlement.resolutions.pipe(
    Stream.filter((resolution) => resolution.submissionId.startsWith("tr_")),
    Stream.mapEffect(
      (resolution) =>
        complete(context, resolution).pipe(
          Effect.catchCause((cause) => Effect.logError("completing a transfer failed", Cause.pretty(cause)))
        ),
      { concurrency: completionsInParallel, unordered: true }
    ),
    Stream.runDrain
  )

/**
 * The recovery round of every mode with a chain, every `recoveryEveryMs`, for as long as the
 * layer lives. Any cause ends one round only, never the loop (as for the outcome stream).
 *
 * @since 0.1.0
 */
export const recoverForever = (context: TransfersContext) => {
  const modes = (["test", "live"] as const).filter((mode) => Option.isSome(context.settlement.chain(mode)))
  return Effect.forEach(modes, (mode) => recover(context, mode), { discard: true }).pipe(
    Effect.catchCause((cause) => Effect.logError("transfer recovery round failed", Cause.pretty(cause))),
    Effect.repeat(Schedule.spaced(Duration.millis(recoveryEveryMs)))
  )
}

/** Transfers a crash or an outage left unfinished, in one mode. */
const recover = Effect.fnUntraced(function*(context: TransfersContext, mode: Mode) {
  const nowMs = yield* Clock.currentTimeMillis
  const createdBefore = DateTime.formatIso(
    DateTime.makeUnsafe(nowMs - context.config.transferCreateTimeoutMs - recoveryGraceMs)
  )
  const open = yield* context.store.unfinished(mode, createdBefore).pipe(Unavailable.database("Transfers.recover"))
  for (const t of open) {
    if (t.status !== "pending") {
      yield* settleWithGuardian(context, t.transfer_id, t.status)
      continue
    }
    const outcome = yield* context.settlement.awaitResolution(t.transfer_id, 0).pipe(Unavailable.database("Transfers.recover"))
    if (Option.isSome(outcome)) {
      yield* complete(context, outcome.value)
      continue
    }
    // Pending without an outcome: its submission, recorded with it, is driven again (signed if it was
    // only recorded); a row of an earlier version that died before its submit is submitted from its own call.
    yield* resubmit(context, t)
  }
})
