/**
 * Balances: one row per (chain, ConfidentialToken, account), its confirmed and reserved amounts
 * sealed at rest. A balance is changed under its row lock (`lockBalance`, SELECT … FOR UPDATE),
 * so two guardian processes on one PostgreSQL database serialize on the row; inside a group
 * (internal/store/heldRows.ts) the locked row is held in memory and written once at the flush.
 */
import { Effect } from "effect"
import type { SqlError } from "effect/sql"
import { updateBalances } from "./batches.ts"
import { broken, heldRows, lockOrCreate, type StoreContext } from "./context.ts"
import {
  type AccountRef,
  balanceColumns,
  type BalanceRow,
  type BalanceSqlRow,
  type BalanceWrite,
  confirmedBinding,
  ref,
  reservedBinding
} from "./rows.ts"
import { toBalance } from "./sealing.ts"

/** Creates the balance row when missing, then locks it for the transaction. */
export const lockBalance = ({ box, sql }: StoreContext, account: AccountRef): Effect.Effect<BalanceRow, SqlError.SqlError> =>
  Effect.gen(function*() {
    const held = (yield* heldRows)?.balances
    const known = held?.get(ref(account))
    if (known !== undefined) return known.balance
    const row = yield* lockOrCreate(
      sql<BalanceSqlRow>`
        SELECT ${sql.literal(balanceColumns)}
        FROM guardian_balances
        WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}
        FOR UPDATE`,
      () => sql`
        INSERT INTO guardian_balances (chain_id, contract, account, confirmed_sealed, reserved_sealed)
        VALUES (${account.chainId}, ${account.contract}, ${account.account},
          ${box.seal(0n, confirmedBinding(account))}, ${box.seal(0n, reservedBinding(account))})
        ON CONFLICT DO NOTHING`
    )
    if (row === undefined) return yield* broken("a balance row, once upserted, stays for its transaction")
    const balance = yield* toBalance(box, row, account)
    held?.set(ref(account), { account, balance, written: false })
    return balance
  })

/** The balance without locking (zero when the guardian never booked the account). */
export const readBalance = ({ box, sql }: StoreContext, account: AccountRef): Effect.Effect<BalanceRow, SqlError.SqlError> =>
  Effect.gen(function*() {
    const rows = yield* sql<BalanceSqlRow>`
      SELECT ${sql.literal(balanceColumns)}
      FROM guardian_balances
      WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}`
    const row = rows[0]
    return row === undefined
      ? { confirmed: 0n, reserved: 0n, version: 0n, owned: false, frozenReason: null }
      : yield* toBalance(box, row, account)
  })

/** Writes a balance locked by `lockBalance` (in memory until the commit when its group holds it). */
export const writeBalance = (context: StoreContext, account: AccountRef, balance: BalanceWrite) =>
  Effect.gen(function*() {
    const held = (yield* heldRows)?.balances.get(ref(account))
    if (held === undefined) return yield* updateBalances(context, [{ account, balance }])
    held.balance = { ...held.balance, ...balance }
    held.written = true
  })

/** Freezes the account (a reason) or unfreezes it (null). */
export const setFrozen = (context: StoreContext, account: AccountRef, reason: string | null, nowMs: number) =>
  Effect.gen(function*() {
    // frozen_reason is not among the columns a held balance writes back: the row now, the held copy too.
    const held = (yield* heldRows)?.balances.get(ref(account))
    if (held !== undefined) held.balance = { ...held.balance, frozenReason: reason }
    yield* setFrozenRow(context, account, reason, nowMs)
  })

const setFrozenRow = ({ sql }: StoreContext, account: AccountRef, reason: string | null, nowMs: number) =>
  sql`
    UPDATE guardian_balances
    SET frozen_reason = ${reason}, frozen_at_ms = ${reason === null ? null : String(nowMs)}::bigint
    WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}`.pipe(Effect.asVoid)

/** How many accounts are frozen. */
export const frozenCount = ({ sql }: StoreContext) =>
  sql<{ readonly count: string }>`
    SELECT count(*)::text AS count FROM guardian_balances WHERE frozen_reason IS NOT NULL`.pipe(
    Effect.map((rows) => Number(rows[0]?.count ?? "0"))
  )

/** Accounts the periodic reconciliation checks, after `after` in key order (paging). */
export const ownedAccounts = ({ sql }: StoreContext, after: AccountRef | undefined, limit: number) =>
  (after === undefined
    ? sql<{ readonly chain_id: string; readonly contract: string; readonly account: string }>`
        SELECT chain_id, contract, account FROM guardian_balances WHERE owned
        ORDER BY chain_id, contract, account LIMIT ${limit}`
    : sql<{ readonly chain_id: string; readonly contract: string; readonly account: string }>`
        SELECT chain_id, contract, account FROM guardian_balances
        WHERE owned AND (chain_id, contract, account) > (${after.chainId}, ${after.contract}, ${after.account})
        ORDER BY chain_id, contract, account LIMIT ${limit}`).pipe(
      Effect.map((rows) => rows.map((row): AccountRef => ({ chainId: row.chain_id, contract: row.contract, account: row.account })))
    )
