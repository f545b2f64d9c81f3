/**
 * Events (D30): their types, the payload of each type, and who receives them.
 *
 * Every payload has a Schema of its own listing exactly SPEC.md's fields, the
 * event id and the resource ids. Encoding goes through that Schema, which drops
 * every key it does not list: an `amount` or a `memo` handed in by mistake can
 * not reach a payload, because no payload Schema has such a field.
 *
 * Pure: no HTTP, no SQL.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { Mode } from "./ApiKeys.ts"

/**
 * SPEC.md's event types, plus `agent.transaction.expired` (ext, D27).
 *
 * @since 0.1.0
 * @category models
 */
export const eventTypes = [
  "transfer.initiated",
  "transfer.confirmed",
  "transfer.failed",
  "agent.transaction.pending_approval",
  "agent.transaction.approved",
  "agent.transaction.rejected",
  "agent.transaction.expired",
  "agent.policy.updated"
] as const

/**
 * @since 0.1.0
 * @category models
 */
export const EventType = Schema.Literals(eventTypes).annotate({ identifier: "EventType", description: "What happened (D30)." })
export type EventType = typeof EventType.Type

/**
 * D30: `sent` for the sender's event, `received` for the recipient's.
 *
 * @since 0.1.0
 * @category models
 */
export const Direction = Schema.Literals(["sent", "received"])
export type Direction = typeof Direction.Type

const common = {
  id: Schema.String,
  /** The handle of the account concerned (the agent's, for an agent's event). */
  account: Schema.String,
  timestamp: Schema.String
}

/**
 * `transfer.*`: SPEC.md's `transfer.confirmed` fields plus `id` and `transfer_id`.
 * `tx_hash` is null while the transfer has no transaction yet. A refund's events also carry
 * `refund_of` (ext, D43), the refunded transfer's id; other transfers' events have no such key.
 *
 * @since 0.1.0
 * @category models
 */
export const TransferEventPayload = Schema.Struct({
  id: common.id,
  event: Schema.Literals(["transfer.initiated", "transfer.confirmed", "transfer.failed"]),
  account: common.account,
  direction: Direction,
  counterparty: Schema.String,
  asset: Schema.String,
  confidential: Schema.Boolean,
  tx_hash: Schema.NullOr(Schema.String),
  transfer_id: Schema.String,
  refund_of: Schema.optionalKey(Schema.String),
  timestamp: common.timestamp
})
export type TransferEventPayload = typeof TransferEventPayload.Type

/**
 * `agent.transaction.*`: the held transaction (D26, D27). `transfer_id` and
 * `tx_hash` are set once an approved transaction has been submitted.
 *
 * @since 0.1.0
 * @category models
 */
export const AgentTransactionEventPayload = Schema.Struct({
  id: common.id,
  event: Schema.Literals([
    "agent.transaction.pending_approval",
    "agent.transaction.approved",
    "agent.transaction.rejected",
    "agent.transaction.expired"
  ]),
  account: common.account,
  agent: Schema.String,
  transaction_id: Schema.String,
  to: Schema.String,
  asset: Schema.String,
  confidential: Schema.Boolean,
  requested_at: Schema.String,
  expires_at: Schema.String,
  transfer_id: Schema.NullOr(Schema.String),
  tx_hash: Schema.NullOr(Schema.String),
  timestamp: common.timestamp
})
export type AgentTransactionEventPayload = typeof AgentTransactionEventPayload.Type

/**
 * `agent.policy.updated` (D24).
 *
 * @since 0.1.0
 * @category models
 */
export const AgentPolicyEventPayload = Schema.Struct({
  id: common.id,
  event: Schema.Literal("agent.policy.updated"),
  account: common.account,
  agent: Schema.String,
  policy_id: Schema.String,
  timestamp: common.timestamp
})
export type AgentPolicyEventPayload = typeof AgentPolicyEventPayload.Type

/**
 * Any event payload, as delivered.
 *
 * @since 0.1.0
 * @category models
 */
export const EventPayload = Schema.Union([TransferEventPayload, AgentTransactionEventPayload, AgentPolicyEventPayload])
export type EventPayload = typeof EventPayload.Type

/**
 * What a caller hands the outbox: a payload without the fields the outbox
 * assigns (`id`, `timestamp`), the mode, and the account whose subscriptions
 * receive the event.
 *
 * @since 0.1.0
 * @category models
 */
export type EventInput = {
  /** D9: only subscriptions of this mode receive the event. */
  readonly mode: Mode
  /** The account whose subscriptions receive it: the owner, for an agent's event. */
  readonly recipientAccountId: string
  readonly payload:
    | Omit<TransferEventPayload, "id" | "timestamp">
    | Omit<AgentTransactionEventPayload, "id" | "timestamp">
    | Omit<AgentPolicyEventPayload, "id" | "timestamp">
}

