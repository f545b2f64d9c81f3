/**
 * Step 4, the record: one SQL transaction, and in it one statement, for a transfer's row
 * (pending), its `transfer.initiated` events and its chain submission (the attested call,
 * recorded: settlement signs it once this commits), and the asker's idempotency binding. New
 * transfers share the transaction with the creates of the same turn (`recordCreated`); an
 * approved held transfer commits with its approval (`recordAlongside`).
 *
 * @since 0.1.0
 */
import { Context, Effect, type Exit, Request } from "effect"
import type { SqlError } from "effect/sql"
import type { Account } from "@pps/api/Accounts"
import { type EventInput, transferEvents, type TransferParty } from "@pps/api/Events"
import { type BindStatement, CurrentIdempotencyScope } from "../platform/IdempotentOperations.ts"
import type { SubmissionRequest } from "../settlement/domain.ts"
import type { PreparedTransfer, TransfersContext } from "./context.ts"
import type { NewTransfer } from "./TransferStore.ts"

/** Creates recorded in one transaction at most (see `recordInOneTransaction`). */
export const recordBatchMax = 64

/**
 * A created transfer's row, its `transfer.initiated` events and its chain submission;
 * `recordInOneTransaction` writes those asked together. The asker's idempotency key is bound to
 * the transfer in the same transaction.
 */
export class RecordTransfer extends Request.Class<
  { readonly transfer: NewTransfer; readonly events: ReadonlyArray<EventInput>; readonly submission: SubmissionRequest },
  void,
  SqlError.SqlError
> {}

/**
 * How a step writes the record: `recordCreated` or `recordAlongside`.
 *
 * @since 0.1.0
 * @category models
 */
export type RecordWrite<E> = (
  transfer: NewTransfer,
  events: ReadonlyArray<EventInput>,
  submission: SubmissionRequest
) => Effect.Effect<void, E | SqlError.SqlError>

/**
 * Records transfers as they are created: each row, its events and its asker's idempotency
 * binding, in one transaction for all the creates asked for in the same turn (the guardian
 * answers a group of decisions at once, so their creates reach this step together): one
 * statement (`writeRecord`) and one commit instead of those per create. When the
 * shared transaction fails, each create is recorded again alone, so one create's fault
 * (a claim another run took over, a row that cannot be written) never becomes another's.
 */
export const recordInOneTransaction = (context: TransfersContext, entries: ReadonlyArray<Request.Entry<RecordTransfer>>) =>
  context.sql.withTransaction(writeRecord(context, {
    // Each under its own request's key: the batch runs in its first asker's context.
    bind: context.operations.bindStatement("transfer", entries.map((entry) => ({
      scope: Context.get(entry.context, CurrentIdempotencyScope),
      operationId: entry.request.transfer.transferId
    }))),
    transfers: entries.map((entry) => entry.request.transfer),
    events: entries.flatMap((entry) => entry.request.events),
    submissions: entries.map((entry) => entry.request.submission)
  }))

/**
 * The record's rows, of every table, in one statement: the askers' idempotency bindings, the
 * transfer rows, their events and their chain submissions, each table's rows one part of a
 * `WITH` (one round trip into the database instead of four; a transfer recorded alone, as at
 * low load, paid for each). PostgreSQL runs every part to completion, whether or not the
 * statement reads it, and a failure of any part fails the statement, and the transaction with
 * it. The parts touch different tables, so none needs to see another's rows. The bindings'
 * count is checked before the caller's commit, as `bindEach` checks it. One case ends
 * differently from four statements in a row, with the same effect: a run whose claim was taken
 * over, recording a transfer id the other run has written too (a prepared transfer's retry),
 * may now fail on the row's primary key (waiting for the other run's commit if it has not
 * committed) rather than on the fence: nothing of it commits either way, and its asker, whose
 * node the other run took for dead, is answered 503 (a database error) instead of 500 (a defect).
 */
