/**
 * The chain_submissions table: every contract call the server must get mined
 * exactly once, recorded before it is signed or sent.
 *
 * @since 0.1.0
 */
import { Context, Effect, Exit, Layer, Option, Request, Schema, Struct } from "effect"
import { SqlClient, type SqlError, type Statement } from "effect/sql"
import { type Address, bytesToHex, type Hex, hexToBytes } from "viem"
import { Mode } from "@pps/api/ApiKeys"
import { deadAfterMs, NodeLiveness } from "../platform/NodeLiveness.ts"
import { sharedStatements } from "../platform/SharedStatements.ts"
import { SqlValues } from "@pps/guardian"
import * as Invariant from "../platform/Invariant.ts"
import type { Resolution, SubmissionKind, SubmissionRequest, SubmissionStatus } from "./domain.ts"

const SubmissionRow = Schema.Struct({
  submission_id: Schema.String,
  mode: Mode,
  kind: Schema.Literals(["confidential_transfer", "public_transfer", "register_key", "rotation_veto", "rotate_key"]),
  target: Schema.String,
  call_data: Schema.Uint8Array,
  gas_limit: Schema.String,
  deadline_seconds: Schema.NullOr(Schema.String),
  replay_sender: Schema.NullOr(Schema.String),
  replay_nonce: Schema.NullOr(Schema.String),
  replay_transfer_id: Schema.NullOr(Schema.String),
  relayer: Schema.NullOr(Schema.String),
  raw_tx: Schema.NullOr(Schema.Uint8Array),
  tx_hash: Schema.NullOr(Schema.String),
  status: Schema.Literals(["recorded", "sent", "confirmed", "failed"]),
  failure_reason: Schema.NullOr(Schema.Literals(["reverted", "expired"])),
  block_number: Schema.NullOr(Schema.String),
  block_timestamp: Schema.NullOr(Schema.String),
  owner_node: Schema.NullOr(Schema.String)
})

/**
 * A submission as stored.
 *
 * @since 0.1.0
 * @category models
 */
export interface Submission {
  readonly request: SubmissionRequest
  readonly status: SubmissionStatus
  readonly relayer: Address | null
  readonly rawTx: Hex | null
  readonly txHash: Hex | null
  readonly resolution: Resolution | null
  /** Whether this node is the submission's owner (the one that drives it). */
  readonly ownedHere: boolean
}


/** The columns that say how a submission ended (no call data, no signed bytes). */
const OutcomeRow = SubmissionRow.mapFields(Struct.pick([
  "submission_id",
  "mode",
  "tx_hash",
  "status",
  "failure_reason",
  "block_number",
  "block_timestamp"
]))

/** A submission's final outcome from its row; null while it is not final. */
const toResolution = (row: typeof OutcomeRow.Type): Resolution | null =>
  row.status === "confirmed" && row.tx_hash !== null && row.block_number !== null
    ? {
      _tag: "Confirmed",
      submissionId: row.submission_id,
      mode: row.mode,
      txHash: row.tx_hash as Hex,
      blockNumber: BigInt(row.block_number),
      blockTimestampSeconds: BigInt(row.block_timestamp ?? "0")
    }
    : row.status === "failed"
    ? {
      _tag: "Failed",
      submissionId: row.submission_id,
      mode: row.mode,
      txHash: row.tx_hash as Hex | null,
      reason: row.failure_reason ?? "reverted"
    }
    : null

const toSubmission = (row: typeof SubmissionRow.Type, nodeId: string): Submission => {
  const request: SubmissionRequest = {
    submissionId: row.submission_id,
    mode: row.mode,
    kind: row.kind satisfies SubmissionKind,
    target: row.target as Address,
    data: bytesToHex(row.call_data),
    gasLimit: BigInt(row.gas_limit),
    deadlineSeconds: row.deadline_seconds === null ? null : BigInt(row.deadline_seconds),
    replayKey: row.replay_sender === null || row.replay_nonce === null || row.replay_transfer_id === null
      ? null
      : { sender: row.replay_sender as Address, nonce: BigInt(row.replay_nonce), transferId: row.replay_transfer_id as Hex }
  }
  const resolution = toResolution(row)
  return {
    request,
    status: row.status,
    relayer: row.relayer as Address | null,
    rawTx: row.raw_tx === null ? null : bytesToHex(row.raw_tx),
    txHash: row.tx_hash as Hex | null,
    resolution,
    ownedHere: row.owner_node === nodeId
  }
}

