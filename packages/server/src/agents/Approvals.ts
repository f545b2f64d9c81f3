/**
 * Human approval of held agent transactions (D26-D28): the pending list, the
 * owner's sealed copy, approve, reject, the expiry sweep, and a transaction's
 * state for its owner and its agent (D42).
 *
 * Every decision runs in the agent's lane (the same `Lanes` key as
 * the agent's transfers), and the state change is conditional on the row still
 * being `pending_approval`: an approval, a rejection, the sweep and the agent's
 * new transfers never interleave, and a transaction is decided once. The
 * approval itself (re-check, authorize, record, submit) is Transfers'
 * `approveHeld`, so approved transfers go through exactly the path new ones do.
 *
 * Checks, in order: the caller's key is not an agent's (403), the transaction
 * exists in the key's mode (404), the caller owns its agent (403), it is still
 * pending (404 once decided), its window is open (409).
 *
 * @since 0.1.0
 */
import { Clock, Context, DateTime, Duration, Effect, Layer, Option, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import { bytesToHex } from "viem"
import type { Principal } from "@pps/api/ApiKeys"
import { AppConfig, runsWorkers } from "../config/AppConfig.ts"
import { Outbox } from "../events/Outbox.ts"
import {
  type ApprovalAttemptsExhausted,
  type ApprovalInProgress,
  type InsufficientBalance,
  LivemodeUnavailable,
  NotAgentOwner,
  type PolicyViolation,
  type RefundExceedsOriginal,
  type ServiceUnavailable,
  TransactionExpired,
  TransactionNotFound
} from "@pps/api/Errors"
import { OperationReplay } from "../platform/IdempotentOperations.ts"
import { Lanes } from "../platform/Lanes.ts"
import { confidentialTokenOf } from "../settlement/Chains.ts"
import { Settlement } from "../settlement/Settlement.ts"
import { transferIdBytes32, Transfers } from "../transfers/Transfers.ts"
import { AgentTransactionStore, type StoredAgentTransaction } from "./AgentTransactionStore.ts"
import { isAgentKey, replayedOrUnavailable } from "./Agents.ts"
import * as Invariant from "../platform/Invariant.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import type { DependencyUnavailable } from "../platform/Unavailable.ts"
import { type AgentTransactionRecord, agentTransactionEvent, toAgentTransactionRecord } from "@pps/api/Agents"

/**
 * D27: approved or rejected is no longer pending (404); past its window, whether the
 * sweep has marked it yet or not, it is expired (409).
 *
 * @since 0.1.0
 * @category predicates
 */
export const openCheck = (
  held: { readonly transaction_id: string; readonly status: string; readonly expires_at_ms: string },
  nowMs: number
): Effect.Effect<void, TransactionNotFound | TransactionExpired> =>
  held.status === "expired" || (held.status === "pending_approval" && Number(held.expires_at_ms) <= nowMs)
    ? Effect.fail(TransactionExpired.of(held.transaction_id))
    : held.status !== "pending_approval"
    ? Effect.fail(TransactionNotFound.of(held.transaction_id))
    : Effect.void

/** Held transactions expired per sweep step: bounded so one step is one short transaction each. */
const sweepBatchMax = 100


/**
 * @since 0.1.0
 * @category services
 */
export class Approvals extends Context.Service<Approvals, {
  readonly pending: (principal: Principal) => Effect.Effect<ReadonlyArray<{
    readonly transaction_id: string
    readonly agent: string
    readonly to: string
    readonly asset: "USDG" | "ETH"
    readonly confidential: boolean
    readonly requested_at: string
    readonly expires_at: string
  }>, DependencyUnavailable>
  readonly approve: (
    principal: Principal,
    transactionId: string
  ) => Effect.Effect<
    AgentTransactionRecord,
    | TransactionNotFound
    | TransactionExpired
    | NotAgentOwner
    | PolicyViolation
    | RefundExceedsOriginal
    | InsufficientBalance
    | ApprovalInProgress
    | ApprovalAttemptsExhausted
    | LivemodeUnavailable
    | ServiceUnavailable
    | DependencyUnavailable
  >
  readonly reject: (
    principal: Principal,
    transactionId: string
  ) => Effect.Effect<AgentTransactionRecord, TransactionNotFound | TransactionExpired | NotAgentOwner | DependencyUnavailable>
  readonly sealed: (principal: Principal, transactionId: string) => Effect.Effect<{
    readonly transaction_id: string
    readonly transfer_id: string
    readonly asset: "USDG" | "ETH"
    readonly chain_id: number
    readonly contract: string
    readonly binding_id: string
    readonly sealed_note: string
    readonly guardian_amount: string | null
  }, TransactionNotFound | NotAgentOwner | LivemodeUnavailable | DependencyUnavailable>
  /** D42: a held transaction's state, for its owner's key and its agent's own. */
  readonly read: (principal: Principal, transactionId: string) => Effect.Effect<AgentTransactionRecord, TransactionNotFound | DependencyUnavailable>
  /** One expiry sweep step (also run on a schedule by the layer); how many it expired. */
  readonly expireDue: Effect.Effect<number, DependencyUnavailable>
}>()("server/agents/Approvals") {
  static readonly layer = Layer.effect(
    Approvals,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const context: ApprovalsContext = {
        sql: yield* SqlClient.SqlClient,
        store: yield* AgentTransactionStore,
        transfers: yield* Transfers,
        outbox: yield* Outbox,
        lanes: yield* Lanes,
        settlement: yield* Settlement,
        operations: yield* OperationReplay
      }
      // The sweep is a worker's job; an api-only node leaves it to them.
      if (runsWorkers(config)) {
        yield* Effect.forkScoped(
          expireDue(context).pipe(
            Effect.catchCause((cause) => Effect.logError("approval expiry sweep failed", cause)),
            Effect.repeat(Schedule.spaced(Duration.millis(config.approvalSweepIntervalMs)))
          )
        )
      }
      yield* context.operations.register("approval", (transactionId) => decisionRecord(context, transactionId))
      yield* context.operations.register("rejection", (transactionId) => decisionRecord(context, transactionId))
      return Approvals.of({
        pending: (principal) => pending(context, principal),
        approve: (principal, transactionId) => approve(context, principal, transactionId),
        reject: (principal, transactionId) => reject(context, principal, transactionId),
        sealed: (principal, transactionId) => sealed(context, principal, transactionId),
        read: (principal, transactionId) => read(context, principal, transactionId),
        expireDue: expireDue(context)
      })
    })
  )
}