/**
 * The exact JSON text of an event's payload: encoded through its type's
 * Schema (which drops any key it does not list), keys in Schema order.
 *
 * @since 0.1.0
 * @category constructors
 */
export const encodePayload = (
  input: EventInput["payload"],
  id: string,
  timestamp: string
): { readonly type: EventType; readonly json: string } => {
  const full = { ...input, id, timestamp }
  switch (input.event) {
    case "transfer.initiated":
    case "transfer.confirmed":
    case "transfer.failed":
      return { type: input.event, json: JSON.stringify(Schema.encodeSync(TransferEventPayload)(full as TransferEventPayload)) }
    case "agent.transaction.pending_approval":
    case "agent.transaction.approved":
    case "agent.transaction.rejected":
    case "agent.transaction.expired":
      return {
        type: input.event,
        json: JSON.stringify(Schema.encodeSync(AgentTransactionEventPayload)(full as AgentTransactionEventPayload))
      }
    case "agent.policy.updated":
      return { type: input.event, json: JSON.stringify(Schema.encodeSync(AgentPolicyEventPayload)(full as AgentPolicyEventPayload)) }
  }
}

/**
 * One party of a transfer, as the event routing needs it.
 *
 * @since 0.1.0
 * @category models
 */
export interface TransferParty {
  readonly accountId: string
  /** Canonical handle (no `@`); for an agent, `owner/name`. */
  readonly handle: string
  /** Set for an agent account: its events go to the owner's subscriptions (D30). */
  readonly ownerAccountId: string | null
}

/**
 * D30's "one event per side": the events of one transfer state change, the
 * sender's (`sent`) and, when the recipient is one of our accounts, the
 * recipient's (`received`). Agent parties route to their owner.
 *
 * @since 0.1.0
 * @category constructors
 */
export const transferEvents = (options: {
  readonly event: TransferEventPayload["event"]
  readonly mode: Mode
  readonly transferId: string
  readonly sender: TransferParty
  /** The recipient when it is one of our accounts; null for a raw address. */
  readonly recipient: TransferParty | null
  /** What the sender's event shows as counterparty: `@handle` or the 0x address. */
  readonly recipientDisplay: string
  readonly asset: string
  readonly confidential: boolean
  readonly txHash: string | null
  /** A refund's refunded transfer (D43); null for any other transfer. */
  readonly refundOf: string | null
}): ReadonlyArray<EventInput> => {
  const side = (party: TransferParty, direction: Direction, counterparty: string): EventInput => ({
    mode: options.mode,
    recipientAccountId: party.ownerAccountId ?? party.accountId,
    payload: {
      event: options.event,
      account: `@${party.handle}`,
      direction,
      counterparty,
      asset: options.asset,
      confidential: options.confidential,
      tx_hash: options.txHash,
      transfer_id: options.transferId,
      ...(options.refundOf === null ? {} : { refund_of: options.refundOf })
    }
  })
  const sent = side(options.sender, "sent", options.recipientDisplay)
  return options.recipient === null
    ? [sent]
    : [sent, side(options.recipient, "received", `@${options.sender.handle}`)]
}

/**
 * An event as `GET /v1/events` and `GET /v1/events/{id}` show it (D59): Stripe's event shape,
 * the webhook payload under `data.object`. No amount, as in every payload.
 *
 * @since 0.9.0
 * @category models
 */
export const EventRecord = Schema.Struct({
  id: Schema.String.annotate({ description: "`evt_` + ULID; the payload's `id` and deliveries' `Webhook-Id`." }),
  object: Schema.Literal("event"),
  type: EventType,
  created_at: Schema.String.annotate({ description: "When it was recorded (ISO 8601 UTC)." }),
  livemode: Schema.Boolean.annotate({ description: "true for a live key's event, false for a test key's (D9)." }),
  data: Schema.Struct({ object: EventPayload.annotate({ description: "The payload every delivery of the event sends." }) })
}).annotate({ identifier: "Event", description: "D59: one recorded event, as long as it is kept (D35)." })
export type EventRecord = typeof EventRecord.Type

/**
 * An event as stored.
 *
 * @since 0.1.0
 * @category models
 */
export interface StoredEvent {
  readonly eventId: string
  readonly accountId: string
  readonly mode: Mode
  readonly type: EventType
  /** The exact body every delivery sends. */
  readonly payload: string
  readonly createdAt: string
}

/**
 * What travels on the bus: ids only (the payload stays in the database).
 *
 * @since 0.1.0
 * @category models
 */
export const EventMessage = Schema.Struct({
  event_id: Schema.String,
  account_id: Schema.String,
  mode: Mode,
  type: EventType
})
export type EventMessage = typeof EventMessage.Type