/** A new submission to record; `record` writes those asked in the same turn in one statement. */
class RecordSubmission extends Request.Class<{ readonly request: SubmissionRequest }, boolean, SqlError.SqlError> {}

/** Bounds one INSERT's rows (and the statement shapes it prepares). */
const recordBatchMax = 64

/**
 * The row's columns, for `chain_submissions s`. The signed bytes are read from chain_transactions
 * by the row's hash (a batch's, stored once, migration 0018), else from the row itself (a single
 * call's, and rows written before that migration or by a node of an earlier version).
 */
const columns = `s.submission_id, s.mode, s.kind, s.target, s.call_data, s.gas_limit, s.deadline_seconds, s.replay_sender,
  s.replay_nonce, s.replay_transfer_id, s.relayer,
  COALESCE((SELECT t.raw_tx FROM chain_transactions t WHERE t.tx_hash = s.tx_hash), s.raw_tx) AS raw_tx,
  s.tx_hash, s.status, s.failure_reason, s.block_number, s.block_timestamp, s.owner_node`

/** What the store's statements need: the client, and this node's id (the owner of what it records). */
interface StoreContext {
  readonly sql: SqlClient.SqlClient
  readonly nodeId: string
}

/** The rows' shape is the migrations' (chain_submissions, chain_transactions): a row that does not decode means code and schema disagree. */
const rowsMatchSchema = "chain_submissions rows decode as SubmissionRow: the migrations define exactly these columns"

const decodeSubmissions = (context: StoreContext, rows: ReadonlyArray<unknown>) =>
  Schema.decodeUnknownEffect(Schema.Array(SubmissionRow))(rows).pipe(
    Invariant.orDie(rowsMatchSchema),
    Effect.map((decoded) => decoded.map((row) => toSubmission(row, context.nodeId)))
  )

/**
 * One statement for any number of confirmations; the ids it changed. A final row keeps no call
 * (`call_data` empty; D79): only an open submission's call is ever read (signed, adopted,
 * recovered), and a final one is answered from its outcome columns.
 */
const confirmMany = (
  { sql }: StoreContext,
  confirmations: ReadonlyArray<Extract<Resolution, { readonly _tag: "Confirmed" }>>
): Effect.Effect<ReadonlyArray<string>, SqlError.SqlError> => {
  if (confirmations.length === 0) return Effect.succeed([])
  const values = SqlValues.valuesPlaceholders(confirmations.length, ["", "", "", ""])
  return sql.unsafe<{ readonly submission_id: string }>(
    `UPDATE chain_submissions s SET status = 'confirmed', tx_hash = v.tx_hash, block_number = v.block_number,
       block_timestamp = v.block_timestamp, raw_tx = NULL, call_data = '', updated_at = now()
     FROM (VALUES ${values}) AS v (submission_id, tx_hash, block_number, block_timestamp)
     WHERE s.submission_id = v.submission_id AND s.status IN ('recorded', 'sent')
     RETURNING s.submission_id`,
    confirmations.flatMap((c) => [c.submissionId, c.txHash, c.blockNumber.toString(), c.blockTimestampSeconds.toString()])
  ).pipe(Effect.map((rows) => rows.map((row) => row.submission_id)))
}

/**
 * The INSERT of new submissions (never empty), each `recorded` and owned by this node, one that
 * exists already left as it is; run by `recordMany`, or written within a larger statement (the
 * record step of a transfer, transfers/record.ts).
 */
