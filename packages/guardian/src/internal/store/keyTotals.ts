/**
 * API-key totals (D40): per account and API key, the confirmed debits the key asked for, sealed
 * at rest. Inside a group, a locked total is held in memory and written once at the flush
 * (internal/store/heldRows.ts).
 */
import { Effect } from "effect"
import { updateKeyTotals } from "./batches.ts"
import { heldRows, lockOrCreate, type StoreContext } from "./context.ts"
import { type AccountRef, keyTotalBinding, keyTotalId } from "./rows.ts"
import { open } from "./sealing.ts"

/** Sealed at rest as u64 base units: 18.4 trillion USDG through one key before it saturates. */
const keyTotalMax = (1n << 64n) - 1n

/** Adds a confirmed debit to the total of the API key that asked for it (D40), in the caller's transaction. */
export const addKeyTotal = (context: StoreContext, account: AccountRef, apiKeyId: string, amount: bigint) =>
  Effect.gen(function*() {
    const { box, sql } = context
    const binding = keyTotalBinding(account, apiKeyId)
    const held = (yield* heldRows)?.keyTotals
    const id = keyTotalId(account, apiKeyId)
    let entry = held?.get(id)
    if (entry === undefined) {
      const row = yield* lockOrCreate(
        sql<{ readonly total_sealed: Uint8Array }>`
          SELECT total_sealed FROM guardian_key_totals
          WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}
            AND api_key_id = ${apiKeyId}
          FOR UPDATE`,
        () => sql`
          INSERT INTO guardian_key_totals (chain_id, contract, account, api_key_id, total_sealed, transfers)
          VALUES (${account.chainId}, ${account.contract}, ${account.account}, ${apiKeyId}, ${box.seal(0n, binding)}, 0)
          ON CONFLICT DO NOTHING`
      )
      entry = { account, apiKeyId, total: yield* open(box, row?.total_sealed ?? new Uint8Array(), binding), added: 0 }
      held?.set(id, entry)
    }
    entry.total = entry.total + amount > keyTotalMax ? keyTotalMax : entry.total + amount
    entry.added++
    if (held === undefined) yield* updateKeyTotals(context, [entry])
  })

/** Every API key's total for the account, in key id order. */
export const keyTotals = ({ box, sql }: StoreContext, account: AccountRef) =>
  Effect.gen(function*() {
    const rows = yield* sql<{ readonly api_key_id: string; readonly total_sealed: Uint8Array; readonly transfers: string }>`
      SELECT api_key_id, total_sealed, transfers::text AS transfers FROM guardian_key_totals
      WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}
      ORDER BY api_key_id`
    return yield* Effect.forEach(rows, (row) =>
      open(box, row.total_sealed, keyTotalBinding(account, row.api_key_id)).pipe(
        Effect.map((amount) => ({ apiKeyId: row.api_key_id, amount, transfers: BigInt(row.transfers) }))
      ))
  })
