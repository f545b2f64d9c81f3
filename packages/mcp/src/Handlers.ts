/**
 * What each tool does, over the SDK's Promise surface (`Pps`) of the holder's key: `pay` is
 * `Pps.transfers.create`, which seals the amount and memo on this machine (D21: an agent's
 * copy to its owner's key); the reads are the API's amount-free records; `balance` is
 * `Pps.balances.read`, decrypted here with the account's key pair. Each step is a named
 * function of the holder's settings and the tool's parameters; the toolkits' layers at the end
 * bind them to the tools.
 *
 * @since 0.1.0
 */
import type { Pps, PpsTypes } from "@pps/sdk"
import type * as McpEntry from "@pps/sdk/McpEntry"
import { Clock, Duration, Effect, type Layer } from "effect"
import type { Tool } from "effect/ai"
import * as Refusals from "./Refusals.ts"
import { Client as X402Client, Scheme as X402Scheme } from "@pps/x402"
import {
  AccountTools,
  AgentTools,
  approvalWaitSecondsMax,
  type FetchPaid,
  type GetTransfer,
  type ListTransfers,
  paidBodyCharsMax,
  type Pay,
  ToolRefused,
  type WaitForApproval
} from "./Tools.ts"

/**
 * How often `wait_for_approval` asks: a decision is a person's click, so an answer within a
 * second of it is prompt, and one small read a second per waiting agent is light.
 */
const approvalPollIntervalMs = 1_000

/** `list_transfers` without a limit: the API's own default page (D16). */
const listLimitDefault = 20

/**
 * A fresh idempotency key for a `pay` without one: 122 random bits from the platform's CSPRNG,
 * so two calls without a key are two payments, and each answers the key to retry it with.
 */
const newIdempotencyKey = (): string => `mcp_${globalThis.crypto.randomUUID()}`

/** A call of the SDK as an Effect whose failure is the tool's refusal. */
const attempt = <A>(call: () => Promise<A>, refuse: (error: unknown) => ToolRefused): Effect.Effect<A, ToolRefused> =>
  Effect.tryPromise({ try: call, catch: refuse })

/** `pay`: the transfer sealed here under the caller's idempotency key, or a fresh one it answers. */
const pay = Effect.fn("McpTools.pay")(function*(pps: Pps, params: Tool.Parameters<typeof Pay>) {
  const idempotencyKey = params.idempotency_key ?? newIdempotencyKey()
  const created = yield* attempt(() =>
    pps.transfers.create({
      to: params.to,
      amount: params.amount,
      ...(params.memo === undefined ? {} : { memo: params.memo }),
      ...(params.asset === undefined ? {} : { asset: params.asset })
    }, { idempotencyKey }), (error) => Refusals.ofPay(error, idempotencyKey))
  if (created.kind === "held") {
    const { held } = created
    return {
      kind: "held",
      idempotency_key: idempotencyKey,
      status: "pending_approval",
      transaction_id: held.transaction_id,
      expires_at: held.expires_at,
      to: held.to,
      asset: held.asset
    } as const
  }
  const { transfer } = created
  return {
    kind: "transfer",
    idempotency_key: idempotencyKey,
    status: transfer.status,
    transfer_id: transfer.transfer_id,
    to: transfer.to,
    asset: transfer.asset
  } as const
})

const getTransfer = Effect.fn("McpTools.getTransfer")(function*(pps: Pps, params: Tool.Parameters<typeof GetTransfer>) {
  return yield* attempt(() => pps.transfers.get(params.transfer_id), Refusals.ofRead)
})

/** The newest `limit` transfers; one more is asked for to tell whether older ones match too. */
const listTransfers = Effect.fn("McpTools.listTransfers")(function*(pps: Pps, params: Tool.Parameters<typeof ListTransfers>) {
  const limit = params.limit ?? listLimitDefault
  const listed = yield* attempt(async () => {
    const transfers: Array<PpsTypes.Transfer> = []
    for await (const transfer of pps.transfers.list({ pageSize: limit, ...(params.status === undefined ? {} : { status: params.status }) })) {
      transfers.push(transfer)
      if (transfers.length > limit) break
    }
    return transfers
  }, Refusals.ofRead)
  return { transfers: listed.slice(0, limit), has_more: listed.length > limit }
})

/** The agent's own policy (D42): its account id is the holder's, known since start. */
const getSpendPolicy = Effect.fn("McpTools.getSpendPolicy")(function*(pps: Pps, holder: McpEntry.Holder) {
  return yield* attempt(() => pps.agents.policy.get(holder.accountId), Refusals.ofRead)
})