const writeRecord = Effect.fnUntraced(function*(context: TransfersContext, rows: {
  readonly bind: BindStatement | undefined
  readonly transfers: ReadonlyArray<NewTransfer>
  readonly events: ReadonlyArray<EventInput>
  readonly submissions: ReadonlyArray<SubmissionRequest>
}) {
  const { sql } = context
  const events = yield* context.outbox.appendWithin(rows.events)
  const parts = [
    ...(rows.bind === undefined ? [] : [sql`bound AS (${rows.bind.statement})`]),
    sql`transfers_written AS (${context.store.insertStatement(rows.transfers)})`,
    ...(events === undefined ? [] : [sql`events_written AS (${events})`]),
    sql`submissions_written AS (${context.settlement.recordStatement(rows.submissions)})`
  ]
  const [written] = yield* sql<{ readonly bound: number }>`
    WITH ${sql.csv(parts)}
    SELECT ${rows.bind === undefined ? sql`0` : sql`(SELECT count(*) FROM bound)::int`} AS bound`
  if (rows.bind !== undefined) yield* rows.bind.check(written?.bound ?? 0)
})

/** Answers each asker of a shared record with the transaction's exit. */
export const answerRecorded = (entries: ReadonlyArray<Request.Entry<RecordTransfer>>, exit: Exit.Exit<void, SqlError.SqlError>) =>
  entries.forEach((entry) => entry.completeUnsafe(exit))

/**
 * The record step of a new transfer, batched with the creates of the same turn.
 *
 * @since 0.1.0
 */
export const recordCreated = (context: TransfersContext): RecordWrite<never> => (transfer, events, submission) =>
  Effect.request(new RecordTransfer({ transfer, events, submission }), context.recordTransfers)

/**
 * The record step in a transaction of its own, with what must commit with it (an approval's decision).
 *
 * @since 0.1.0
 */
export const recordAlongside = <E>(
  context: TransfersContext,
  alongside: Effect.Effect<void, E | SqlError.SqlError>
): RecordWrite<E> =>
(transfer, events, submission) =>
  context.sql.withTransaction(alongside.pipe(
    Effect.andThen(writeRecord(context, { bind: undefined, transfers: [transfer], events, submissions: [submission] }))
  ))

const party = (account: Account): TransferParty => ({
  accountId: account.accountId,
  handle: account.handle,
  ownerAccountId: account.ownerAccountId
})

/**
 * What a transfer's row and a held transaction's row both keep of a sealed transfer.
 *
 * @since 0.1.0
 */
export const storedFieldsOf = (prepared: PreparedTransfer) => ({
  transferId: prepared.transferId,
  mode: prepared.mode,
  recipientAccountId: prepared.recipient.account?.accountId ?? null,
  recipientAddress: prepared.recipient.address,
  recipientDisplay: prepared.recipient.display,
  asset: prepared.asset,
  confidential: prepared.confidential,
  apiKeyId: prepared.apiKeyId,
  replayNonce: prepared.nonce,
  sealedDigest: prepared.sealedDigest,
  senderBox: prepared.boxes.sender,
  recipientBox: prepared.boxes.recipient
})

/**
 * The row of an attested transfer and its `transfer.initiated` events.
 *
 * @since 0.1.0
 */
export const recordOf = (
  prepared: PreparedTransfer,
  attested: { readonly deadlineSeconds: bigint; readonly ciphertext: string; readonly createdAt: string }
): { readonly transfer: NewTransfer; readonly events: ReadonlyArray<EventInput> } => ({
  transfer: {
    ...storedFieldsOf(prepared),
    senderAccountId: prepared.sender.accountId,
    deadlineSeconds: attested.deadlineSeconds,
    ciphertext: attested.ciphertext,
    createdAt: attested.createdAt,
    refundOf: prepared.refundOf
  },
  events: transferEvents({
    event: "transfer.initiated",
    mode: prepared.mode,
    transferId: prepared.transferId,
    sender: party(prepared.sender),
    recipient: prepared.recipient.account === null ? null : party(prepared.recipient.account),
    recipientDisplay: prepared.recipient.display,
    asset: prepared.asset,
    confidential: prepared.confidential,
    txHash: null,
    refundOf: prepared.refundOf
  })
})
