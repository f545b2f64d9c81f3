/**
 * The transfers table and the per-sender replay nonces. Every query is scoped
 * by mode, and reads by the caller's account (D9, D17).
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Option, RequestResolver, Schema } from "effect"
import { SqlClient, type SqlError, SqlResolver, type Statement } from "effect/sql"
import { Mode } from "@pps/api/ApiKeys"
import { AssetName, TransferStatus } from "@pps/api/Transfers"
import { SqlValues } from "@pps/guardian"
import { statementWithoutWaitingForDisk } from "../platform/CommitDurability.ts"
import * as Invariant from "../platform/Invariant.ts"

const TransferRow = Schema.Struct({
  transfer_id: Schema.String,
  mode: Mode,
  sender_account_id: Schema.String,
  sender_handle: Schema.String,
  recipient_account_id: Schema.NullOr(Schema.String),
  recipient_address: Schema.String,
  recipient_display: Schema.String,
  asset: AssetName,
  confidential: Schema.Boolean,
  status: TransferStatus,
  tx_hash: Schema.NullOr(Schema.String),
  replay_nonce: Schema.String,
  deadline_seconds: Schema.String,
  sealed_digest: Schema.String,
  ciphertext: Schema.String,
  guardian_settled: Schema.Boolean,
  /** The sender's owner when the sender is an agent: an owner sees its agents' transfers. */
  sender_owner_account_id: Schema.NullOr(Schema.String),
  /** The recipient's account, when it has one: its handle and its owner (an agent's). */
  recipient_handle: Schema.NullOr(Schema.String),
  recipient_owner_account_id: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  confirmed_at: Schema.NullOr(Schema.String),
  /** A refund's original (D43); null for any other transfer. */
  refund_of: Schema.NullOr(Schema.String),
  /** The ids of this transfer's refunds (D43), oldest first, comma-separated; empty when none. */
  refund_ids: Schema.String
})

/**
 * A transfer as stored (boxes and calldata are read separately, by need).
 *
 * @since 0.1.0
 * @category models
 */
export type StoredTransfer = typeof TransferRow.Type

/**
 * @since 0.1.0
 * @category models
 */
