/**
 * The MCP tools (D46), as an AI agent sees them: each one's name, a one-line description an LLM can
 * act on, and the schemas of what it takes and answers (Effect's `Tool` and `Toolkit`;
 * `McpServer` publishes them as JSON Schema). Two toolkits, by whose key the server holds:
 *
 * - an agent's: `pay`, `get_transfer`, `list_transfers`, `get_spend_policy`, `wait_for_approval`;
 * - an account's (with its key file): `pay`, `balance`, `get_transfer`, `list_transfers`.
 *
 * No tool answers a decryption key or a secret, and none answers an amount the agent did not
 * send itself: transfers and held transactions are answered as the API gives them, without
 * amounts (D13, D26), and only an account's own `balance` is decrypted (on this machine).
 * Every tool is strict: a parameter it does not know (`idempotencyKey` for `idempotency_key`)
 * is refused rather than ignored, so a misspelt key never becomes a second payment.
 *
 * @since 0.1.0
 */
import { AgentTransactionStatus, SpendPolicyRecord } from "@pps/api/Agents"
import { AssetName, memoBytesMax, TransferRecord, TransferStatus } from "@pps/api/Transfers"
import { Schema } from "effect"
import { Tool, Toolkit } from "effect/ai"

/**
 * A tool's refusal or failure, as the agent reads it: one line naming the rule and the field
 * (a policy's limit, the balance, the recipient), and what to do next. MCP answers it as a
 * tool error (`isError: true`) whose text is `message`. Never an amount or a memo.
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolRefused extends Schema.TaggedError<ToolRefused>()("ToolRefused", { message: Schema.String }) {}

/**
 * The most `wait_for_approval` waits in one call: MCP clients give up on a call after about
 * 60 s, so a longer wait is several calls.
 *
 * @since 0.1.0
 * @category constants
 */
export const approvalWaitSecondsMax = 50

/** How many transfers `list_transfers` answers at most: the API's page limit (D16). */
const listLimitMax = 100

/** `transfer_id`, as every tool that takes one names it. */
const TransferId = Schema.String.check(Schema.isNonEmpty()).annotate({ description: "A transfer's id (tr_...), as pay or list_transfers answered it." })

/** What a tool is configured with (`Tool.make`'s schemas and failure mode). */
interface ToolConfig {
  readonly parameters: Schema.Constraint
  readonly success: Schema.Constraint
  readonly failure: Schema.Constraint
  readonly failureMode: Tool.FailureMode
}

/** The tools that change nothing: safe to call again, and they say so to the client. */
const reading = <Name extends string, Config extends ToolConfig, R>(
  tool: Tool.Tool<Name, Config, R>
): Tool.Tool<Name, Config, R> =>
  tool.annotate(Tool.Readonly, true).annotate(Tool.Destructive, false).annotate(Tool.Idempotent, true).annotate(Tool.Strict, true)

/**
 * `pay`: a transfer sealed on this machine (the SDK's `Pps.transfers.create`): the amount and
 * memo never leave it in clear.
 *
 * @since 0.1.0
 * @category tools
 */
