/**
 * The group's prefetch: before any of a group's units runs, it locks, in one statement per kind,
 * the rows the units will lock (see `RowHints`): the hinted reservations, then the balances of
 * their parties and the hinted balances, then the API-key totals their confirmations add to;
 * each held from then on as a unit's own lock would have held it (`HeldRows`). Rows are locked
 * in key order, as a unit locks its pair. It then reads what the hinted new decisions must know
 * was recorded before, and which hinted credit logs are recorded.
 */
import { Effect } from "effect"
import type { SqlError } from "effect/sql"
import { valuesPlaceholders } from "../../SqlValues.ts"
import { broken, HeldRows, heldRows, type StoreContext } from "./context.ts"
import {
  type AccountRef,
  balanceColumns,
  type BalanceSqlRow,
  type ChainCreditKey,
  creditId,
  keyTotalBinding,
  keyTotalId,
  nonceId,
  ref,
  reservationColumns,
  type ReservationSqlRow,
  type RowHints
} from "./rows.ts"
import { open, toBalance, toReservation } from "./sealing.ts"

type Held = HeldRows["Service"]

/** An API-key total to lock: its account and key. */
interface KeyTotalRef {
  readonly account: AccountRef
  readonly apiKeyId: string
}

/** Locks the rows the group's units will lock and reads what they will check (see the module header). */
export const prefetch = (context: StoreContext, hints: ReadonlyArray<RowHints>): Effect.Effect<void, SqlError.SqlError> =>
  Effect.gen(function*() {
    const held = yield* heldRows
    if (held === undefined) return
    const transferIds = yield* lockReservations(context, held, hints)
    const { accounts, keyTotals } = partiesOf(held, hints, transferIds)
    yield* lockBalances(context, held, [...accounts.entries()].filter(([id]) => !held.balances.has(id)).map(([, account]) => account))
    yield* lockKeyTotals(context, held, [...keyTotals.entries()].filter(([id]) => !held.keyTotals.has(id)).map(([, total]) => total))
    yield* readDecisionRecords(context, held, hints)
    yield* readCreditsRecorded(context, held, hints)
  })

/** Locks the hinted reservations the group does not hold yet; answers their transfer ids. */
const lockReservations = (context: StoreContext, held: Held, hints: ReadonlyArray<RowHints>) =>
  Effect.gen(function*() {
    const transferIds = [...new Set(hints.flatMap((hint) => hint.reservations ?? []))].filter((id) => !held.reservations.has(id))
    if (transferIds.length > 0) {
      const { sql } = context
      const rows = yield* sql<ReservationSqlRow>`
        SELECT ${sql.literal(reservationColumns)} FROM guardian_reservations
        WHERE ${sql.in("transfer_id", transferIds)} ORDER BY transfer_id FOR UPDATE`
      for (const row of rows) held.reservations.set(row.transfer_id, yield* toReservation(context.box, row))
    }
    return transferIds
  })

/** The balances to lock (the hinted ones, and the parties of the locked reservations) and the key totals, by key. */
const partiesOf = (held: Held, hints: ReadonlyArray<RowHints>, transferIds: ReadonlyArray<string>) => {
  const accounts = new Map<string, AccountRef>()
  const keyTotals = new Map<string, KeyTotalRef>()
  for (const hint of hints) for (const account of hint.balances ?? []) accounts.set(ref(account), account)
  for (const id of transferIds) {
    const reservation = held.reservations.get(id)
    if (reservation === undefined) continue
    const sender = { chainId: reservation.chainId, contract: reservation.contract, account: reservation.fromAccount }
    accounts.set(ref(sender), sender)
    if (reservation.kind === "confidential") {
      const recipient = { ...sender, account: reservation.toAccount }
      accounts.set(ref(recipient), recipient)
    }
    if (reservation.apiKeyId !== null) keyTotals.set(keyTotalId(sender, reservation.apiKeyId), { account: sender, apiKeyId: reservation.apiKeyId })
  }
  return { accounts, keyTotals }
}

/** Locks these balance rows (those that exist) in one statement. */
const lockBalances = ({ box, sql }: StoreContext, held: Held, balances: ReadonlyArray<AccountRef>) =>
  Effect.gen(function*() {
    if (balances.length === 0) return
    const rows = yield* sql.unsafe<BalanceSqlRow & { readonly chain_id: string; readonly contract: string; readonly account: string }>(
      `SELECT chain_id, contract, account, ${balanceColumns}
       FROM guardian_balances WHERE (chain_id, contract, account) IN (VALUES ${valuesPlaceholders(balances.length, ["::text", "::text", "::text"])})
       ORDER BY chain_id, contract, account FOR UPDATE`,
      balances.flatMap((account) => [account.chainId, account.contract, account.account])
    )
    for (const row of rows) {
      const account = { chainId: row.chain_id, contract: row.contract, account: row.account }
      held.balances.set(ref(account), { account, balance: yield* toBalance(box, row, account), written: false })
    }
  })