/** The owner's decision, asked for every `approvalPollIntervalMs` until there is one or the wait is over. */
const waitForApproval = Effect.fn("McpTools.waitForApproval")(function*(pps: Pps, params: Tool.Parameters<typeof WaitForApproval>) {
  const deadline = (yield* Clock.currentTimeMillis) + (params.timeout_seconds ?? approvalWaitSecondsMax) * 1_000
  for (;;) {
    const held = yield* attempt(() => pps.agents.transactions.get(params.transaction_id), Refusals.ofRead)
    const now = yield* Clock.currentTimeMillis
    if (held.status !== "pending_approval" || now >= deadline) {
      return {
        outcome: held.status === "pending_approval" ? "still_held" : held.status,
        transaction_id: held.transaction_id,
        status: held.status,
        transfer_id: held.transfer_id,
        expires_at: held.expires_at,
        decided_at: held.decided_at
      } as const
    }
    yield* Effect.sleep(Duration.millis(Math.min(approvalPollIntervalMs, deadline - now)))
  }
})

/**
 * `fetch_paid` (D57): one GET through `@x402/fetch` with the scheme's client, whose per-request
 * and per-session maxima are both `max_amount` (one call pays for one request at most). A
 * refusal or a hold is the scheme's own sentence (the rule, or the held transaction and its
 * window).
 */
const fetchPaid = Effect.fn("McpTools.fetchPaid")(function*(pps: Pps, holder: McpEntry.Holder, params: Tool.Parameters<typeof FetchPaid>) {
  const paid = yield* Effect.try({
    try: () =>
      X402Client.paidFetch({
        payer: pps,
        maxPerRequest: params.max_amount,
        maxPerSession: params.max_amount,
        network: holder.mode === "live" ? X402Scheme.networks.main : X402Scheme.networks.test
      }),
    catch: (error) => new ToolRefused({ message: `not sent: ${error instanceof Error ? error.message : String(error)}` })
  })
  const response = yield* Effect.tryPromise({
    try: () => paid.fetch(params.url),
    catch: (error) => new ToolRefused({ message: `not served: ${error instanceof Error ? error.message.replace(/^Failed to create payment payload: /, "") : String(error)}` })
  })
  const text = yield* Effect.tryPromise({ try: () => response.text(), catch: () => new ToolRefused({ message: "the answer's body could not be read" }) })
  const transferId = paid.scheme.lastTransferId
  return {
    status: response.status,
    paid: transferId !== undefined,
    ...(transferId === undefined ? {} : { transfer_id: transferId }),
    content_type: response.headers.get("content-type") ?? "",
    body: text.slice(0, paidBodyCharsMax),
    truncated: text.length > paidBodyCharsMax
  }
})

const balance = Effect.fn("McpTools.balance")(function*(pps: Pps) {
  const read = yield* attempt(() => pps.balances.read(), Refusals.ofRead)
  return { balances: read.balances.map((entry) => ({ asset: entry.asset, amount: entry.amount })) }
})

/**
 * The handlers of an agent's tools.
 *
 * @since 0.1.0
 * @category layers
 */
export const agentHandlers = (settings: McpEntry.Settings): Layer.Layer<Tool.HandlersFor<typeof AgentTools.tools>> =>
  AgentTools.toLayer({
    pay: (params) => pay(settings.pps, params),
    get_transfer: (params) => getTransfer(settings.pps, params),
    list_transfers: (params) => listTransfers(settings.pps, params),
    get_spend_policy: () => getSpendPolicy(settings.pps, settings.holder),
    wait_for_approval: (params) => waitForApproval(settings.pps, params),
    fetch_paid: (params) => fetchPaid(settings.pps, settings.holder, params)
  })

/**
 * The handlers of an account's tools.
 *
 * @since 0.1.0
 * @category layers
 */
export const accountHandlers = (settings: McpEntry.Settings): Layer.Layer<Tool.HandlersFor<typeof AccountTools.tools>> =>
  AccountTools.toLayer({
    pay: (params) => pay(settings.pps, params),
    balance: () => balance(settings.pps),
    get_transfer: (params) => getTransfer(settings.pps, params),
    list_transfers: (params) => listTransfers(settings.pps, params),
    fetch_paid: (params) => fetchPaid(settings.pps, settings.holder, params)
  })
