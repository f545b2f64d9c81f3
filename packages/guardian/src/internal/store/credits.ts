/**
 * Credits: those reported through `credit` (guardian_credits, their amounts sealed at rest),
 * and the credit logs the chain follower booked (guardian_chain_credits: each log once, by
 * chain, transaction and log index). Inside a group that prefetched it, a new credit log is
 * recorded in memory and written by the group's flush (internal/store/heldRows.ts).
 */
import { Effect } from "effect"
import { insertChainCreditRows } from "./batches.ts"
import { heldRows, type StoreContext } from "./context.ts"
import { afterRecords } from "./heldRows.ts"
import { type AccountRef, type ChainCreditRow, creditBinding, creditId } from "./rows.ts"

/** The request digest of a reported credit, if its id was seen. */
export const findCredit = ({ sql }: StoreContext, creditId: string) =>
  sql<{ readonly request_digest: string }>`SELECT request_digest FROM guardian_credits WHERE credit_id = ${creditId}`.pipe(
    Effect.map((rows) => rows[0]?.request_digest)
  )

/** Records a reported credit; false when its id was seen before. */
export const insertCredit = (
  { box, sql }: StoreContext,
  credit: { readonly creditId: string; readonly amount: bigint; readonly requestDigest: string } & AccountRef,
  nowMs: number
) =>
  sql<{ readonly credit_id: string }>`
    INSERT INTO guardian_credits (credit_id, chain_id, contract, account, amount_sealed, request_digest, created_at_ms)
    VALUES (${credit.creditId}, ${credit.chainId}, ${credit.contract}, ${credit.account},
      ${box.seal(credit.amount, creditBinding(credit.creditId))}, ${credit.requestDigest}, ${String(nowMs)}::bigint)
    ON CONFLICT (credit_id) DO NOTHING
    RETURNING credit_id`.pipe(Effect.map((rows) => rows.length === 1))

/** Whether credits were reported through `credit` for this contract (books older than following). */
export const hasReportedCredits = ({ sql }: StoreContext, chainId: string, contract: string) =>
  sql<{ readonly credit_id: string }>`
    SELECT credit_id FROM guardian_credits WHERE chain_id = ${chainId} AND contract = ${contract} LIMIT 1`.pipe(
    Effect.map((rows) => rows.length > 0)
  )

/**
 * Records a credit log; false when it was recorded before (then nothing may be booked). In a
 * group that prefetched it (see `HeldRows`), in memory until the flush.
 */
export const insertChainCredit = (context: StoreContext, credit: ChainCreditRow, nowMs: number) =>
  Effect.gen(function*() {
    const held = yield* heldRows
    const id = creditId(credit)
    const recorded = held?.creditsRecorded.get(id)
    if (held !== undefined && recorded !== undefined) {
      if (recorded) return false
      held.creditsRecorded.set(id, true)
      held.newChainCredits.set(id, { credit, nowMs })
      return true
    }
    const inserted = (yield* insertChainCreditRows(context, [{ credit, nowMs }])).length === 1
    held?.creditsRecorded.set(id, true)
    return inserted
  })

/** Whether the credit log was recorded (booked or not). */
export const chainCreditRecorded = (context: StoreContext, chainId: string, txHash: string, logIndex: number) =>
  afterRecords(context, context.sql<{ readonly tx_hash: string }>`
    SELECT tx_hash FROM guardian_chain_credits
    WHERE chain_id = ${chainId} AND tx_hash = ${txHash} AND log_index = ${logIndex}`).pipe(Effect.map((rows) => rows.length > 0))
