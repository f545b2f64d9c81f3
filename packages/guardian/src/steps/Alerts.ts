/**
 * The guardian's alerts (docs/guardian.md, "Alerts"): raised in the transaction that finds the
 * problem, logged once without amounts, listed by `health` with the signed veto a rotation
 * alert carries.
 *
 * @since 0.5.0
 */
import { DateTime, Effect } from "effect"
import type { Alert } from "../Domain.ts"
import type { AccountRef, AlertRow } from "../internal/store.ts"
import type { GuardianContext } from "./GuardianContext.ts"

/**
 * Raises (or confirms) an alert; logs it without amounts when it is new. Answers whether it is new.
 *
 * @since 0.5.0
 * @category steps
 */
export const alert = Effect.fnUntraced(function*(
  context: GuardianContext,
  account: AccountRef,
  kind: typeof Alert.Type["kind"],
  explanation: string,
  nowMs: number
) {
  const raised = yield* context.store.raiseAlert(account, kind, explanation, nowMs)
  if (raised) {
    yield* Effect.logError(`guardian alert: ${explanation}`).pipe(
      Effect.annotateLogs({ chain_id: account.chainId, contract: account.contract, account: account.account, alert: kind })
    )
  }
  return raised
})

/** An ISO timestamp of milliseconds since the epoch. */
export const isoOfMs = (ms: number): string => DateTime.formatIso(DateTime.makeUnsafe(ms))

/**
 * A stored alert as `health` lists it.
 *
 * @since 0.5.0
 * @category steps
 */
export const toAlert = Effect.fnUntraced(function*(context: GuardianContext, row: AlertRow) {
  const base: typeof Alert.Type = {
    chainId: BigInt(row.chainId),
    contract: row.contract,
    account: row.account,
    kind: row.kind as typeof Alert.Type["kind"],
    since: isoOfMs(row.sinceMs),
    lastSeen: isoOfMs(row.lastSeenMs),
    explanation: row.explanation
  }
  if (row.kind !== "guardian_rotation_vetoed") return base
  // One alert per (contract, proposed signer): it carries the latest proposal's veto,
  // the only one that can still be pending (the contract holds one proposal at a time).
  const veto = yield* context.store.latestRotationVeto(row.chainId, row.contract, row.account)
  if (veto === undefined) return base
  return {
    ...base,
    veto: {
      proposalId: veto.proposalId,
      newSigner: veto.newSigner,
      executableAt: isoOfMs(Number(veto.executableAt) * 1000),
      signature: veto.signature
    }
  } satisfies typeof Alert.Type
})
