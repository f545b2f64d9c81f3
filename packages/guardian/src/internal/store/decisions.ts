/**
 * Decisions: what is recorded of each transfer id's decision (which request, whether held,
 * how many re-decisions), and what a new decision must know was recorded before. Inside a
 * group, what the prefetch read is checked and a new decision recorded in memory, written by
 * the group's flush (internal/store/heldRows.ts).
 */
import { Effect } from "effect"
import { insertDecisionRows } from "./batches.ts"
import { broken, heldRows, type StoreContext } from "./context.ts"
import { afterRecords } from "./heldRows.ts"
import { type AccountRef, type DecisionRow, nonceId } from "./rows.ts"

/** The decision recorded for a transfer id (guardian_decisions), locked for the caller's transaction. */
export const findDecision = (context: StoreContext, transferId: string) =>
  afterRecords(context, context.sql<{ readonly request_digest: string; readonly held: boolean; readonly redecisions: number }>`
    SELECT request_digest, held, redecisions FROM guardian_decisions WHERE transfer_id = ${transferId} FOR UPDATE`).pipe(
    Effect.map((rows) => {
      const row = rows[0]
      return row === undefined
        ? undefined
        : { requestDigest: row.request_digest, held: row.held, redecisions: Number(row.redecisions) } satisfies DecisionRow
    })
  )

/**
 * Records the first decision of a transfer id; false when a concurrent twin recorded one
 * first (the caller then decides again and finds it).
 */
export const insertDecision = (context: StoreContext, transferId: string, decision: DecisionRow, nowMs: number) =>
  Effect.gen(function*() {
    const held = yield* heldRows
    const known = held?.decidedIds.get(transferId)
    // Known to the group (see `HeldRows`): recorded in memory, or found taken, without a statement.
    if (held !== undefined && known !== undefined) {
      if (known) return false
      held.decidedIds.set(transferId, true)
      held.newDecisions.set(transferId, { decision, nowMs })
      return true
    }
    const rows = yield* afterRecords(context, insertDecisionRows(context, [[transferId, { decision, nowMs }]]))
    held?.decidedIds.set(transferId, true)
    return rows.length === 1
  })

/** Records a re-decision over the transfer id's recorded one. */
export const updateDecision = (context: StoreContext, transferId: string, decision: DecisionRow, nowMs: number) =>
  afterRecords(context, context.sql`
    UPDATE guardian_decisions
    SET request_digest = ${decision.requestDigest}, held = ${decision.held}, redecisions = ${decision.redecisions},
        decided_at_ms = ${String(nowMs)}::bigint
    WHERE transfer_id = ${transferId}`).pipe(Effect.asVoid)

/**
 * What a new decision must know was recorded before, in one statement instead of three (the
 * throughput work: almost every transfer id is new, and then none of the rows exists): a
 * reservation under the transfer id, a decision under it, another reservation under the
 * sender's nonce.
 */
export const recordedBefore = (context: StoreContext, transferId: string, sender: AccountRef, nonce: bigint) =>
  Effect.flatMap(heldRows, (held) => {
    // Read by the group's prefetch and kept up to date by its units (see `HeldRows`).
    const reserved = held?.reservedIds.get(transferId)
    const decided = held?.decidedIds.get(transferId)
    const nonceTaken = held?.noncesTaken.get(nonceId(sender, nonce))
    return reserved !== undefined && decided !== undefined && nonceTaken !== undefined
      ? Effect.succeed({ reserved, decided, nonceTaken })
      : recordedBeforeRead(context, transferId, sender, nonce)
  })

const recordedBeforeRead = (context: StoreContext, transferId: string, sender: AccountRef, nonce: bigint) =>
  afterRecords(context, context.sql<{ readonly reserved: boolean; readonly decided: boolean; readonly nonce_taken: boolean }>`
    SELECT
      EXISTS (SELECT 1 FROM guardian_reservations WHERE transfer_id = ${transferId}) AS reserved,
      EXISTS (SELECT 1 FROM guardian_decisions WHERE transfer_id = ${transferId}) AS decided,
      EXISTS (
        SELECT 1 FROM guardian_reservations
        WHERE chain_id = ${sender.chainId} AND contract = ${sender.contract} AND from_account = ${sender.account}
          AND nonce = ${nonce.toString()}
      ) AS nonce_taken`).pipe(Effect.flatMap((rows) => {
    const row = rows[0]
    return row === undefined
      ? broken("a SELECT without FROM answers one row")
      : Effect.succeed({ reserved: row.reserved, decided: row.decided, nonceTaken: row.nonce_taken })
  }))