/** What the steps share: the services an approval decision needs. */
interface ApprovalsContext {
  readonly sql: SqlClient.SqlClient
  readonly store: AgentTransactionStore["Service"]
  readonly transfers: Transfers["Service"]
  readonly outbox: Outbox["Service"]
  readonly lanes: Lanes["Service"]
  readonly settlement: Settlement["Service"]
  readonly operations: OperationReplay["Service"]
}

/** Agent transactions are never deleted: one read before is still there. */
const stillStored = "an agent transaction, once read, is never deleted"

/** The agent transaction, if it is in the key's mode and the caller owns its agent. */
const ownedTransaction = ({ store }: ApprovalsContext, principal: Principal, transactionId: string) =>
  Effect.gen(function*() {
    if (isAgentKey(principal)) return yield* Effect.fail(NotAgentOwner.of())
    const held = yield* store.findInMode(transactionId, principal.mode).pipe(Unavailable.database("Approvals.ownedTransaction"))
    if (Option.isNone(held)) return yield* Effect.fail(TransactionNotFound.of(transactionId))
    if (held.value.owner_account_id !== principal.accountId) return yield* Effect.fail(NotAgentOwner.of())
    return held.value
  })

/** Under the agent's lane: pending → rejected | expired with its event, once. */
const close = (context: ApprovalsContext, held: StoredAgentTransaction, status: "rejected" | "expired") =>
  context.lanes.alone(held.agent_account_id, Effect.gen(function*() {
    const { sql, store } = context
    const nowMs = yield* Clock.currentTimeMillis
    const current = yield* store.findById(held.transaction_id).pipe(
      Unavailable.database("Approvals.close"),
      Effect.flatMap(Invariant.some(stillStored))
    )
    if (status === "rejected") yield* openCheck(current, nowMs)
    else if (current.status !== "pending_approval") return Option.none<StoredAgentTransaction>()
    const decidedAt = DateTime.formatIso(DateTime.makeUnsafe(nowMs))
    const decided = { ...current, status, decided_at: decidedAt }
    const changed = yield* sql.withTransaction(Effect.gen(function*() {
      const changed = yield* store.decide(held.transaction_id, status, decidedAt)
      if (changed) yield* context.outbox.append([agentTransactionEvent(`agent.transaction.${status}`, decided, null)])
      if (changed && status === "rejected") yield* context.operations.bind("rejection", held.transaction_id)
      return changed
    })).pipe(Unavailable.database("Approvals.close"))
    if (!changed) {
      return status === "rejected"
        ? yield* Effect.fail(TransactionNotFound.of(held.transaction_id))
        : Option.none<StoredAgentTransaction>()
    }
    return Option.some(decided)
  }))

const expireDue = (context: ApprovalsContext) =>
  Effect.gen(function*() {
    const nowMs = yield* Clock.currentTimeMillis
    const due = yield* context.store.due(DateTime.formatIso(DateTime.makeUnsafe(nowMs)), sweepBatchMax).pipe(
      Unavailable.database("Approvals.expireDue")
    )
    let expired = 0
    for (const held of due) {
      const closed = yield* close(context, held, "expired").pipe(
        Effect.catch(() => Effect.succeed(Option.none<StoredAgentTransaction>()))
      )
      if (Option.isSome(closed)) expired++
    }
    return expired
  })