export const Pay = Tool.make("pay", {
  description: "Pay `amount` of `asset` (USDG unless given) to `to`, sealed on this machine; answers the transfer, or a held transaction waiting for the owner's approval (then call wait_for_approval), and the idempotency_key to retry with: after an error or no answer, call pay again with that idempotency_key and the same arguments, never without it, or you may pay twice.",
  parameters: Schema.Struct({
    to: Schema.String.check(Schema.isNonEmpty()).annotate({ description: "The recipient: a handle such as @bob (an agent's: @alice/bot) or a 0x address." }),
    amount: Schema.String.check(Schema.isPattern(/^\d+(\.\d+)?$/)).annotate({
      description: "The amount in the asset's units as a decimal string, such as \"12.5\" (no sign, no exponent; at most 6 decimals for USDG)."
    }),
    memo: Schema.optionalKey(Schema.String.annotate({ description: `A note for the recipient, at most ${memoBytesMax} bytes of UTF-8, sealed with the amount.` })),
    asset: Schema.optionalKey(AssetName.annotate({ description: "USDG (default) or ETH." })),
    idempotency_key: Schema.optionalKey(Schema.String.check(Schema.isBetweenLength(1, 255)).annotate({
      description: "Only to retry: the idempotency_key an earlier pay answered. Omit it for a new payment (a fresh one is made and answered)."
    }))
  }),
  success: Schema.Struct({
    kind: Schema.Literals(["transfer", "held"]).annotate({
      description: "transfer: sent (see status); held: above the approval threshold, waiting for the owner (see transaction_id)."
    }),
    idempotency_key: Schema.String.annotate({ description: "The key this payment is recorded under: pay again with it and the same arguments never pays twice." }),
    status: Schema.Literals(["pending", "confirmed", "failed", "pending_approval"]).annotate({
      description: "The transfer's (pending, confirmed, failed) or the held transaction's (pending_approval)."
    }),
    transfer_id: Schema.optionalKey(Schema.String.annotate({ description: "The transfer (kind transfer): get_transfer follows it." })),
    transaction_id: Schema.optionalKey(Schema.String.annotate({ description: "The held transaction (kind held): wait_for_approval takes it." })),
    expires_at: Schema.optionalKey(Schema.String.annotate({ description: "When the owner's approval window ends (kind held), ISO 8601." })),
    to: Schema.String,
    asset: AssetName
  }),
  failure: ToolRefused
}).annotate(Tool.Title, "Pay").annotate(Tool.Destructive, true).annotate(Tool.Idempotent, false).annotate(Tool.Strict, true)

/** The most of a paid answer's body `fetch_paid` hands the model: a page of JSON or text, not a download. */
export const paidBodyCharsMax = 20_000

/**
 * `fetch_paid` (D57): a GET of a URL that answers 402 with the confidential x402 scheme, paid
 * through PPS on this machine (`@pps/x402`'s client), at most `max_amount`.
 *
 * @since 0.2.0
 * @category tools
 */
export const FetchPaid = Tool.make("fetch_paid", {
  description: "GET `url`; when it answers 402 Payment Required with the pps-sealed x402 scheme, pay it (sealed on this machine, at most `max_amount` USDG, once for this request) and answer the resource. A payment above the approval threshold waits for the owner until the requirement's maxTimeoutSeconds, then fails saying it is held, with the transaction id: an approval after that pays for a request that was not served (wait_for_approval tells whether it happened), and calling fetch_paid again asks for a new 402 and pays again.",
  parameters: Schema.Struct({
    url: Schema.String.check(Schema.isPattern(/^https?:\/\/\S+$/)).annotate({ description: "An http(s) URL." }),
    max_amount: Schema.String.check(Schema.isPattern(/^\d+(\.\d+)?$/)).annotate({
      description: "The most this request may cost, a decimal string in USDG such as \"0.05\"."
    })
  }),
  success: Schema.Struct({
    status: Schema.Number.annotate({ description: "The HTTP status of the final answer." }),
    paid: Schema.Boolean.annotate({ description: "Whether a payment was made for it." }),
    transfer_id: Schema.optionalKey(Schema.String.annotate({ description: "The payment's transfer (get_transfer follows it)." })),
    content_type: Schema.String,
    body: Schema.String.annotate({ description: `The answer's body as text, at most ${paidBodyCharsMax} characters.` }),
    truncated: Schema.Boolean
  }),
  failure: ToolRefused
}).annotate(Tool.Title, "Fetch a paid resource").annotate(Tool.Destructive, true).annotate(Tool.Idempotent, false).annotate(Tool.Strict, true)

/**
 * `get_transfer`: one transfer as the API answers it (D13: no amount, no memo).
 *
 * @since 0.1.0
 * @category tools
 */
export const GetTransfer = reading(Tool.make("get_transfer", {
  description: "One transfer by transfer_id: its status (pending, confirmed, failed), sender, recipient, asset and chain transaction; never its amount.",
  parameters: Schema.Struct({ transfer_id: TransferId }),
  success: TransferRecord,
  failure: ToolRefused
}).annotate(Tool.Title, "Get a transfer"))

