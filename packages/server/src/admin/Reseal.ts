/**
 * D54: re-seals every value kept under `WALLET_KEK` (`platform/SecretBox.ts`) under the current
 * KEK, for a rotation. What is sealed under it, one entry per column:
 *
 * | column | bound to |
 * |---|---|
 * | `accounts.wallet_key_sealed` | the account (custodial wallet keys, agents' included) |
 * | `chain_keys.key_sealed` | mode, role, position (the embedded chain's faucet and relayers) |
 * | `webhooks.secret_sealed`, `webhooks.previous_secret_sealed` | the subscription |
 * | `agent_transactions.public_amount_sealed` | the held transaction (a held public transfer's amount) |
 *
 * Each value is opened with the box's key ring (the current KEK or an accepted one) and replaced
 * by a compare-and-set (`WHERE column = the value read`), in batches of `resealBatchMax` rows, one
 * transaction each. So every committed state opens with the ring (a value is either the old one or
 * the new one, never lost), a value another node changed meanwhile (a webhook secret rotated) is
 * left to it (already sealed under its own current KEK), and a run cut off anywhere is resumed by
 * running it again: values already under the current KEK are skipped without being opened (they
 * name it). The answer counts what is left under any other key; 0 means the accepted KEKs may be
 * dropped. A value that opens under no key of the ring is named (never its contents) and left.
 *
 * @since 0.12.0
 */
