/** Alerts: one open alert per (account, kind), raised and cleared by reconciliation (docs/guardian.md, "Alerts"). */
import { Effect } from "effect"
import type { StoreContext } from "./context.ts"
import type { AccountRef, AlertRow } from "./rows.ts"

/** Raises an alert, or confirms an open one; true when it is new. */
export const raiseAlert = ({ sql }: StoreContext, account: AccountRef, kind: string, explanation: string, nowMs: number) =>
  Effect.gen(function*() {
    const inserted = yield* sql<{ readonly kind: string }>`
      INSERT INTO guardian_alerts (chain_id, contract, account, kind, since_ms, last_seen_ms, explanation)
      VALUES (${account.chainId}, ${account.contract}, ${account.account}, ${kind}, ${String(nowMs)}::bigint,
        ${String(nowMs)}::bigint, ${explanation})
      ON CONFLICT DO NOTHING
      RETURNING kind`
    if (inserted.length === 1) return true
    yield* sql`
      UPDATE guardian_alerts SET last_seen_ms = ${String(nowMs)}::bigint, explanation = ${explanation}
      WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}
        AND kind = ${kind}`
    return false
  })

/** Clears the account's alerts of these kinds; the number cleared. */
export const clearAlerts = ({ sql }: StoreContext, account: AccountRef, kinds: ReadonlyArray<string>) =>
  sql<{ readonly kind: string }>`
    DELETE FROM guardian_alerts
    WHERE chain_id = ${account.chainId} AND contract = ${account.contract} AND account = ${account.account}
      AND kind IN ${sql.in(kinds)}
    RETURNING kind`.pipe(Effect.map((rows) => rows.length))

/** How many alerts are open. */
export const alertCount = ({ sql }: StoreContext) =>
  sql<{ readonly count: string }>`SELECT count(*)::text AS count FROM guardian_alerts`.pipe(
    Effect.map((rows) => Number(rows[0]?.count ?? "0"))
  )

/** The open alerts, oldest first. */
export const listAlerts = ({ sql }: StoreContext, limit: number) =>
  sql<{
    readonly chain_id: string
    readonly contract: string
    readonly account: string
    readonly kind: string
    readonly since_ms: string
    readonly last_seen_ms: string
    readonly explanation: string
  }>`
    SELECT chain_id, contract, account, kind, since_ms::text AS since_ms, last_seen_ms::text AS last_seen_ms, explanation
    FROM guardian_alerts ORDER BY guardian_alerts.since_ms, chain_id, contract, account, kind LIMIT ${limit}`.pipe(
    Effect.map((rows) =>
      rows.map((row): AlertRow => ({
        chainId: row.chain_id,
        contract: row.contract,
        account: row.account,
        kind: row.kind,
        sinceMs: Number(row.since_ms),
        lastSeenMs: Number(row.last_seen_ms),
        explanation: row.explanation
      }))
    )
  )