/** A held transaction as it stands now: an approved one with its transfer's current state. */
const currentRecord = (context: ApprovalsContext, held: StoredAgentTransaction) =>
  Effect.gen(function*() {
    const transfer = held.status === "approved" ? yield* context.transfers.current(held.transfer_id) : Option.none()
    return toAgentTransactionRecord(
      held,
      Option.match(transfer, {
        onNone: () => null,
        onSome: (t) => ({ transfer_id: t.transfer_id, status: t.status, tx_hash: t.tx_hash })
      })
    )
  })

/**
 * D36: a retried approve or reject whose first request was cut off answers with the
 * decision it recorded (an approval with its transfer as it stands now).
 */
const decisionRecord = (context: ApprovalsContext, transactionId: string) =>
  Effect.gen(function*() {
    const held = yield* context.store.findById(transactionId).pipe(
      Unavailable.database("Approvals.decisionRecord"),
      Effect.flatMap(Invariant.some("an approval or rejection bound to an idempotency key names an agent transaction"))
    )
    return { status: 200, body: yield* currentRecord(context, held) }
  }).pipe(replayedOrUnavailable)

/**
 * D42: a held transaction's state for its owner's key and its agent's own, never an amount;
 * anyone else's key (another mode's included, D38) is told it does not exist. Past its window
 * it reads `expired` as approve and reject would answer it (409), even before the sweep has
 * recorded it (`decided_at` stays null until then).
 */
const read = Effect.fn("Approvals.read")(function*(context: ApprovalsContext, principal: Principal, transactionId: string) {
  const found = yield* context.store.findInMode(transactionId, principal.mode).pipe(Unavailable.database("Approvals.read"))
  const concerned = Option.filter(found, (held) =>
    isAgentKey(principal) ? held.agent_account_id === principal.accountId : held.owner_account_id === principal.accountId)
  if (Option.isNone(concerned)) return yield* Effect.fail(TransactionNotFound.of(transactionId, "any"))
  const held = concerned.value
  const lapsed = held.status === "pending_approval" && Number(held.expires_at_ms) <= (yield* Clock.currentTimeMillis)
  return yield* currentRecord(context, lapsed ? { ...held, status: "expired" } : held)
})

const pending = Effect.fn("Approvals.pending")(function*({ store }: ApprovalsContext, principal: Principal) {
  const nowMs = yield* Clock.currentTimeMillis
  const scope = isAgentKey(principal)
    ? { agentAccountId: principal.accountId }
    : { ownerAccountId: principal.accountId }
  const rows = yield* store.pending(scope, principal.mode, DateTime.formatIso(DateTime.makeUnsafe(nowMs))).pipe(
    Unavailable.database("Approvals.pending")
  )
  return rows.map((held) => {
    const record = toAgentTransactionRecord(held, null)
    return {
      transaction_id: record.transaction_id,
      agent: record.agent,
      to: record.to,
      asset: record.asset,
      confidential: record.confidential,
      requested_at: record.requested_at,
      expires_at: record.expires_at
    }
  })
})

const approve = (context: ApprovalsContext, principal: Principal, transactionId: string) =>
  Effect.gen(function*() {
    const held = yield* ownedTransaction(context, principal, transactionId)
    yield* openCheck(held, yield* Clock.currentTimeMillis)
    const { transaction, transfer } = yield* context.transfers.approveHeld(held.transaction_id)
    return toAgentTransactionRecord(transaction, {
      transfer_id: transfer.transfer_id,
      status: transfer.status,
      tx_hash: transfer.tx_hash
    })
  }).pipe(Effect.annotateLogs({ transaction_id: transactionId }))

const reject = (context: ApprovalsContext, principal: Principal, transactionId: string) =>
  Effect.gen(function*() {
    const held = yield* ownedTransaction(context, principal, transactionId)
    yield* openCheck(held, yield* Clock.currentTimeMillis)
    const decided = yield* close(context, held, "rejected").pipe(
      Effect.flatMap(Invariant.some("a rejection either changes its transaction or fails"))
    )
    return toAgentTransactionRecord(decided, null)
  })

const sealed = (context: ApprovalsContext, principal: Principal, transactionId: string) =>
  Effect.gen(function*() {
    const held = yield* ownedTransaction(context, principal, transactionId)
    const chain = yield* Option.match(context.settlement.chain(held.mode), {
      onNone: () => Effect.fail(LivemodeUnavailable.of()),
      onSome: Effect.succeed
    })
    const parts = yield* context.store.sealedParts(held.transaction_id).pipe(Unavailable.database("Approvals.sealed"))
    return {
      transaction_id: held.transaction_id,
      transfer_id: held.transfer_id,
      asset: held.asset,
      chain_id: chain.chainId,
      contract: confidentialTokenOf(chain, held.asset),
      binding_id: transferIdBytes32(held.transfer_id),
      sealed_note: bytesToHex(parts.senderBox),
      guardian_amount: parts.guardianHeldAmount === null ? null : bytesToHex(parts.guardianHeldAmount)
    }
  })