import { Context, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { secretBinding } from "@pps/api/Webhooks"
import { walletKeyBinding } from "../accounts/Accounts.ts"
import { SecretBox } from "../platform/SecretBox.ts"
import { chainKeyBinding } from "../settlement/Chains.ts"
import { publicAmountBinding } from "../transfers/hold.ts"

/**
 * Rows re-sealed per transaction: small enough that a batch holds its row locks for milliseconds
 * (a webhook secret's rotation waits at most that long), large enough that a hundred thousand
 * wallets take a few hundred transactions.
 *
 * @since 0.12.0
 * @category constants
 */
export const resealBatchMax = 200

/** How many unopenable values an answer names (the count is always whole). */
const unopenableNamedMax = 20

/** A sealed column: its rows in id order, what each value is bound to, and its compare-and-set. */
interface SealedColumn {
  readonly name: string
  readonly page: (sql: SqlClient.SqlClient, after: string, limit: number) => Effect.Effect<ReadonlyArray<SealedRow>, SqlError.SqlError>
  readonly binding: (id: string) => string
  readonly replace: (sql: SqlClient.SqlClient, id: string, old: Uint8Array, sealed: Uint8Array) => Effect.Effect<boolean, SqlError.SqlError>
}

interface SealedRow {
  readonly id: string
  readonly sealed: Uint8Array
}

const changed = (rows: ReadonlyArray<unknown>) => rows.length === 1

/** The chain key's id as `mode/role/position`: one text, ordered as the primary key is unique. */
const chainKeyOf = (id: string) => {
  const [mode = "", role = "", position = "0"] = id.split("/")
  return { mode, role, position: Number(position) }
}

const webhookSecretColumn = (name: string, column: "secret_sealed" | "previous_secret_sealed"): SealedColumn => ({
  name,
  page: (sql, after, limit) =>
    sql<SealedRow>`SELECT webhook_id AS id, ${sql(column)} AS sealed FROM webhooks
      WHERE webhook_id > ${after} AND ${sql(column)} IS NOT NULL ORDER BY webhook_id LIMIT ${limit}`,
  binding: secretBinding,
  replace: (sql, id, old, sealed) =>
    sql`UPDATE webhooks SET ${sql(column)} = ${sealed} WHERE webhook_id = ${id} AND ${sql(column)} = ${old} RETURNING 1 AS done`.pipe(
      Effect.map(changed)
    )
})

/**
 * Every column sealed under `WALLET_KEK`. A new one must be added here (and to the table above):
 * `resealTest` in test/suites/walletKek.ts fails on a value it finds still under the old KEK.
 *
 * @since 0.12.0
 * @category constants
 */
export const sealedColumns: ReadonlyArray<SealedColumn> = [
  {
    name: "wallet_keys",
    page: (sql, after, limit) =>
      sql<SealedRow>`SELECT account_id AS id, wallet_key_sealed AS sealed FROM accounts
        WHERE account_id > ${after} ORDER BY account_id LIMIT ${limit}`,
    binding: walletKeyBinding,
    replace: (sql, id, old, sealed) =>
      sql`UPDATE accounts SET wallet_key_sealed = ${sealed}
        WHERE account_id = ${id} AND wallet_key_sealed = ${old} RETURNING 1 AS done`.pipe(Effect.map(changed))
  },
  {
    name: "chain_keys",
    page: (sql, after, limit) =>
      sql<SealedRow>`SELECT id, sealed FROM (
          SELECT mode || '/' || role || '/' || lpad(position::text, 6, '0') AS id, key_sealed AS sealed FROM chain_keys
        ) AS keys WHERE id > ${after} ORDER BY id LIMIT ${limit}`,
    binding: (id) => {
      const { mode, position, role } = chainKeyOf(id)
      return chainKeyBinding(mode === "live" ? "live" : "test", role, position)
    },
    replace: (sql, id, old, sealed) => {
      const { mode, position, role } = chainKeyOf(id)
      return sql`UPDATE chain_keys SET key_sealed = ${sealed}
        WHERE mode = ${mode} AND role = ${role} AND position = ${position} AND key_sealed = ${old} RETURNING 1 AS done`.pipe(
        Effect.map(changed)
      )
    }
  },
  webhookSecretColumn("webhook_secrets", "secret_sealed"),
  webhookSecretColumn("webhook_previous_secrets", "previous_secret_sealed"),
  {
    name: "held_public_amounts",
    page: (sql, after, limit) =>
      sql<SealedRow>`SELECT transaction_id AS id, public_amount_sealed AS sealed FROM agent_transactions
        WHERE transaction_id > ${after} AND public_amount_sealed IS NOT NULL ORDER BY transaction_id LIMIT ${limit}`,
    binding: publicAmountBinding,
    replace: (sql, id, old, sealed) =>
      sql`UPDATE agent_transactions SET public_amount_sealed = ${sealed}
        WHERE transaction_id = ${id} AND public_amount_sealed = ${old} RETURNING 1 AS done`.pipe(Effect.map(changed))
  }
]

/**
 * One column's outcome: re-sealed now, already under the current KEK, changed by another writer
 * meanwhile, left under another KEK (after the pass), and the values no key of the ring opens.
 *
 * @since 0.12.0
 * @category models
 */
export interface ColumnOutcome {
  readonly resealed: number
  readonly already_current: number
  readonly changed_meanwhile: number
  readonly remaining: number
  readonly unopenable: number
  readonly unopenable_ids: ReadonlyArray<string>
}

/**
 * @since 0.12.0
 * @category models
 */
export interface ResealOutcome {
  readonly kek_id: string
  readonly accepted_kek_ids: ReadonlyArray<string>
  readonly columns: Readonly<Record<string, ColumnOutcome>>
  /** Values of every column still under another KEK: 0 when the rotation is complete. */
  readonly remaining: number
}

interface Tally {
  resealed: number
  already_current: number
  changed_meanwhile: number
  unopenable_ids: Array<string>
}

/** One batch, in one transaction: each row not under the current KEK opened and replaced. */
const resealBatch = (sql: SqlClient.SqlClient, box: SecretBox["Service"], column: SealedColumn, rows: ReadonlyArray<SealedRow>, tally: Tally) =>
  sql.withTransaction(Effect.forEach(rows, (row) =>
    Effect.gen(function*() {
      const value = new Uint8Array(row.sealed)
      if (box.isCurrent(value)) {
        tally.already_current += 1
        return
      }
      const opened = yield* Effect.result(box.open(value, column.binding(row.id)))
      if (opened._tag === "Failure") {
        tally.unopenable_ids.push(row.id)
        return
      }
      const replaced = yield* column.replace(sql, row.id, value, box.seal(opened.success, column.binding(row.id)))
      if (replaced) tally.resealed += 1
      else tally.changed_meanwhile += 1
    }), { discard: true }))

/** Values of a column that are not under the current KEK (read only; they are not opened). */
const countRemaining = (sql: SqlClient.SqlClient, box: SecretBox["Service"], column: SealedColumn) =>
  Effect.gen(function*() {
    let after = ""
    let remaining = 0
    for (;;) {
      const rows = yield* column.page(sql, after, resealBatchMax)
      remaining += rows.filter((row) => !box.isCurrent(new Uint8Array(row.sealed))).length
      if (rows.length < resealBatchMax) return remaining
      after = rows[rows.length - 1]!.id
    }
  })

const resealColumn = (sql: SqlClient.SqlClient, box: SecretBox["Service"], column: SealedColumn) =>
  Effect.gen(function*() {
    const tally: Tally = { resealed: 0, already_current: 0, changed_meanwhile: 0, unopenable_ids: [] }
    let after = ""
    for (;;) {
      const rows = yield* column.page(sql, after, resealBatchMax)
      yield* resealBatch(sql, box, column, rows, tally)
      if (rows.length < resealBatchMax) break
      after = rows[rows.length - 1]!.id
    }
    const remaining = yield* countRemaining(sql, box, column)
    if (tally.unopenable_ids.length > 0) {
      yield* Effect.logWarning("wallet KEK re-seal: values that open under no key of the ring").pipe(
        Effect.annotateLogs({ column: column.name, count: tally.unopenable_ids.length })
      )
    }
    const outcome: ColumnOutcome = {
      resealed: tally.resealed,
      already_current: tally.already_current,
      changed_meanwhile: tally.changed_meanwhile,
      remaining,
      unopenable: tally.unopenable_ids.length,
      unopenable_ids: tally.unopenable_ids.slice(0, unopenableNamedMax)
    }
    return outcome
  })

/**
 * @since 0.12.0
 * @category services
 */
export class Reseal extends Context.Service<Reseal, {
  /** Re-seals every value under the current KEK (see the module header). */
  readonly run: Effect.Effect<ResealOutcome, SqlError.SqlError>
  /** Counts what is left under another KEK, opening nothing. */
  readonly status: Effect.Effect<ResealOutcome, SqlError.SqlError>
}>()("server/admin/Reseal") {
  static readonly layer = Layer.effect(
    Reseal,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const box = yield* SecretBox
      const outcomeOf = (columns: ReadonlyArray<readonly [string, ColumnOutcome]>): ResealOutcome => ({
        kek_id: box.currentKekId,
        accepted_kek_ids: box.acceptedKekIds,
        columns: Object.fromEntries(columns),
        remaining: columns.reduce((sum, [, column]) => sum + column.remaining, 0)
      })
      const run = Effect.forEach(sealedColumns, (column) =>
        resealColumn(sql, box, column).pipe(Effect.map((outcome) => [column.name, outcome] as const))).pipe(
        Effect.map(outcomeOf),
        Effect.withSpan("Reseal.run")
      )
      const status = Effect.forEach(sealedColumns, (column) =>
        countRemaining(sql, box, column).pipe(Effect.map((remaining) =>
          [column.name, { resealed: 0, already_current: 0, changed_meanwhile: 0, remaining, unopenable: 0, unopenable_ids: [] }] as const
        ))).pipe(Effect.map(outcomeOf))
      return Reseal.of({ run, status })
    })
  )
}