const recordStatement = ({ nodeId, sql }: StoreContext, requests: ReadonlyArray<SubmissionRequest>) =>
  // An INSERT's parameters take their types from the target columns: no casts.
  sql<{ readonly submission_id: string }>`INSERT INTO chain_submissions (submission_id, mode, kind, target, call_data, gas_limit, deadline_seconds,
       replay_sender, replay_nonce, replay_transfer_id, owner_node, status, created_at, updated_at)
     VALUES ${
    sql.csv(requests.map((request) =>
      sql`(${request.submissionId}, ${request.mode}, ${request.kind}, ${request.target}, ${hexToBytes(request.data)}, ${request.gasLimit.toString()}, ${
        request.deadlineSeconds?.toString() ?? null
      }, ${request.replayKey?.sender ?? null}, ${request.replayKey?.nonce.toString() ?? null}, ${
        request.replayKey?.transferId ?? null
      }, ${nodeId}, 'recorded', now(), now())`
    ))
  }
     ON CONFLICT (submission_id) DO NOTHING
     RETURNING submission_id`

/** One statement for any number of new submissions; the ids it recorded. */
const recordMany = (
  context: StoreContext,
  requests: ReadonlyArray<SubmissionRequest>
): Effect.Effect<ReadonlyArray<string>, SqlError.SqlError> =>
  requests.length === 0
    ? Effect.succeed([])
    : Effect.map(recordStatement(context, requests), (rows) => rows.map((row) => row.submission_id))

/** `record`'s batching: the submissions recorded in the same turn share one INSERT. */
const recordTogether = (context: StoreContext) =>
  sharedStatements(
    context.sql,
    (entries: ReadonlyArray<Request.Entry<RecordSubmission>>) => recordMany(context, entries.map((entry) => entry.request.request)),
    (entries, exit) => {
      const recorded = Exit.map(exit, (ids) => new Set(ids))
      for (const entry of entries) {
        // An id asked twice in one batch is recorded once: only its first asker is told so.
        entry.completeUnsafe(Exit.map(recorded, (ids) => ids.delete(entry.request.request.submissionId)))
      }
    },
    recordBatchMax
  )

const get = (context: StoreContext, submissionId: string) =>
  context.sql.unsafe(`SELECT ${columns} FROM chain_submissions s WHERE s.submission_id = $1`, [submissionId]).pipe(
    Effect.flatMap((rows) => decodeSubmissions(context, rows)),
    Effect.map((rows) => Option.fromNullishOr(rows[0]))
  )

const resolution = ({ sql }: StoreContext, submissionId: string) =>
  sql`
    SELECT submission_id, mode, tx_hash, status, failure_reason, block_number, block_timestamp
    FROM chain_submissions WHERE submission_id = ${submissionId}`.pipe(
    Effect.flatMap((rows) => Schema.decodeUnknownEffect(Schema.Array(OutcomeRow))(rows).pipe(Invariant.orDie(rowsMatchSchema))),
    Effect.map((rows) => Option.fromNullishOr(rows[0] === undefined ? null : toResolution(rows[0])))
  )

const open = (context: StoreContext, mode: Mode) =>
  context.sql.unsafe(
    `SELECT ${columns} FROM chain_submissions s WHERE s.mode = $1 AND s.status IN ('recorded', 'sent') ORDER BY s.created_at`,
    [mode]
  ).pipe(Effect.flatMap((rows) => decodeSubmissions(context, rows)))

const adoptOrphans = (context: StoreContext, mode: Mode) =>
  context.sql.unsafe(
    `UPDATE chain_submissions s SET owner_node = $2
     WHERE s.mode = $1 AND s.status IN ('recorded', 'sent') AND s.owner_node IS DISTINCT FROM $2
       AND NOT EXISTS (
         SELECT 1 FROM node_heartbeats h
         WHERE h.node_id = s.owner_node AND h.beat_at > now() - make_interval(secs => $3::double precision / 1000)
       )
     RETURNING ${columns}`,
    [mode, context.nodeId, deadAfterMs]
  ).pipe(Effect.flatMap((rows) => decodeSubmissions(context, rows)))

/**
 * A batch's bytes go once into chain_transactions, with every member's row in the same
 * statement (the rows' own raw_tx cleared: bytes of an earlier signature are never read).
 * A transaction of one call keeps its bytes in its row, as before: the same bytes written
 * once either way, and a node of the earlier version (a rolling deploy, a rollback) that
 * adopts the row still finds them. Only batch members lack them for such a node, and a
 * batch holds confidential transfers only, whose replay nonce it checks before signing
 * one again (`appliedElsewhere`) and the contract refuses to apply twice.
 */
