/**
 * Rebroadcast: what the watcher does for transactions not seen in a block for a while. One past
 * its attestation deadline has expired (or was applied by another transaction); one still valid
 * is broadcast again with the same bytes; a relayer whose next transaction the node holds
 * `queued` has its transactions sent again in nonce order; a relayer nonce left by an expired
 * transaction is filled with a no-op, or the relayer's later transactions would wait on it.
 *
 * @since 0.5.0
 */
import { Clock, Effect, Option } from "effect"
import type { Hex } from "viem"
import { SettlementLimits } from "../domain.ts"
import type { Relayer } from "../Relayer.ts"
import { appliedElsewhere, decodePoolInspection, nonceOf } from "./ChainReads.ts"
import { failWith, settleFromReceipt } from "./Conclude.ts"
import { allInFlight, type EngineContext, pastDeadline, rpc, type StepError, type Tracked } from "./EngineContext.ts"
import { broadcast, isAlreadyKnown, isNonceTooLow } from "./Send.ts"

/**
 * Not seen in a block for a while: expired, applied by another, or broadcast again.
 *
 * @since 0.5.0
 * @category steps
 */
export const revisit = (context: EngineContext, tracked: Tracked): Effect.Effect<void, StepError> =>
  Effect.gen(function*() {
    if (pastDeadline(context, tracked.request.deadlineSeconds)) {
      // Not seen and past its deadline: its relayer nonce may be one the chain now waits on
      // (the watcher fills it, once it knows the nonce was not used after all).
      yield* tracked.relayer.noteGap(tracked.txHash)
      const applied = yield* appliedElsewhere(context, tracked.request)
      if (Option.isSome(applied)) return yield* settleFromReceipt(context, tracked, applied.value)
      return yield* failWith(context, tracked, "expired")
    }
    tracked.sentAtMs = yield* Clock.currentTimeMillis
    yield* context.store.countBroadcast([tracked.request.submissionId])
    yield* broadcast(context, [tracked], 0)
  }).pipe(Effect.withSpan("Settlement.revisit"))

/**
 * Fills the gaps the relayers noted (their relayer's transactions wait on them), each relayer
 * on its own so one failing RPC leaves the others to go on, a few per try.
 *
 * @since 0.5.0
 * @category steps
 */
export const fillNonceGaps = (context: EngineContext): Effect.Effect<void> =>
  Effect.forEach(
    context.relayers.filter((relayer) => relayer.hasGaps()),
    (relayer) =>
      Effect.gen(function*() {
        const mined = yield* rpc(context, "reading a relayer nonce", (client) =>
          client.getTransactionCount({ address: relayer.address, blockTag: "latest" }))
        yield* relayer.fillGaps(mined, SettlementLimits.fillsPerTry, (filler) =>
          rpc(context, "filling a relayer nonce", (client) => client.sendRawTransaction({ serializedTransaction: filler.rawTx })).pipe(
            Effect.asVoid,
            Effect.catch((error) =>
              isAlreadyKnown(error.cause) || isNonceTooLow(error.cause)
                ? Effect.void
                : Effect.logWarning("filling a relayer nonce failed; will retry").pipe(
                  Effect.annotateLogs({ relayer: relayer.address, nonce: filler.nonce, error: String(error.cause) })
                ))
          ))
      }).pipe(Effect.catch((error) => Effect.logWarning("filling relayer nonces failed; will retry", error))),
    { discard: true }
  ).pipe(Effect.ensuring(Clock.currentTimeMillis.pipe(Effect.map((now) => (context.view.nonceGapsTriedAtMs = now)))))

/**
 * Relayers whose next transaction the node holds without mining it: anvil's pool can keep a
 * transaction "queued" for good when it arrived while its predecessor was being mined, even
 * once its nonce is the one the chain expects, and every later transaction of the relayer
 * waits behind it (seen under load with 100-ms blocks: 109 transactions of one relayer held
 * for minutes, their transfers `pending` until their deadline). Sending the same bytes again
 * is refused as already imported; taking the relayer's transactions out of the pool and
 * sending them again in nonce order has the node take them afresh.
 *
 * Looked at for relayers with a transaction in flight here unseen for `heldAfterMs` (three
 * blocks, at least `SettlementLimits.heldCheckAfterMs`), at most once per that period per
 * relayer, with one reading of the pool for all of them (`txpool_inspect`: nonces and a line
 * per transaction, not their calldata). Acted on only when the pool shows the relayer's next
 * nonce `queued` (not merely a backed-up pool). A node without those methods refuses the
 * reading and the plain rebroadcast goes on. What is sent again: this node's transactions of
 * the relayer not yet seen in a block, from the next nonce up, in order, read after the pool
 * was cleared (so one tracked meanwhile is not left out), leaving out calls past their
 * deadline (revisited: `expired`, their nonce filled). A send that fails is logged and the
 * rest still go; what was not sent is revisited. Answers the entries sent.
 *
 * @since 0.5.0
 * @category steps
 */