export interface NewTransfer {
  readonly transferId: string
  readonly mode: Mode
  readonly senderAccountId: string
  readonly recipientAccountId: string | null
  readonly recipientAddress: string
  readonly recipientDisplay: string
  readonly asset: string
  readonly confidential: boolean
  readonly apiKeyId: string
  readonly replayNonce: bigint
  readonly deadlineSeconds: bigint
  readonly senderBox: Uint8Array
  readonly recipientBox: Uint8Array
  readonly sealedDigest: string
  /** JSON of the ciphertext points (hex), as the guardian returned them. */
  readonly ciphertext: string
  readonly createdAt: string
  /** For a refund (D43), the transfer it sends back. */
  readonly refundOf: string | null
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ListQuery {
  readonly accountId: string
  readonly mode: Mode
  /** Also the transfers of the account's agents (ext `include_agents`); D16's default is the account's own. */
  readonly includeAgents: boolean
  readonly limit: number
  readonly offset: number
  readonly status: string | undefined
  readonly createdAfter: string | undefined
  readonly createdBefore: string | undefined
}

const columns = `t.transfer_id, t.mode, t.sender_account_id, s.handle AS sender_handle, t.recipient_account_id,
  t.recipient_address, t.recipient_display, t.asset, t.confidential, t.status, t.tx_hash, t.replay_nonce,
  t.deadline_seconds, t.sealed_digest, t.ciphertext, t.guardian_settled, s.owner_account_id AS sender_owner_account_id,
  r.handle AS recipient_handle, r.owner_account_id AS recipient_owner_account_id,
  iso_utc(t.created_at) AS created_at, iso_utc(t.confirmed_at) AS confirmed_at, t.refund_of,
  COALESCE((SELECT string_agg(x.transfer_id, ',' ORDER BY x.created_at, x.transfer_id) FROM transfers x
    WHERE x.refund_of = t.transfer_id), '') AS refund_ids`

/** Both parties' accounts beside the transfer `t`: its events name them without reading them again. */
const partiesJoin = `JOIN accounts s ON s.account_id = t.sender_account_id
  LEFT JOIN accounts r ON r.account_id = t.recipient_account_id`
const parties = `FROM transfers t ${partiesJoin}`

/**
 * The parties a viewer sees transfers of: itself, and, for an owner, its agents (SPEC Events:
 * "every transaction involving the account or any agent under it"). `$n` is the viewer's id.
 */
const viewedParties = (n: number) => `(SELECT account_id FROM accounts WHERE account_id = $${n} OR owner_account_id = $${n})`

/**
 * Replay nonces are taken from `transfer_nonces` this many at a time per account and handed out
 * from memory, as a database sequence caches values: one statement per this many transfers
 * instead of one per transfer (a round trip per transfer is what a transfer costs the database). The nonces of a block not used up (a restart, another
 * node's block, a race) are skipped, which costs nothing: the contract keeps a bitmap of used
 * nonces per sender, not a counter, so any unused nonce is valid and none is ever used twice.
 */
const nonceBlockSize = 32
/** Accounts whose current block is kept; emptied when full (the next transfer reserves anew). */
const nonceBlocksMax = 50_000

/** A client-sealed transfer's replay nonce and attestation deadline, fixed by its first attempt. */
export interface SealedAttempt {
  readonly nonce: bigint
  readonly deadlineSeconds: bigint
}

/**
 * How a transfer ends, as its settlement said.
 *
 * @since 0.1.0
 * @category models
 */
export interface TransferOutcome {
  readonly transferId: string
  readonly status: "confirmed" | "failed"
  readonly txHash: string | null
  readonly blockTimestampSeconds: bigint | null
}

/**
 * @since 0.1.0
 * @category services
 */
export class TransferStore extends Context.Service<TransferStore, {
  /**
   * A fresh replay nonce for the sender (never handed out twice). Call it outside any SQL
   * transaction: its block reservation must commit on its own (were it rolled back, the block
   * kept in memory could be reserved again).
   */
  readonly nextNonce: (accountId: string, mode: Mode) => Effect.Effect<bigint, SqlError.SqlError>
  /**
   * The nonce and deadline a client-sealed transfer goes to the guardian with: those of its
   * first attempt when there was one (sealed_attempts, committed before the guardian is
   * asked), else `fresh`'s, recorded now. A concurrent twin's record wins.
   */
  readonly sealedAttempt: (
    attempt: { readonly transferId: string; readonly senderAccountId: string },
    fresh: Effect.Effect<SealedAttempt, SqlError.SqlError>
  ) => Effect.Effect<SealedAttempt, SqlError.SqlError>
  /** New transfers, `pending`, in one statement (the record step of concurrent creates shares it). */
  readonly insert: (transfers: ReadonlyArray<NewTransfer>) => Effect.Effect<void, SqlError.SqlError>
  /** `insert`'s statement, not run: written within the record step's one statement (record.ts). At least one transfer. */
  readonly insertStatement: (transfers: ReadonlyArray<NewTransfer>) => Statement.Fragment
  /** A transfer the account, or one of its agents, is party to, in its mode. */
  readonly findForAccount: (
    transferId: string,
    accountId: string,
    mode: Mode
  ) => Effect.Effect<Option.Option<StoredTransfer>, SqlError.SqlError>
  readonly findById: (transferId: string) => Effect.Effect<Option.Option<StoredTransfer>, SqlError.SqlError>
  /** Whether a transfer, or a held agent transaction waiting to become one, has this id. */
  readonly idTaken: (transferId: string) => Effect.Effect<boolean, SqlError.SqlError>
  /** The sealed boxes (a sealed read). None for an unknown id. */
  readonly boxes: (transferId: string) => Effect.Effect<
    Option.Option<{ readonly senderBox: Uint8Array; readonly recipientBox: Uint8Array }>,
    SqlError.SqlError
  >
  /**
   * The attested call while one may still be needed (a resubmission): the row's own (written
   * before migration 0025), else its chain submission's (empty once that is final). None for an
   * unknown id.
   */
  readonly attestedCall: (transferId: string) => Effect.Effect<Option.Option<Uint8Array>, SqlError.SqlError>
  /** newest first (created_at, then id), one more than `limit` to tell `has_more` (D16). */
  readonly list: (query: ListQuery) => Effect.Effect<ReadonlyArray<StoredTransfer>, SqlError.SqlError>
  /**
   * pending → confirmed | failed, once, for any number of transfers in one statement: the
   * transfers as they end, read in the same statement (those not pending are left as they are
   * and not returned). A confirmation is dated by its block's time, whole seconds, never before
   * the transfer's own creation in the same second.
   */
  readonly finish: (outcomes: ReadonlyArray<TransferOutcome>) => Effect.Effect<ReadonlyArray<StoredTransfer>, SqlError.SqlError>
  readonly markGuardianSettled: (transferId: string) => Effect.Effect<void, SqlError.SqlError>
  /** Transfers created before `createdBefore` still pending, or final but not yet settled with the guardian. */
  readonly unfinished: (mode: Mode, createdBefore: string) => Effect.Effect<ReadonlyArray<StoredTransfer>, SqlError.SqlError>
}>()("server/transfers/TransferStore") {
  static readonly layer = Layer.effect(
    TransferStore,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const state: StoreState = { sql, nonceBlocks: new Map(), guardianSettled: guardianSettledResolver(sql) }
      return TransferStore.of({
        nextNonce: (accountId, mode) => nextNonce(state, accountId, mode),
        sealedAttempt: (attempt, fresh) => sealedAttempt(sql, attempt, fresh),
        insert: (transfers) => insert(sql, transfers),
        insertStatement: (transfers) => insertStatement(sql, transfers),
        findForAccount: (transferId, accountId, mode) =>
          sql.unsafe(
            `SELECT ${columns} ${parties}
             WHERE t.transfer_id = $1 AND t.mode = $2
               AND (t.sender_account_id IN ${viewedParties(3)} OR t.recipient_account_id IN ${viewedParties(3)})`,
            [transferId, mode, accountId]
          ).pipe(Effect.flatMap(decode), Effect.map((rows) => Option.fromNullishOr(rows[0]))),
        findById: (transferId) =>
          sql.unsafe(`SELECT ${columns} ${parties} WHERE t.transfer_id = $1`, [transferId]).pipe(
            Effect.flatMap(decode),
            Effect.map((rows) => Option.fromNullishOr(rows[0]))
          ),
        idTaken: (transferId) =>
          sql<{ taken: number }>`
            SELECT 1 AS taken FROM transfers WHERE transfer_id = ${transferId}
            UNION ALL SELECT 1 AS taken FROM agent_transactions WHERE transfer_id = ${transferId}
            LIMIT 1`.pipe(Effect.map((rows) => rows.length > 0)),
        boxes: (transferId) => boxes(sql, transferId),
        attestedCall: (transferId) => attestedCall(sql, transferId),
        list: (query) => list(sql, query),
        finish: (outcomes) => finish(sql, outcomes),
        markGuardianSettled: (transferId) =>
          SqlResolver.request(transferId, state.guardianSettled).pipe(
            Effect.catchTag("SchemaError", (cause) =>
              Effect.die(new Invariant.InvariantViolation({ invariant: "a transfer id encodes as a string", cause })))
          ),
        unfinished: (mode, createdBefore) =>
          sql.unsafe(
            `SELECT ${columns} ${parties}
             WHERE t.mode = $1 AND (t.status = 'pending' OR t.guardian_settled = false)
               AND t.created_at < $2::timestamptz
             ORDER BY t.created_at`,
            [mode, createdBefore]
          ).pipe(Effect.flatMap(decode))
      })
    })
  )
}