const markSent = (
  { sql }: StoreContext,
  submissionIds: ReadonlyArray<string>,
  signed: { readonly relayer: Address; readonly nonce: number; readonly rawTx: Hex; readonly txHash: Hex }
) =>
  submissionIds.length === 1
    ? sql`
      UPDATE chain_submissions SET relayer = ${signed.relayer}, relayer_nonce = ${signed.nonce}, raw_tx = ${hexToBytes(signed.rawTx)},
        tx_hash = ${signed.txHash}, status = 'sent', broadcasts = broadcasts + 1, updated_at = now()
      WHERE submission_id = ${submissionIds[0]!} AND status IN ('recorded', 'sent')`.pipe(Effect.asVoid)
    : sql`
      WITH stored AS (
        INSERT INTO chain_transactions (tx_hash, raw_tx, created_at) VALUES (${signed.txHash}, ${hexToBytes(signed.rawTx)}, now())
        ON CONFLICT (tx_hash) DO UPDATE SET created_at = now()
      )
      UPDATE chain_submissions SET relayer = ${signed.relayer}, relayer_nonce = ${signed.nonce}, raw_tx = NULL,
        tx_hash = ${signed.txHash}, status = 'sent', broadcasts = broadcasts + 1, updated_at = now()
      WHERE ${sql.in("submission_id", submissionIds)} AND status IN ('recorded', 'sent')`.pipe(Effect.asVoid)

const countBroadcast = ({ sql }: StoreContext, submissionIds: ReadonlyArray<string>) =>
  submissionIds.length === 0 ? Effect.void : sql`
    UPDATE chain_submissions SET broadcasts = broadcasts + 1, updated_at = now()
    WHERE ${sql.in("submission_id", submissionIds)}`.pipe(Effect.asVoid)

const resolve = (context: StoreContext, outcome: Resolution) =>
  outcome._tag === "Confirmed"
    ? confirmMany(context, [outcome]).pipe(Effect.map((changed) => changed.length > 0))
    : context.sql`
      UPDATE chain_submissions SET status = 'failed', failure_reason = ${outcome.reason}, raw_tx = NULL, call_data = '',
        updated_at = now()
      WHERE submission_id = ${outcome.submissionId} AND status IN ('recorded', 'sent')
      RETURNING 1 AS resolved`.pipe(Effect.map((rows) => rows.length > 0))

/**
 * A transaction's bytes are read only while a submission it carries is open (broadcast,
 * adopted after a restart). The statement that stores a transaction's bytes marks its
 * submissions in the same commit, and bytes stored again (the same signature marked a
 * second time) are made young again by it under the row's lock: the outer condition is
 * checked again on a row changed meanwhile, so the sweep leaves it.
 */
const forgetSettledTransactions = ({ sql }: StoreContext, graceMs: number, slice: number) =>
  Effect.gen(function*() {
    const limit = Math.max(1, Math.floor(slice))
    let total = 0
    let deleted = limit
    while (deleted === limit) {
      const rows = yield* sql<{ readonly tx_hash: string }>`
        DELETE FROM chain_transactions d
        WHERE d.created_at < now() - make_interval(secs => ${graceMs}::double precision / 1000)
          AND d.tx_hash IN (
            SELECT t.tx_hash FROM chain_transactions t
            WHERE t.created_at < now() - make_interval(secs => ${graceMs}::double precision / 1000)
              AND NOT EXISTS (
                SELECT 1 FROM chain_submissions s WHERE s.tx_hash = t.tx_hash AND s.status IN ('recorded', 'sent'))
            LIMIT ${limit})
        RETURNING d.tx_hash`
      deleted = rows.length
      total += deleted
    }
    return total
  })

/**
 * @since 0.1.0
 * @category services
 */
