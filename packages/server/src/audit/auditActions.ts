/**
 * The security actions the audit trail records (D60), in a module of their own: `admin audit
 * --action` offers them without loading the audit log's service and its HTTP dependencies.
 *
 * @since 0.11.0
 */

/**
 * What was done. Stable names: operators filter on them (`admin audit --action`).
 *
 * @since 0.11.0
 * @category models
 */
export const auditActions = [
  "account.created",
  "account.kyc_changed",
  "account.suspended",
  "account.reactivated",
  "api_key.created",
  "api_key.revoked",
  "passkey.added",
  "passkey.removed",
  "invite.issued",
  "invite.used",
  "agent.created",
  "policy.updated"
] as const
