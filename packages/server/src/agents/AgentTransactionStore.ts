/**
 * The agent_transactions table: held agent transfers and their decisions
 * (D26-D28). Every read by a caller is scoped by mode (D9); state changes are
 * conditional on the row still being `pending_approval`, so a decision is
 * taken once even if two nodes race.
 *
 * @since 0.1.0
 */
import * as Invariant from "../platform/Invariant.ts"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { Mode } from "@pps/api/ApiKeys"
import { AssetName } from "@pps/api/Transfers"
import { AgentTransactionStatus } from "@pps/api/Agents"

const Row = Schema.Struct({
  transaction_id: Schema.String,
  mode: Mode,
  agent_account_id: Schema.String,
  agent_handle: Schema.String,
  owner_account_id: Schema.String,
  transfer_id: Schema.String,
  recipient_account_id: Schema.NullOr(Schema.String),
  recipient_address: Schema.String,
  recipient_display: Schema.String,
  asset: AssetName,
  confidential: Schema.Boolean,
  api_key_id: Schema.String,
  replay_nonce: Schema.String,
  sealed_digest: Schema.String,
  approval_deadline_seconds: Schema.NullOr(Schema.String),
  status: AgentTransactionStatus,
  requested_at: Schema.String,
  expires_at: Schema.String,
  expires_at_ms: Schema.String,
  decided_at: Schema.NullOr(Schema.String),
  /** A held refund's original transfer (D43); null for any other held transfer. */
  refund_of: Schema.NullOr(Schema.String)
})

/**
 * A held transaction as stored (its byte columns are read by `sealedParts`).
 *
 * @since 0.1.0
 * @category models
 */
export type StoredAgentTransaction = typeof Row.Type

/**
 * What a held transaction keeps to be authorized again: no plaintext.
 *
 * @since 0.1.0
 * @category models
 */
export interface SealedParts {
  /**
   * The keys the boxes were sealed to at the create. An approval does not reuse them: the
   * chain's ciphertext goes to the parties' keys of its own time (D55, approveHeld.ts).
   */
  readonly fromKey: Uint8Array
  readonly toKey: Uint8Array | null
  readonly senderBox: Uint8Array
  readonly recipientBox: Uint8Array
  readonly guardianNote: Uint8Array
  /** Standard transfers only: the public amount under the wallet KEK. */
  readonly publicAmountSealed: Uint8Array | null
  /** The guardian's statement of the amount, sealed to the owner's key; null for older rows. */
  readonly guardianHeldAmount: Uint8Array | null
}

/**
 * @since 0.1.0
 * @category models
 */
export interface NewAgentTransaction extends SealedParts {
  readonly transactionId: string
  readonly mode: Mode
  readonly agentAccountId: string
  readonly ownerAccountId: string
  readonly transferId: string
  readonly recipientAccountId: string | null
  readonly recipientAddress: string
  readonly recipientDisplay: string
  readonly asset: string
  readonly confidential: boolean
  readonly apiKeyId: string
  readonly replayNonce: bigint
  readonly sealedDigest: string
  readonly requestedAt: string
  readonly expiresAt: string
  readonly refundOf: string | null
}

const columns = `t.transaction_id, t.mode, t.agent_account_id, a.handle AS agent_handle, t.owner_account_id,
  t.transfer_id, t.recipient_account_id, t.recipient_address, t.recipient_display, t.asset, t.confidential,
  t.api_key_id, t.replay_nonce, t.sealed_digest, t.approval_deadline_seconds, t.status,
  iso_utc(t.requested_at) AS requested_at, iso_utc(t.expires_at) AS expires_at,
  (extract(epoch FROM t.expires_at) * 1000)::bigint::text AS expires_at_ms, iso_utc(t.decided_at) AS decided_at,
  t.refund_of`
const from = `agent_transactions t JOIN accounts a ON a.account_id = t.agent_account_id`

/**
 * @since 0.1.0
 * @category services
 */
