/**
 * The answer of a transfer's create, discriminated. `POST /v1/transfers` answers either the
 * Transfer (201) or, for an agent's transfer above its approval threshold, the held
 * transaction (202, D26). The wire bodies carry no common literal field that tells them
 * apart for a reader (`status` differs, but a held transaction's also includes `approved`,
 * `rejected`, `expired`), so the SDK adds one client-side: `kind`. Nothing on the wire changes.
 *
 * @since 0.5.0
 */
import type { AgentTransactionRecord } from "@pps/api/Agents"
import type { TransferRecord } from "@pps/api/Transfers"

/**
 * A created transfer (`kind: "transfer"`) or an agent's transfer held for its owner's
 * approval (`kind: "held"`).
 *
 * @since 0.5.0
 * @category models
 */
export type CreatedTransfer =
  | { readonly kind: "transfer"; readonly transfer: TransferRecord }
  | { readonly kind: "held"; readonly held: AgentTransactionRecord }

/**
 * The create's answer with its `kind`: only a held transaction has a `transaction_id`.
 *
 * @since 0.5.0
 * @category constructors
 */
export const createdTransfer = (answer: TransferRecord | AgentTransactionRecord): CreatedTransfer =>
  "transaction_id" in answer ? { kind: "held", held: answer } : { kind: "transfer", transfer: answer }
