/**
 * `health`: ready while the storage answers, with the frozen accounts and the open alerts. An
 * alert or a frozen account concerns one balance and must not take the guardian (every
 * account's transfers) out of service.
 *
 * @since 0.5.0
 */
import { Effect } from "effect"
import { alertsListedMax, type HealthResult } from "../Domain.ts"
import { toAlert } from "./Alerts.ts"
import type { GuardianContext } from "./GuardianContext.ts"

/**
 * @since 0.5.0
 * @category steps
 */
export const health = (context: GuardianContext): Effect.Effect<typeof HealthResult.Type> => {
  const { store } = context
  return Effect.all([store.frozenCount, store.alertCount, store.listAlerts(alertsListedMax)]).pipe(
    Effect.flatMap(([frozenAccounts, alertCount, rows]) =>
      Effect.forEach(rows, (row) => toAlert(context, row)).pipe(Effect.map((alerts) => ({ ready: true, frozenAccounts, alertCount, alerts })))
    ),
    Effect.orElseSucceed(() => ({ ready: false, frozenAccounts: 0, alertCount: 0, alerts: [] }))
  )
}