export class AgentTransactionStore extends Context.Service<AgentTransactionStore, {
  readonly insert: (transaction: NewAgentTransaction) => Effect.Effect<void, SqlError.SqlError>
  readonly findById: (transactionId: string) => Effect.Effect<Option.Option<StoredAgentTransaction>, SqlError.SqlError>
  /** In the caller's mode only (D9). */
  readonly findInMode: (
    transactionId: string,
    mode: Mode
  ) => Effect.Effect<Option.Option<StoredAgentTransaction>, SqlError.SqlError>
  readonly sealedParts: (transactionId: string) => Effect.Effect<SealedParts, SqlError.SqlError>
  /** D28: pending and inside the window, oldest first; by owner or by agent. */
  readonly pending: (
    scope: { readonly ownerAccountId: string } | { readonly agentAccountId: string },
    mode: Mode,
    nowIso: string
  ) => Effect.Effect<ReadonlyArray<StoredAgentTransaction>, SqlError.SqlError>
  /** Pins the deadline an approval authorizes with, so a retried approval asks the guardian the same question. */
  readonly setApprovalDeadline: (transactionId: string, deadlineSeconds: bigint) => Effect.Effect<void, SqlError.SqlError>
  /** pending_approval → approved | rejected | expired, once; false when it was no longer pending. */
  readonly decide: (
    transactionId: string,
    status: "approved" | "rejected" | "expired",
    decidedAt: string
  ) => Effect.Effect<boolean, SqlError.SqlError>
  /** Pending transactions whose window ended at or before `nowIso`, oldest first. */
  readonly due: (nowIso: string, limit: number) => Effect.Effect<ReadonlyArray<StoredAgentTransaction>, SqlError.SqlError>
}>()("server/agents/AgentTransactionStore") {
  static readonly layer = Layer.effect(
    AgentTransactionStore,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const decode = (rows: ReadonlyArray<unknown>) =>
        Schema.decodeUnknownEffect(Schema.Array(Row))(rows).pipe(
          Invariant.orDie("an agent_transactions row decodes as the transaction it stores")
        )
      const one = (rows: ReadonlyArray<unknown>) => decode(rows).pipe(Effect.map((decoded) => Option.fromNullishOr(decoded[0])))
      return AgentTransactionStore.of({
        insert: (t) =>
          sql`
            INSERT INTO agent_transactions (transaction_id, mode, agent_account_id, owner_account_id, transfer_id,
              recipient_account_id, recipient_address, recipient_display, asset, confidential, api_key_id, replay_nonce,
              from_key, to_key, sender_box, recipient_box, guardian_note, sealed_digest, public_amount_sealed, status,
              requested_at, expires_at, guardian_held_amount, refund_of)
            VALUES (${t.transactionId}, ${t.mode}, ${t.agentAccountId}, ${t.ownerAccountId}, ${t.transferId},
              ${t.recipientAccountId}, ${t.recipientAddress}, ${t.recipientDisplay}, ${t.asset}, ${t.confidential},
              ${t.apiKeyId}, ${t.replayNonce.toString()}, ${t.fromKey}, ${t.toKey}, ${t.senderBox}, ${t.recipientBox},
              ${t.guardianNote}, ${t.sealedDigest}, ${t.publicAmountSealed}, 'pending_approval',
              ${t.requestedAt}::timestamptz, ${t.expiresAt}::timestamptz, ${t.guardianHeldAmount}, ${t.refundOf})`.pipe(Effect.asVoid),
        findById: (transactionId) =>
          sql.unsafe(`SELECT ${columns} FROM ${from} WHERE t.transaction_id = $1`, [transactionId]).pipe(Effect.flatMap(one)),
        findInMode: (transactionId, mode) =>
          sql.unsafe(`SELECT ${columns} FROM ${from} WHERE t.transaction_id = $1 AND t.mode = $2`, [transactionId, mode]).pipe(
            Effect.flatMap(one)
          ),
        sealedParts: (transactionId) => sealedParts(sql, transactionId),
        pending: (scope, mode, nowIso) => {
          const [column, id] = "ownerAccountId" in scope
            ? ["owner_account_id", scope.ownerAccountId]
            : ["agent_account_id", scope.agentAccountId]
          return sql.unsafe(
            `SELECT ${columns} FROM ${from}
             WHERE t.${column} = $1 AND t.mode = $2 AND t.status = 'pending_approval' AND t.expires_at > $3::timestamptz
             ORDER BY t.requested_at, t.transaction_id`,
            [id, mode, nowIso]
          ).pipe(Effect.flatMap(decode))
        },
        setApprovalDeadline: (transactionId, deadlineSeconds) =>
          sql`
            UPDATE agent_transactions SET approval_deadline_seconds = ${deadlineSeconds.toString()}
            WHERE transaction_id = ${transactionId} AND status = 'pending_approval'`.pipe(Effect.asVoid),
        decide: (transactionId, status, decidedAt) =>
          // Erased with the decision, needed no longer: the public amount of a standard transfer,
          // and the guardian's note (amount and r, sealed to the guardian). Kept, a database
          // reader could replay the note to the guardian under invented policies; the guardian
          // answers a decided transfer id only as decided (a few approvals aside), and a note
          // that is gone cannot be replayed at all. An approval commits its transfer row in this
          // same SQL transaction, and nothing reads the note after that.
          sql`
            UPDATE agent_transactions SET status = ${status}, decided_at = ${decidedAt}::timestamptz,
              public_amount_sealed = NULL, guardian_note = ''::bytea
            WHERE transaction_id = ${transactionId} AND status = 'pending_approval'
            RETURNING 1 AS decided`.pipe(Effect.map((rows) => rows.length > 0)),
        due: (nowIso, limit) =>
          sql.unsafe(
            `SELECT ${columns} FROM ${from}
             WHERE t.status = 'pending_approval' AND t.expires_at <= $1::timestamptz
             ORDER BY t.expires_at LIMIT $2`,
            [nowIso, limit]
          ).pipe(Effect.flatMap(decode))
      })
    })
  )
}

const copy = (value: Uint8Array | null) => value === null ? null : new Uint8Array(value)

/** The byte columns of a held transaction; callers read one they just found. */
const sealedParts = (sql: SqlClient.SqlClient, transactionId: string) =>
  sql<{
    from_key: Uint8Array
    to_key: Uint8Array | null
    sender_box: Uint8Array
    recipient_box: Uint8Array
    guardian_note: Uint8Array
    public_amount_sealed: Uint8Array | null
    guardian_held_amount: Uint8Array | null
  }>`
    SELECT from_key, to_key, sender_box, recipient_box, guardian_note, public_amount_sealed, guardian_held_amount
    FROM agent_transactions WHERE transaction_id = ${transactionId}`.pipe(
    Effect.flatMap((rows) => Invariant.some("an agent transaction, once read, is never deleted")(Option.fromNullishOr(rows[0]))),
    Effect.map((row): SealedParts => ({
      fromKey: new Uint8Array(row.from_key),
      toKey: copy(row.to_key),
      senderBox: new Uint8Array(row.sender_box),
      recipientBox: new Uint8Array(row.recipient_box),
      guardianNote: new Uint8Array(row.guardian_note),
      publicAmountSealed: copy(row.public_amount_sealed),
      guardianHeldAmount: copy(row.guardian_held_amount)
    }))
  )