/** What the store's queries share: the client, and this node's nonce blocks and settled marks. */
interface StoreState {
  readonly sql: SqlClient.SqlClient
  /** This node's reserved replay nonces per account and mode: the next to hand out, and the end. */
  readonly nonceBlocks: Map<string, { next: bigint; end: bigint }>
  readonly guardianSettled: RequestResolver.RequestResolver<SqlResolver.SqlRequest<string, void, SqlError.SqlError, never>>
}

const decode = (rows: ReadonlyArray<unknown>) =>
  Schema.decodeUnknownEffect(Schema.Array(TransferRow))(rows).pipe(
    Invariant.orDie("a transfers row decodes as TransferRow (the schema follows the table's migrations)")
  )

/**
 * Settlements the guardian confirmed are marked together: the completions of one block (the
 * outcome stream's, concurrent creates', the recovery round's) each ask at once, and the requests
 * issued in the same turn become one UPDATE (Effect's request batching) instead of one statement
 * each. Each caller is answered once the statement that holds its row ran.
 */
const guardianSettledResolver = (sql: SqlClient.SqlClient) =>
  RequestResolver.batchN(
    SqlResolver.void({
      Request: Schema.String,
      // Lost in a crash, the recovery round settles again (the guardian decides a transfer once).
      // One statement, not BEGIN, SET, UPDATE and COMMIT.
      execute: (transferIds) =>
        statementWithoutWaitingForDisk(sql, (commitSetting) =>
          sql`UPDATE transfers SET guardian_settled = true FROM (SELECT ${commitSetting}) AS commit_mode
            WHERE ${sql.in("transfer_id", transferIds)}`)
    }),
    // Bounds the statement shapes it prepares (one per list length).
    64
  )