export const resendHeld = Effect.fnUntraced(function*(context: EngineContext, late: ReadonlySet<Relayer>) {
  const checkedAtMs = yield* Clock.currentTimeMillis
  const due = [...late].filter((relayer) => checkedAtMs - (context.heldCheckedAtMs.get(relayer) ?? 0) >= context.heldAfterMs)
  if (due.length === 0) return []
  for (const relayer of due) context.heldCheckedAtMs.set(relayer, checkedAtMs)
  const pool = yield* rpc(context, "reading the node's pool", (client) =>
    client.request({ method: "txpool_inspect" as never, params: [] as never })).pipe(
      Effect.map(decodePoolInspection),
      Effect.catch(() => Effect.succeed(Option.none()))
    )
  if (Option.isNone(pool)) return []
  const queuedByAddress = new Map(Object.entries(pool.value.queued).map(([address, byNonce]) => [address.toLowerCase(), byNonce]))
  const sent: Array<Tracked> = []
  for (const relayer of due) {
    const queued = queuedByAddress.get(relayer.address.toLowerCase())
    if (queued === undefined) continue
    yield* resendInNonceOrder(context, relayer, queued).pipe(
      Effect.tap((resent) => Effect.sync(() => sent.push(...resent))),
      Effect.catch((error) => Effect.logWarning("could not send a held relayer's transactions again", error))
    )
  }
  return sent
})

interface HeldTransaction {
  readonly nonce: number
  readonly txHash: Hex
  readonly rawTx: Hex
  readonly entries: Array<Tracked>
}

/** This node's transactions of `relayer` not yet seen in a block nor past their deadline, from nonce `next` up, in nonce order. */
const heldTransactions = (context: EngineContext, relayer: Relayer, next: number): Array<HeldTransaction> => {
  const byHash = new Map<Hex, HeldTransaction>()
  for (const tracked of allInFlight(context)) {
    if (tracked.relayer !== relayer || tracked.mined !== undefined || tracked.revertedBeforeDeadline === true) continue
    if (pastDeadline(context, tracked.request.deadlineSeconds)) continue
    const known = byHash.get(tracked.txHash)
    if (known !== undefined) known.entries.push(tracked)
    else {
      const nonce = nonceOf(tracked.rawTx)
      if (nonce !== undefined && nonce >= next) {
        byHash.set(tracked.txHash, { nonce, txHash: tracked.txHash, rawTx: tracked.rawTx, entries: [tracked] })
      }
    }
  }
  return [...byHash.values()].sort((a, b) => a.nonce - b.nonce)
}

/** One relayer of `resendHeld`, given the nonces the pool holds `queued` for it. */
const resendInNonceOrder = Effect.fnUntraced(
  function*(context: EngineContext, relayer: Relayer, queued: Readonly<Record<string, unknown>>) {
    const next = yield* rpc(context, "reading a relayer nonce", (client) =>
      client.getTransactionCount({ address: relayer.address, blockTag: "latest" }))
    if (queued[String(next)] === undefined) return []
    yield* rpc(context, "clearing a relayer's transactions from the node's pool", (client) =>
      client.request({ method: "anvil_removePoolTransactions" as never, params: [relayer.address] as never }))
    const resend = heldTransactions(context, relayer, next)
    yield* Effect.logWarning("the node held a relayer's next transaction: its transactions sent again in nonce order").pipe(
      Effect.annotateLogs({ relayer: relayer.address, nonce: next, transactions: resend.length })
    )
    yield* context.store.countBroadcast(resend.flatMap((held) => held.entries.map((tracked) => tracked.request.submissionId)))
    const sent: Array<Tracked> = []
    for (const transaction of resend) {
      const ok = yield* rpc(context, "broadcasting", (client) => client.sendRawTransaction({ serializedTransaction: transaction.rawTx })).pipe(
        Effect.as(true),
        Effect.catch((error) =>
          isAlreadyKnown(error.cause) || isNonceTooLow(error.cause)
            ? Effect.succeed(true)
            : Effect.logWarning("broadcast failed; will retry").pipe(
              Effect.annotateLogs({ tx_hash: transaction.txHash, error: String(error.cause) }),
              Effect.as(false)
            ))
      )
      if (!ok) continue
      const now = yield* Clock.currentTimeMillis
      for (const tracked of transaction.entries) {
        tracked.sentAtMs = now
        sent.push(tracked)
      }
    }
    return sent
  }
)
