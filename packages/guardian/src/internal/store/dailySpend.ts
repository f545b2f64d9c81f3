/**
 * An agent's daily spend: confirmed and in-flight debits per 15-minute UTC bucket, sealed at
 * rest, so any local day in any time zone the policy names is a range of buckets
 * (internal/dayWindow.ts).
 */
import { Effect } from "effect"
import { broken, lockOrCreate, type StoreContext } from "./context.ts"
import { type AccountRef, spendBinding } from "./rows.ts"
import { open } from "./sealing.ts"

/** The agent's spend over buckets [firstBucket, endBucket). */
export const spentIn = ({ box, sql }: StoreContext, agent: AccountRef, firstBucket: number, endBucket: number) =>
  Effect.gen(function*() {
    const rows = yield* sql<{ readonly bucket: string; readonly spent_sealed: Uint8Array }>`
      SELECT bucket::text AS bucket, spent_sealed FROM guardian_agent_spend
      WHERE chain_id = ${agent.chainId} AND contract = ${agent.contract} AND agent = ${agent.account}
        AND bucket >= ${String(firstBucket)}::bigint AND bucket < ${String(endBucket)}::bigint`
    let total = 0n
    for (const row of rows) total += yield* open(box, row.spent_sealed, spendBinding(agent, Number(row.bucket)))
    return total
  })

/** Adds `delta` (negative to release) to one bucket of the agent's spend. */
export const addSpend = ({ box, sql }: StoreContext, agent: AccountRef, bucket: number, delta: bigint) =>
  Effect.gen(function*() {
    const binding = spendBinding(agent, bucket)
    const row = yield* lockOrCreate(
      sql<{ readonly spent_sealed: Uint8Array }>`
        SELECT spent_sealed FROM guardian_agent_spend
        WHERE chain_id = ${agent.chainId} AND contract = ${agent.contract} AND agent = ${agent.account}
          AND bucket = ${String(bucket)}::bigint
        FOR UPDATE`,
      () => sql`
        INSERT INTO guardian_agent_spend (chain_id, contract, agent, bucket, spent_sealed)
        VALUES (${agent.chainId}, ${agent.contract}, ${agent.account}, ${String(bucket)}::bigint, ${box.seal(0n, binding)})
        ON CONFLICT DO NOTHING`
    )
    const current = yield* open(box, row?.spent_sealed ?? new Uint8Array(), binding)
    const next = current + delta
    if (next < 0n) return yield* broken("an agent's spend never goes negative: a release follows its own debit")
    yield* sql`
      UPDATE guardian_agent_spend SET spent_sealed = ${box.seal(next, binding)}
      WHERE chain_id = ${agent.chainId} AND contract = ${agent.contract} AND agent = ${agent.account}
        AND bucket = ${String(bucket)}::bigint`
  })
