/**
 * Chain following: a cursor per (chain, scope), the next block to read. A scope is a followed
 * ConfidentialToken's address, or `discoveryScope` for the chain-wide search of the contracts
 * that name this guardian.
 */
import { Effect } from "effect"
import { statementWithoutWaitingForDisk } from "../../CommitDurability.ts"
import type { StoreContext } from "./context.ts"
import { discoveryScope } from "./rows.ts"

/** The scope's next block, or undefined when the scope is not followed. */
export const cursor = ({ sql }: StoreContext, chainId: string, scope: string) =>
  sql<{ readonly next_block: string }>`
    SELECT next_block::text AS next_block FROM guardian_chain_cursors WHERE chain_id = ${chainId} AND scope = ${scope}`.pipe(
    Effect.map((rows) => (rows[0] === undefined ? undefined : BigInt(rows[0].next_block)))
  )

/** Starts following a scope at `nextBlock`; a scope already followed keeps its cursor. */
export const startCursor = ({ sql }: StoreContext, chainId: string, scope: string, nextBlock: bigint, nowMs: number) =>
  sql`
    INSERT INTO guardian_chain_cursors (chain_id, scope, next_block, updated_at_ms)
    VALUES (${chainId}, ${scope}, ${nextBlock.toString()}::bigint, ${String(nowMs)}::bigint)
    ON CONFLICT DO NOTHING`.pipe(Effect.asVoid)

/**
 * Moves a cursor forward (never back: a concurrent step may have gone further). Its commit does
 * not wait for the disk: a move lost in a crash reads those blocks again, whose credits are
 * booked once by their (tx hash, log index) and whose contracts are started once, as after a
 * crash between a booking and its cursor move; the next commit that waits (a group's, a booking's)
 * syncs it. Two a follower step, every block, however few transfers.
 */
export const advanceCursor = ({ sql }: StoreContext, chainId: string, scope: string, nextBlock: bigint, nowMs: number) =>
  statementWithoutWaitingForDisk(sql, (commitSetting) =>
    sql`
      UPDATE guardian_chain_cursors SET next_block = ${nextBlock.toString()}::bigint, updated_at_ms = ${String(nowMs)}::bigint
      FROM (SELECT ${commitSetting}) AS commit_mode
      WHERE chain_id = ${chainId} AND scope = ${scope} AND next_block < ${nextBlock.toString()}::bigint`).pipe(Effect.asVoid)

/** The ConfidentialTokens followed on a chain, with their cursors. */
export const followedContracts = ({ sql }: StoreContext, chainId: string) =>
  sql<{ readonly scope: string; readonly next_block: string }>`
    SELECT scope, next_block::text AS next_block FROM guardian_chain_cursors
    WHERE chain_id = ${chainId} AND scope <> ${discoveryScope} ORDER BY scope`.pipe(
    Effect.map((rows) => rows.map((row) => ({ contract: row.scope, nextBlock: BigInt(row.next_block) })))
  )