const nextNonce = (state: StoreState, accountId: string, mode: Mode) =>
  Effect.suspend(() => {
    const { nonceBlocks, sql } = state
    const key = `${mode}:${accountId}`
    const block = nonceBlocks.get(key)
    if (block !== undefined && block.next < block.end) return Effect.succeed(block.next++)
    return sql<{ first: string }>`
      INSERT INTO transfer_nonces (account_id, mode, next_nonce) VALUES (${accountId}, ${mode}, ${nonceBlockSize})
      ON CONFLICT (account_id, mode) DO UPDATE SET next_nonce = transfer_nonces.next_nonce + ${nonceBlockSize}
      RETURNING (next_nonce - ${nonceBlockSize})::text AS first`.pipe(Effect.map((rows) => {
      const first = BigInt(rows[0]!.first)
      // A concurrent reservation for the same account may replace this block: the rest of
      // the replaced one is skipped, never handed out twice.
      if (nonceBlocks.size >= nonceBlocksMax) nonceBlocks.clear()
      nonceBlocks.set(key, { next: first + 1n, end: first + BigInt(nonceBlockSize) })
      return first
    }))
  })

const sealedAttempt = (
  sql: SqlClient.SqlClient,
  attempt: { readonly transferId: string; readonly senderAccountId: string },
  fresh: Effect.Effect<SealedAttempt, SqlError.SqlError>
) =>
  Effect.gen(function*() {
    const recorded = () =>
      sql<{ replay_nonce: string; deadline_seconds: string }>`
        SELECT replay_nonce, deadline_seconds FROM sealed_attempts
        WHERE transfer_id = ${attempt.transferId} AND sender_account_id = ${attempt.senderAccountId}`.pipe(
        Effect.map((rows) => rows[0])
      )
    const first = yield* recorded()
    if (first !== undefined) return { nonce: BigInt(first.replay_nonce), deadlineSeconds: BigInt(first.deadline_seconds) }
    const made = yield* fresh
    yield* sql`
      INSERT INTO sealed_attempts (transfer_id, sender_account_id, replay_nonce, deadline_seconds)
      VALUES (${attempt.transferId}, ${attempt.senderAccountId}, ${made.nonce.toString()}, ${made.deadlineSeconds.toString()})
      ON CONFLICT (transfer_id) DO NOTHING`
    const stands = yield* recorded()
    // The prepare token binds the transfer id to its sender, so the row is this sender's.
    return stands === undefined ? made : { nonce: BigInt(stands.replay_nonce), deadlineSeconds: BigInt(stands.deadline_seconds) }
  })

/** The INSERT of new transfers (never empty): run by `insert`, or written within a larger statement. */
const insertStatement = (sql: SqlClient.SqlClient, transfers: ReadonlyArray<NewTransfer>) =>
  sql`
    INSERT INTO transfers ${
    sql.insert(transfers.map((t): Record<string, unknown> => ({
      transfer_id: t.transferId,
      mode: t.mode,
      sender_account_id: t.senderAccountId,
      recipient_account_id: t.recipientAccountId,
      recipient_address: t.recipientAddress,
      recipient_display: t.recipientDisplay,
      asset: t.asset,
      confidential: t.confidential,
      status: "pending",
      api_key_id: t.apiKeyId,
      replay_nonce: t.replayNonce.toString(),
      deadline_seconds: t.deadlineSeconds.toString(),
      sender_box: t.senderBox,
      recipient_box: t.recipientBox,
      sealed_digest: t.sealedDigest,
      ciphertext: t.ciphertext,
      // The attested call is kept once, in the chain submission recorded in the same transaction
      // (record.ts); empty, not null, here: a node of an earlier version reads the column as bytes.
      call_data: noCallData,
      created_at: t.createdAt,
      refund_of: t.refundOf
    })) as [Record<string, unknown>, ...Array<Record<string, unknown>>])
  }`