/** Locks these API-key totals (those that exist) in one statement. */
const lockKeyTotals = ({ box, sql }: StoreContext, held: Held, totals: ReadonlyArray<KeyTotalRef>) =>
  Effect.gen(function*() {
    if (totals.length === 0) return
    const rows = yield* sql.unsafe<{ readonly chain_id: string; readonly contract: string; readonly account: string; readonly api_key_id: string; readonly total_sealed: Uint8Array }>(
      `SELECT chain_id, contract, account, api_key_id, total_sealed FROM guardian_key_totals
       WHERE (chain_id, contract, account, api_key_id) IN (VALUES ${valuesPlaceholders(totals.length, ["::text", "::text", "::text", "::text"])})
       ORDER BY chain_id, contract, account, api_key_id FOR UPDATE`,
      totals.flatMap((total) => [total.account.chainId, total.account.contract, total.account.account, total.apiKeyId])
    )
    for (const row of rows) {
      const account = { chainId: row.chain_id, contract: row.contract, account: row.account }
      const total = yield* open(box, row.total_sealed, keyTotalBinding(account, row.api_key_id))
      held.keyTotals.set(keyTotalId(account, row.api_key_id), { account, apiKeyId: row.api_key_id, total, added: 0 })
    }
  })

/**
 * What the hinted new decisions must know was recorded before (`recordedBefore`), read under the
 * senders' locks as `recordedBefore` is; a sender whose row does not exist yet is not locked here,
 * and its unit reads its records itself, after creating the row. (The prefetch runs before any
 * unit: nothing is held in memory to write first.)
 */
const readDecisionRecords = ({ sql }: StoreContext, held: Held, hints: ReadonlyArray<RowHints>) =>
  Effect.gen(function*() {
    const decisions = hints.flatMap((hint) => hint.decisions ?? []).filter((decision) => held.balances.has(ref(decision.sender)))
    if (decisions.length === 0) return
    const rows = yield* sql.unsafe<{
      readonly position: number
      readonly reserved: boolean
      readonly decided: boolean
      readonly nonce_taken: boolean
    }>(
      `SELECT v.position,
         EXISTS (SELECT 1 FROM guardian_reservations r WHERE r.transfer_id = v.transfer_id) AS reserved,
         EXISTS (SELECT 1 FROM guardian_decisions d WHERE d.transfer_id = v.transfer_id) AS decided,
         EXISTS (
           SELECT 1 FROM guardian_reservations r
           WHERE r.chain_id = v.chain_id AND r.contract = v.contract AND r.from_account = v.from_account AND r.nonce = v.nonce
         ) AS nonce_taken
       FROM (VALUES ${valuesPlaceholders(decisions.length, ["::text", "::text", "::text", "::text", "::text", "::integer"])})
         AS v (transfer_id, chain_id, contract, from_account, nonce, position)`,
      decisions.flatMap((decision, position) => [
        decision.transferId,
        decision.sender.chainId,
        decision.sender.contract,
        decision.sender.account,
        decision.nonce.toString(),
        String(position)
      ])
    )
    const byPosition = new Map(rows.map((row) => [Number(row.position), row]))
    for (const [position, decision] of decisions.entries()) {
      const row = byPosition.get(position)
      if (row === undefined) return yield* broken("a SELECT over a VALUES list answers each of its rows")
      held.reservedIds.set(decision.transferId, row.reserved)
      held.decidedIds.set(decision.transferId, row.decided)
      // Another hint's decision may name the same nonce under another transfer id: taken by either.
      const nonce = nonceId(decision.sender, decision.nonce)
      held.noncesTaken.set(nonce, row.nonce_taken || held.noncesTaken.get(nonce) === true)
    }
  })

/** Which of the hinted credit logs are recorded, in one statement. */
const readCreditsRecorded = ({ sql }: StoreContext, held: Held, hints: ReadonlyArray<RowHints>) =>
  Effect.gen(function*() {
    const credits: ReadonlyArray<ChainCreditKey> = [
      ...new Map(hints.flatMap((hint) => hint.credits ?? []).map((credit) => [creditId(credit), credit])).values()
    ].filter((credit) => !held.creditsRecorded.has(creditId(credit)))
    if (credits.length === 0) return
    const rows = yield* sql.unsafe<{ readonly chain_id: string; readonly tx_hash: string; readonly log_index: number }>(
      `SELECT c.chain_id, c.tx_hash, c.log_index FROM guardian_chain_credits c
       JOIN (VALUES ${valuesPlaceholders(credits.length, ["::text", "::text", "::integer"])}) AS v (chain_id, tx_hash, log_index)
         ON c.chain_id = v.chain_id AND c.tx_hash = v.tx_hash AND c.log_index = v.log_index`,
      credits.flatMap((credit) => [credit.chainId, credit.txHash, String(credit.logIndex)])
    )
    for (const credit of credits) held.creditsRecorded.set(creditId(credit), false)
    for (const row of rows) held.creditsRecorded.set(creditId({ chainId: row.chain_id, txHash: row.tx_hash, logIndex: Number(row.log_index) }), true)
  })
