/**
 * Every migration, in order. The same SQL runs on PostgreSQL and PGlite.
 *
 * Never edit a migration that has shipped: add the next one.
 *
 * @since 0.1.0
 */
import type { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import { accountsAndKeys } from "./0001_accounts_and_keys.ts"
import { settlement } from "./0002_settlement.ts"
import { eventsAndWebhooks } from "./0003_events_webhooks.ts"
import { transfers } from "./0004_transfers.ts"
import { agents } from "./0005_agents.ts"
import { idempotentOperations } from "./0006_idempotent_operations.ts"
import { agentModes } from "./0007_agent_modes.ts"
import { faucetKey } from "./0008_faucet_key.ts"
import { idempotencyClaimToken } from "./0009_idempotency_claim_token.ts"
import { heldAmount } from "./0010_held_amount.ts"
import { eventStream } from "./0011_event_stream.ts"
import { dashboard } from "./0012_dashboard.ts"
import { submissionOwner } from "./0013_submission_owner.ts"
import { rateLimitBuckets } from "./0014_rate_limit_buckets.ts"
import { sealedAttempts } from "./0015_sealed_attempts.ts"
import { dashboardStepUp } from "./0016_dashboard_step_up.ts"
import { heartbeatHearsControl } from "./0017_heartbeat_hears_control.ts"
import { chainTransactions } from "./0018_chain_transactions.ts"
import { refunds } from "./0019_refunds.ts"
import { operatorConsole } from "./0021_operator_console.ts"
import { eventPositions } from "./0022_event_positions.ts"
import { webhookManagement } from "./0023_webhook_management.ts"
import { webhookForeignKeys } from "./0024_webhook_foreign_keys.ts"
import { callDataOnce } from "./0025_call_data_once.ts"
import { isoUtcInlined } from "./0026_iso_utc_inlined.ts"
import { walletAddressLookup } from "./0027_wallet_address_lookup.ts"

/**
 * @since 0.1.0
 * @category migrations
 */
export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "0001_accounts_and_keys": accountsAndKeys,
  "0002_settlement": settlement,
  "0003_events_webhooks": eventsAndWebhooks,
  "0004_transfers": transfers,
  "0005_agents": agents,
  "0006_idempotent_operations": idempotentOperations,
  "0007_agent_modes": agentModes,
  "0008_faucet_key": faucetKey,
  "0009_idempotency_claim_token": idempotencyClaimToken,
  "0010_held_amount": heldAmount,
  "0011_event_stream": eventStream,
  "0012_dashboard": dashboard,
  "0013_submission_owner": submissionOwner,
  "0014_rate_limit_buckets": rateLimitBuckets,
  "0015_sealed_attempts": sealedAttempts,
  "0016_dashboard_step_up": dashboardStepUp,
  "0017_heartbeat_hears_control": heartbeatHearsControl,
  "0018_chain_transactions": chainTransactions,
  "0019_refunds": refunds,
  "0021_operator_console": operatorConsole,
  "0022_event_positions": eventPositions,
  "0023_webhook_management": webhookManagement,
  "0024_webhook_foreign_keys": webhookForeignKeys,
  "0025_call_data_once": callDataOnce,
  "0026_iso_utc_inlined": isoUtcInlined,
  "0027_wallet_address_lookup": walletAddressLookup
}