const insert = (sql: SqlClient.SqlClient, transfers: ReadonlyArray<NewTransfer>) =>
  transfers.length === 0 ? Effect.void : insertStatement(sql, transfers).pipe(Effect.asVoid)

const noCallData = new Uint8Array(0)

const boxes = (sql: SqlClient.SqlClient, transferId: string) =>
  sql<{ sender_box: Uint8Array; recipient_box: Uint8Array }>`
    SELECT sender_box, recipient_box FROM transfers WHERE transfer_id = ${transferId}`.pipe(
    Effect.map((rows) =>
      Option.map(Option.fromNullishOr(rows[0]), (row) => ({
        senderBox: new Uint8Array(row.sender_box),
        recipientBox: new Uint8Array(row.recipient_box)
      }))
    )
  )

const attestedCall = (sql: SqlClient.SqlClient, transferId: string) =>
  sql<{ call_data: Uint8Array | null }>`
    SELECT COALESCE(NULLIF(t.call_data, ''::bytea), s.call_data) AS call_data
    FROM transfers t LEFT JOIN chain_submissions s ON s.submission_id = t.transfer_id
    WHERE t.transfer_id = ${transferId}`.pipe(
    Effect.map((rows) =>
      Option.map(Option.fromNullishOr(rows[0]), (row) => row.call_data === null ? noCallData : new Uint8Array(row.call_data))
    )
  )

const list = (sql: SqlClient.SqlClient, q: ListQuery) => {
  const params: Array<unknown> = [q.accountId, q.mode]
  const where = [
    q.includeAgents
      ? `(t.sender_account_id IN ${viewedParties(1)} OR t.recipient_account_id IN ${viewedParties(1)})`
      : "(t.sender_account_id = $1 OR t.recipient_account_id = $1)",
    "t.mode = $2"
  ]
  if (q.status !== undefined) {
    params.push(q.status)
    where.push(`t.status = $${params.length}`)
  }
  if (q.createdAfter !== undefined) {
    params.push(q.createdAfter)
    where.push(`t.created_at > $${params.length}::timestamptz`)
  }
  if (q.createdBefore !== undefined) {
    params.push(q.createdBefore)
    where.push(`t.created_at < $${params.length}::timestamptz`)
  }
  params.push(q.limit + 1, q.offset)
  return sql.unsafe(
    `SELECT ${columns} ${parties}
     WHERE ${where.join(" AND ")}
     ORDER BY t.created_at DESC, t.transfer_id DESC
     LIMIT $${params.length - 1} OFFSET $${params.length}`,
    params
  ).pipe(Effect.flatMap(decode))
}

const finish = (sql: SqlClient.SqlClient, outcomes: ReadonlyArray<TransferOutcome>) => {
  if (outcomes.length === 0) return Effect.succeed([])
  // The outcomes as a VALUES list: the planner knows their number and finds each
  // transfer by its primary key.
  // In id order: two nodes ending overlapping sets lock the rows in the same order.
  const sorted = [...outcomes].sort((a, b) => (a.transferId < b.transferId ? -1 : a.transferId > b.transferId ? 1 : 0))
  const values = SqlValues.valuesPlaceholders(sorted.length, ["::text", "::text", "::text", "::bigint"])
  return sql.unsafe(
    `WITH t AS (
       UPDATE transfers SET status = v.status, tx_hash = COALESCE(v.tx_hash, transfers.tx_hash),
         confirmed_at = CASE WHEN v.block_timestamp IS NULL THEN NULL
           ELSE GREATEST(to_timestamp(v.block_timestamp), transfers.created_at) END
       FROM (VALUES ${values}) AS v (transfer_id, status, tx_hash, block_timestamp)
       WHERE transfers.transfer_id = v.transfer_id AND transfers.status = 'pending'
       RETURNING transfers.*)
     SELECT ${columns} FROM t ${partiesJoin}`,
    sorted.flatMap((outcome) => [
      outcome.transferId,
      outcome.status,
      outcome.txHash,
      outcome.blockTimestampSeconds?.toString() ?? null
    ])
  ).pipe(Effect.flatMap(decode))
}