export class SubmissionStore extends Context.Service<SubmissionStore, {
  /**
   * Records a new submission; false when one with that id exists already. The submissions
   * recorded in the same turn (a batch of transfers recorded together submits together) share
   * one INSERT; when it fails, each is recorded alone.
   */
  readonly record: (request: SubmissionRequest) => Effect.Effect<boolean, SqlError.SqlError>
  /**
   * Records new submissions in one statement, in the caller's transaction (not batched with
   * other callers': the rows commit or roll back with whatever else that transaction writes).
   * The ids it recorded; one that exists already is left as it is.
   */
  readonly recordAll: (requests: ReadonlyArray<SubmissionRequest>) => Effect.Effect<ReadonlyArray<string>, SqlError.SqlError>
  /** `recordAll`'s statement, not run: written within a larger statement (transfers/record.ts). At least one request. */
  readonly recordStatement: (requests: ReadonlyArray<SubmissionRequest>) => Statement.Fragment
  readonly get: (submissionId: string) => Effect.Effect<Option.Option<Submission>, SqlError.SqlError>
  /** How the submission ended: none while it is open (or unknown); reads only the outcome's columns. */
  readonly resolution: (submissionId: string) => Effect.Effect<Option.Option<Resolution>, SqlError.SqlError>
  /** Every submission of a mode that is not final. */
  readonly open: (mode: Mode) => Effect.Effect<ReadonlyArray<Submission>, SqlError.SqlError>
  /**
   * Takes over the open submissions of a mode whose node is dead (its heartbeat older than
   * `deadAfterMs`, or gone) or unknown (rows from before owners were recorded), and returns
   * them: this node drives them from now on. One UPDATE, so two survivors never both adopt one.
   */
  readonly adoptOrphans: (mode: Mode) => Effect.Effect<ReadonlyArray<Submission>, SqlError.SqlError>
  /**
   * Records the signed transaction that carries these submissions (one, or a batch), in one
   * statement: the bytes are durable, once for the whole transaction, before any is broadcast.
   */
  readonly markSent: (
    submissionIds: ReadonlyArray<string>,
    signed: { readonly relayer: Address; readonly nonce: number; readonly rawTx: Hex; readonly txHash: Hex }
  ) => Effect.Effect<void, SqlError.SqlError>
  readonly countBroadcast: (submissionIds: ReadonlyArray<string>) => Effect.Effect<void, SqlError.SqlError>
  /**
   * Writes the final outcome; false when the submission was already final (nothing changes). A
   * final row keeps no signed bytes and no call of its own: they are read only while a submission is open.
   */
  readonly resolve: (resolution: Resolution) => Effect.Effect<boolean, SqlError.SqlError>
  /**
   * Writes many confirmations in one statement (a watcher round's worth); the ids that
   * changed (those already final are left as they are, as by `resolve`).
   */
  readonly confirmMany: (
    confirmations: ReadonlyArray<Extract<Resolution, { readonly _tag: "Confirmed" }>>
  ) => Effect.Effect<ReadonlyArray<string>, SqlError.SqlError>
  /**
   * Deletes the stored transactions (`chain_transactions`) older than `graceMs` by the database's
   * clock that no open submission carries: those whose submissions all ended, and superseded
   * signatures of a re-signed batch. At most `slice` (at least 1) a statement, so that none
   * holds the embedded database's one connection for long. Returns how many went.
   */
  readonly forgetSettledTransactions: (graceMs: number, slice: number) => Effect.Effect<number, SqlError.SqlError>
}>()("server/settlement/SubmissionStore") {
  static readonly layer = Layer.effect(
    SubmissionStore,
    Effect.gen(function*() {
      const context: StoreContext = { sql: yield* SqlClient.SqlClient, nodeId: (yield* NodeLiveness).nodeId }
      const recordBatched = recordTogether(context)
      return SubmissionStore.of({
        record: (request) => Effect.request(new RecordSubmission({ request }), recordBatched),
        recordAll: (requests) => recordMany(context, requests),
        recordStatement: (requests) => recordStatement(context, requests),
        get: (submissionId) => get(context, submissionId),
        resolution: (submissionId) => resolution(context, submissionId),
        open: (mode) => open(context, mode),
        adoptOrphans: (mode) => adoptOrphans(context, mode),
        markSent: (submissionIds, signed) => markSent(context, submissionIds, signed),
        countBroadcast: (submissionIds) => countBroadcast(context, submissionIds),
        resolve: (outcome) => resolve(context, outcome),
        confirmMany: (confirmations) => confirmMany(context, confirmations),
        forgetSettledTransactions: (graceMs, slice) => forgetSettledTransactions(context, graceMs, slice)
      })
    })
  )
}
