/**
 * The guardian's SQL store. Every amount goes through the at-rest box on its way in
 * and out, with the row's identity as associated data; a value that does not open is
 * a defect (the storage was tampered with or the key is wrong), never a silent zero.
 *
 * Functions that change a balance expect to run inside a transaction that already
 * holds the balance row (`lockBalance`, SELECT … FOR UPDATE), so two guardian
 * processes on one PostgreSQL database serialize on the row.
 *
 * Each operation is a step over the store's context (the SQL client, the at-rest box), in a
 * module named for what it keeps: internal/store/balances.ts, reservations.ts, decisions.ts,
 * dailySpend.ts, keyTotals.ts, credits.ts, chainCursors.ts, alerts.ts, rotationVetoes.ts,
 * rotationHolds.ts, keyPins.ts; the group transaction's held rows and flush in heldRows.ts and batches.ts, its
 * prefetch in prefetch.ts, sealing at rest in sealing.ts. `makeStore` only wires them.
 */
import type { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import type { AtRestBox } from "./atRest.ts"
import * as Alerts from "./store/alerts.ts"
import * as Balances from "./store/balances.ts"
import * as ChainCursors from "./store/chainCursors.ts"
import type { StoreContext } from "./store/context.ts"
import * as Credits from "./store/credits.ts"
import * as DailySpend from "./store/dailySpend.ts"
import * as Decisions from "./store/decisions.ts"
import * as HeldRows from "./store/heldRows.ts"
import * as KeyPins from "./store/keyPins.ts"
import * as KeyTotals from "./store/keyTotals.ts"
import * as Prefetch from "./store/prefetch.ts"
import * as Reservations from "./store/reservations.ts"
import * as RotationHolds from "./store/rotationHolds.ts"
import * as RotationVetoes from "./store/rotationVetoes.ts"
import type {
  AccountRef,
  BalanceWrite,
  ChainCreditRow,
  DecisionRow,
  NewReservationRow,
  ReservationStatus,
  RotationAttestation,
  RotationVetoRow,
  RowHints
} from "./store/rows.ts"

export {
  type AccountRef,
  type AlertRow,
  type BalanceRow,
  type ChainCreditKey,
  type ChainCreditRow,
  type DecisionHint,
  type DecisionRow,
  discoveryScope,
  type ReservationRow,
  type ReservationStatus,
  type RotationAttestation,
  type RotationHold,
  type RotationVetoRow,
  type RowHints
} from "./store/rows.ts"

export type Store = ReturnType<typeof makeStore>

/**
 * The store over a SQL client and the at-rest box: its context, built once, and each operation
 * a thin call of its step (internal/store/*.ts) over that context.
 */
export const makeStore = (sql: SqlClient.SqlClient, box: AtRestBox) => {
  const context: StoreContext = { sql, box, writeRecords: HeldRows.writeRecords({ sql, box }) }
  return {
    lockBalance: (account: AccountRef) => Balances.lockBalance(context, account),
    readBalance: (account: AccountRef) => Balances.readBalance(context, account),
    writeBalance: (account: AccountRef, balance: BalanceWrite) => Balances.writeBalance(context, account, balance),
    withHeldRows: <A, E, R>(body: Effect.Effect<A, E, R>) => HeldRows.withHeldRows(context, body),
    prefetch: (hints: ReadonlyArray<RowHints>) => Prefetch.prefetch(context, hints),
    setFrozen: (account: AccountRef, reason: string | null, nowMs: number) => Balances.setFrozen(context, account, reason, nowMs),
    findReservation: (transferId: string, options: { readonly forUpdate: boolean }) =>
      Reservations.findReservation(context, transferId, options),
    findDecision: (transferId: string) => Decisions.findDecision(context, transferId),
    recordedBefore: (transferId: string, sender: AccountRef, nonce: bigint) =>
      Decisions.recordedBefore(context, transferId, sender, nonce),
    insertDecision: (transferId: string, decision: DecisionRow, nowMs: number) =>
      Decisions.insertDecision(context, transferId, decision, nowMs),
    updateDecision: (transferId: string, decision: DecisionRow, nowMs: number) =>
      Decisions.updateDecision(context, transferId, decision, nowMs),
    insertReservation: (reservation: NewReservationRow, nowMs: number) =>
      Reservations.insertReservation(context, reservation, nowMs),
    replaceReservation: (reservation: NewReservationRow, nowMs: number) =>
      Reservations.replaceReservation(context, reservation, nowMs),
    setReservationStatus: (
      transferId: string,
      status: ReservationStatus,
      nowMs: number,
      options?: { readonly recipientCredited?: boolean }
    ) => Reservations.setReservationStatus(context, transferId, status, nowMs, options),
    dueReservations: (nowMs: number, limit: number) => Reservations.dueReservations(context, nowMs, limit),
    refundedOf: (originalTransferId: string) => Reservations.refundedOf(context, originalTransferId),
    openReservationsOf: (account: AccountRef, limit: number) => Reservations.openReservationsOf(context, account, limit),
    spentIn: (agent: AccountRef, firstBucket: number, endBucket: number) =>
      DailySpend.spentIn(context, agent, firstBucket, endBucket),
    addSpend: (agent: AccountRef, bucket: number, delta: bigint) => DailySpend.addSpend(context, agent, bucket, delta),
    addKeyTotal: (account: AccountRef, apiKeyId: string, amount: bigint) =>
      KeyTotals.addKeyTotal(context, account, apiKeyId, amount),
    keyTotals: (account: AccountRef) => KeyTotals.keyTotals(context, account),
    findCredit: (creditId: string) => Credits.findCredit(context, creditId),
    insertCredit: (
      credit: { readonly creditId: string; readonly amount: bigint; readonly requestDigest: string } & AccountRef,
      nowMs: number
    ) => Credits.insertCredit(context, credit, nowMs),
    frozenCount: Balances.frozenCount(context),
    ownedAccounts: (after: AccountRef | undefined, limit: number) => Balances.ownedAccounts(context, after, limit),
    markRecipientCredited: (transferId: string) => Reservations.markRecipientCredited(context, transferId),
    cursor: (chainId: string, scope: string) => ChainCursors.cursor(context, chainId, scope),
    startCursor: (chainId: string, scope: string, nextBlock: bigint, nowMs: number) =>
      ChainCursors.startCursor(context, chainId, scope, nextBlock, nowMs),
    advanceCursor: (chainId: string, scope: string, nextBlock: bigint, nowMs: number) =>
      ChainCursors.advanceCursor(context, chainId, scope, nextBlock, nowMs),
    followedContracts: (chainId: string) => ChainCursors.followedContracts(context, chainId),
    insertChainCredit: (credit: ChainCreditRow, nowMs: number) => Credits.insertChainCredit(context, credit, nowMs),
    chainCreditRecorded: (chainId: string, txHash: string, logIndex: number) =>
      Credits.chainCreditRecorded(context, chainId, txHash, logIndex),
    hasReportedCredits: (chainId: string, contract: string) => Credits.hasReportedCredits(context, chainId, contract),
    raiseAlert: (account: AccountRef, kind: string, explanation: string, nowMs: number) =>
      Alerts.raiseAlert(context, account, kind, explanation, nowMs),
    clearAlerts: (account: AccountRef, kinds: ReadonlyArray<string>) => Alerts.clearAlerts(context, account, kinds),
    alertCount: Alerts.alertCount(context),
    listAlerts: (limit: number) => Alerts.listAlerts(context, limit),
    insertRotationVeto: (veto: RotationVetoRow, nowMs: number) => RotationVetoes.insertRotationVeto(context, veto, nowMs),
    latestRotationVeto: (chainId: string, contract: string, newSigner: string) =>
      RotationVetoes.latestRotationVeto(context, chainId, contract, newSigner),
    rotationVetoOf: (chainId: string, contract: string, proposalId: bigint) =>
      RotationVetoes.rotationVetoOf(context, chainId, contract, proposalId),
    holdForRotation: (account: AccountRef, untilMs: number, nowMs: number) =>
      RotationHolds.holdForRotation(context, account, untilMs, nowMs),
    recordRotationAttestation: (account: AccountRef, attestation: RotationAttestation) =>
      RotationHolds.recordRotationAttestation(context, account, attestation),
    liftRotationHold: (account: AccountRef) => RotationHolds.liftRotationHold(context, account),
    rotationHolds: (nowMs: number) => RotationHolds.rotationHolds(context, nowMs),
    pinnedKey: (account: AccountRef) => KeyPins.pinnedKey(context, account),
    pinKey: (account: AccountRef, publicKey: string, nowMs: number) => KeyPins.pinKey(context, account, publicKey, nowMs),
    recordRepin: (account: AccountRef, repin: Parameters<typeof KeyPins.recordRepin>[2], nowMs: number) =>
      KeyPins.recordRepin(context, account, repin, nowMs),
    pendingRepins: (account: AccountRef) => KeyPins.pendingRepins(context, account),
    resolveRepins: (account: AccountRef, newKey: string | undefined, nowMs: number) =>
      KeyPins.resolveRepins(context, account, newKey, nowMs)
  }
}
