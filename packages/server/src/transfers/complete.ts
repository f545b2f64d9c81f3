/**
 * Step 6, the outcome: a settlement resolution written into its transfer once (status and
 * events, in a transaction shared with the other completions of the same turn) and, beside it,
 * the guardian's settlement of the reservation. Run by the create request that waits for its
 * transfer, by the background stream of outcomes and by the recovery round, whichever comes first.
 *
 * @since 0.1.0
 */
import { Cause, Clock, Deferred, Effect, Exit, Option, Request } from "effect"
import type { SqlError } from "effect/sql"
import { transferEvents } from "@pps/api/Events"
import { transferReached } from "../observability/Metrics.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import type { Resolution } from "../settlement/domain.ts"
import type { TransfersContext } from "./context.ts"
import { transferIdBytes32 } from "./submission.ts"
import type { StoredTransfer } from "./TransferStore.ts"

/** Completions written in one transaction at most (see `endInOneTransaction`). */
export const completionBatchMax = 64

/**
 * How long a done completion is remembered: far longer than the request that waits for a
 * transfer and the stream of outcomes lie apart, so the second finds the first's result.
 */
const completionMemoryMs = 60_000

/** Completions remembered before the old ones are swept. */
const completionsSweepAbove = 4_096

/** A completion under way or just done: its result, and when it started. */
export interface Completion {
  readonly done: Deferred.Deferred<Option.Option<StoredTransfer>, Unavailable.DependencyUnavailable>
  readonly atMs: number
}

/** A settlement outcome to write into its transfer; `endInOneTransaction` writes those asked together. */
export class EndTransfer extends Request.Class<
  { readonly resolution: Resolution },
  Option.Option<StoredTransfer>,
  SqlError.SqlError
> {}

/**
 * Writes the outcome once (status + events) and settles it with the guardian; the transfer as it
 * ends. The request that waits for its transfer and the background stream of outcomes both see
 * each resolution: the first runs the completion, the other waits for it, so a transfer's outcome
 * costs one read, one status change and one guardian settlement, not two of each. A failed
 * completion is forgotten at once, for a retry.
 *
 * Not interruptible but for the wait on another's completion: the request that runs it may be cut
 * off by its client, and the outcome stream may be waiting on this very completion.
 */
export const complete = (context: TransfersContext, resolution: Resolution) =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(Clock.currentTimeMillis, (nowMs) => {
      const { completions } = context
      const known = completions.get(resolution.submissionId)
      if (known !== undefined) return restore(Deferred.await(known.done))
      if (completions.size > completionsSweepAbove) {
        for (const [id, entry] of completions) if (nowMs - entry.atMs > completionMemoryMs) completions.delete(id)
      }
      const done = Deferred.makeUnsafe<Option.Option<StoredTransfer>, Unavailable.DependencyUnavailable>()
      completions.set(resolution.submissionId, { done, atMs: nowMs })
      return completeOnce(context, resolution).pipe(
        Effect.onExit((exit) =>
          Effect.andThen(
            Effect.sync(() => {
              if (exit._tag === "Failure") completions.delete(resolution.submissionId)
            }),
            Deferred.done(done, exit)
          )
        )
      )
    })
  )

/**
 * The SQL end and the guardian's settlement, side by side: the settlement's round trip was
 * the longest step of a create's answer after the chain (docs/benchmarks.md, "A transfer's
 * time, stage by stage"). Neither reads what the other writes: the SQL end writes this
 * resolution (final once for a submission), and the guardian decides the reservation from
 * its own record under the reservation's row lock (a failure only once the chain says the
 * attestation can never be mined), so a settlement before, after or twice (another
 * completion, a retry, the recovery round) changes the books at most once. A crash between
 * the two commits leaves one of them for the recovery round. The caller is answered once
 * both are done: when the guardian answered, a read of its books after a `confirmed` answer
 * sees the transfer; when it did not (down, killed mid-call), the answer is still the
 * chain's and the books catch up at the recovery round, as before.
 */
const completeOnce = Effect.fnUntraced(function*(context: TransfersContext, resolution: Resolution) {
  const status = resolution._tag === "Confirmed" ? "confirmed" as const : "failed" as const
  const [ended, settled] = yield* Effect.zip(
    Effect.request(new EndTransfer({ resolution }), context.endTransfers),
    guardianSettle(context, resolution.submissionId, status),
    { concurrent: true }
  ).pipe(Unavailable.database("Transfers.complete"))
  // The mark only spares the recovery round a second settlement: not awaited. One this
  // process does not write (a crash, a shutdown) leaves the transfer to that round.
  if (settled) yield* Effect.forkIn(markSettled(context, resolution.submissionId), context.scope)
  // Counted where the status changed: a transfer's outcome is written once, whichever node wrote it.
  if (Option.isSome(ended)) yield* transferReached(status, resolution.mode)
  return Option.isSome(ended)
    ? ended
    : yield* context.store.findById(resolution.submissionId).pipe(Unavailable.database("Transfers.complete"))
})