/**
 * `list_transfers`: the newest transfers, sent and received, without amounts.
 *
 * @since 0.1.0
 * @category tools
 */
export const ListTransfers = reading(Tool.make("list_transfers", {
  description: "The newest transfers sent or received, newest first (at most limit, default 20), optionally only those with status; no amounts.",
  parameters: Schema.Struct({
    status: Schema.optionalKey(TransferStatus),
    limit: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: listLimitMax })).annotate({
      description: `How many, from 1 to ${listLimitMax} (default 20).`
    }))
  }),
  success: Schema.Struct({
    transfers: Schema.Array(TransferRecord),
    has_more: Schema.Boolean.annotate({ description: "Whether older transfers match too." })
  }),
  failure: ToolRefused
}).annotate(Tool.Title, "List transfers"))

/**
 * `get_spend_policy`: the agent's own spend policy (D22, D42).
 *
 * @since 0.1.0
 * @category tools
 */
export const GetSpendPolicy = reading(Tool.make("get_spend_policy", {
  description: "Your spend policy, set by your owner: per-transaction and daily limits in USDG, the approval threshold above which a payment waits for the owner, allowed recipients, assets and active hours.",
  parameters: Tool.EmptyParams,
  success: SpendPolicyRecord,
  failure: ToolRefused
}).annotate(Tool.Title, "Get the spend policy"))

/**
 * `wait_for_approval`: the owner's decision on a held transaction, waited for a bounded time.
 *
 * @since 0.1.0
 * @category tools
 */
export const WaitForApproval = reading(Tool.make("wait_for_approval", {
  description: `Wait up to timeout_seconds (at most ${approvalWaitSecondsMax}) for the owner's decision on a held payment: answers approved (with the transfer_id it made), rejected, expired, or still_held (call again to keep waiting).`,
  parameters: Schema.Struct({
    transaction_id: Schema.String.check(Schema.isNonEmpty()).annotate({ description: "The held transaction's id (atx_...), as pay answered it." }),
    timeout_seconds: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: approvalWaitSecondsMax })).annotate({
      description: `How long to wait, from 0 (just look) to ${approvalWaitSecondsMax} seconds (default ${approvalWaitSecondsMax}).`
    }))
  }),
  success: Schema.Struct({
    outcome: Schema.Literals(["approved", "rejected", "expired", "still_held"]).annotate({
      description: "approved: paid (see transfer_id); rejected or expired: nothing was paid; still_held: no decision yet."
    }),
    transaction_id: Schema.String,
    status: AgentTransactionStatus,
    transfer_id: Schema.NullOr(Schema.String).annotate({ description: "The transfer an approval made: get_transfer follows it." }),
    expires_at: Schema.String.annotate({ description: "When the approval window ends, ISO 8601." }),
    decided_at: Schema.NullOr(Schema.String).annotate({ description: "When the owner decided, ISO 8601." })
  }),
  failure: ToolRefused
}).annotate(Tool.Title, "Wait for the owner's approval"))

/**
 * `balance`: the account's balances, decrypted on this machine with its key file (D20).
 *
 * @since 0.1.0
 * @category tools
 */
export const Balance = reading(Tool.make("balance", {
  description: "The account's balance of each asset, decrypted on this machine from the chain's ciphertext and proven to the service.",
  parameters: Tool.EmptyParams,
  success: Schema.Struct({
    balances: Schema.Array(Schema.Struct({
      asset: Schema.String.annotate({ description: "The asset: USDG or ETH." }),
      amount: Schema.String.annotate({ description: "A decimal string in the asset's units." })
    }))
  }),
  failure: ToolRefused
}).annotate(Tool.Title, "Balance"))

/**
 * The tools of an agent's key.
 *
 * @since 0.1.0
 * @category toolkits
 */
export const AgentTools = Toolkit.make(Pay, GetTransfer, ListTransfers, GetSpendPolicy, WaitForApproval, FetchPaid)

/**
 * The tools of an account's key with its key file.
 *
 * @since 0.1.0
 * @category toolkits
 */
export const AccountTools = Toolkit.make(Pay, Balance, GetTransfer, ListTransfers, FetchPaid)