/**
 * Ends transfers in SQL: the status changes and their events, in one transaction for all
 * the completions asked for in the same turn (a block's confirmations wake their waiting
 * requests and the outcome stream together), so a block costs one UPDATE, one INSERT of
 * events and one commit instead of those per transfer. Each asker gets its transfer as it
 * ended, or None when it had ended before. When the shared transaction fails, each
 * completion is tried again alone, so one transfer's fault never becomes another's (as in
 * the guardian's group commit).
 */
export const endInOneTransaction = (context: TransfersContext, entries: ReadonlyArray<Request.Entry<EndTransfer>>) =>
  context.sql.withTransaction(Effect.gen(function*() {
    const asked = new Map(entries.map(({ request: { resolution } }) => [resolution.submissionId, resolution]))
    const ended = yield* context.store.finish(entries.map(({ request: { resolution } }) => ({
      transferId: resolution.submissionId,
      status: resolution._tag === "Confirmed" ? "confirmed" as const : "failed" as const,
      txHash: resolution.txHash,
      blockTimestampSeconds: resolution._tag === "Confirmed" ? resolution.blockTimestampSeconds : null
    })))
    yield* context.outbox.append(ended.flatMap((t) =>
      transferEvents({
        event: t.status === "confirmed" ? "transfer.confirmed" : "transfer.failed",
        mode: t.mode,
        transferId: t.transfer_id,
        sender: { accountId: t.sender_account_id, handle: t.sender_handle, ownerAccountId: t.sender_owner_account_id },
        recipient: t.recipient_account_id === null || t.recipient_handle === null
          ? null
          : { accountId: t.recipient_account_id, handle: t.recipient_handle, ownerAccountId: t.recipient_owner_account_id },
        recipientDisplay: t.recipient_display,
        asset: t.asset,
        confidential: t.confidential,
        txHash: asked.get(t.transfer_id)?.txHash ?? null,
        refundOf: t.refund_of
      })
    ))
    return new Map(ended.map((t) => [t.transfer_id, t])) as ReadonlyMap<string, StoredTransfer>
  }))

/** Answers each asker of a shared end with its own transfer. */
export const answerEnded = (
  entries: ReadonlyArray<Request.Entry<EndTransfer>>,
  exit: Exit.Exit<ReadonlyMap<string, StoredTransfer>, SqlError.SqlError>
) => {
  for (const entry of entries) {
    entry.completeUnsafe(Exit.map(exit, (ended) => Option.fromNullishOr(ended.get(entry.request.resolution.submissionId))))
  }
}

/** The guardian's settlement of a transfer; false when it failed (logged: the recovery round retries). */
const guardianSettle = (context: TransfersContext, transferId: string, outcome: "confirmed" | "failed") =>
  context.guardian.settle({ transferId: transferIdBytes32(transferId), outcome }).pipe(
    Effect.as(true),
    // Any cause, not only a typed failure: a guardian child killed mid-call ends the call
    // with an interruption (its client's scope closes), which is not this fiber's own and
    // must not end the completion or the loop that runs it. Retried by the recovery round;
    // the reservation also expires on its own.
    Effect.catchCause((cause) =>
      Effect.logWarning("guardian settle failed; will retry").pipe(
        Effect.annotateLogs({ transfer_id: transferId, error: Cause.pretty(cause) }),
        Effect.as(false)
      )
    )
  )

/** Records that the guardian settled the transfer, so the recovery round leaves it. */
const markSettled = (context: TransfersContext, transferId: string) =>
  context.store.markGuardianSettled(transferId).pipe(
    Effect.catchCause((cause) =>
      Effect.logWarning("marking a transfer settled with the guardian failed; the recovery round settles it again").pipe(
        Effect.annotateLogs({ transfer_id: transferId, error: Cause.pretty(cause) })
      )
    )
  )

/**
 * The guardian's settlement of a transfer whose SQL end is written (or that never was
 * recorded), and its mark. Never fails: a settlement that did not happen is retried by the
 * recovery round.
 *
 * @since 0.1.0
 */
export const settleWithGuardian = (context: TransfersContext, transferId: string, outcome: "confirmed" | "failed") =>
  guardianSettle(context, transferId, outcome).pipe(
    Effect.flatMap((settled) => (settled ? markSettled(context, transferId) : Effect.void))
  )
