/**
 * Handlers of the `transfers` group (D13-D18, and D26's 202 for a held agent transfer).
 *
 * @since 0.1.0
 */
import { Effect, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { bytesToHex } from "viem"
import { CurrentPrincipal, PublicApi } from "@pps/api/Api"
import { InvalidRequest, TransferNotFound } from "@pps/api/Errors"
import { pageLimitDefault } from "@pps/api/Page"
import * as Invariant from "../platform/Invariant.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import { Settlement } from "../settlement/Settlement.ts"
import { confidentialTokenOf } from "../settlement/Chains.ts"
import { TransferStatus } from "@pps/api/Transfers"
import { transferIdBytes32, Transfers } from "./Transfers.ts"
import { TransferStore } from "./TransferStore.ts"
import { publicAmountOnChain } from "./publicAmount.ts"


const isoTimestamp = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(\.\d{1,6})?)?(?:Z|[+-](\d{2}):(\d{2}))$/

/**
 * Whether a timestamp names a real instant: D16's shape, and fields that exist
 * on the calendar. `Date.parse` accepts 2026-02-30 (it rolls over to March) but
 * PostgreSQL refuses it, so the shape alone let a bad date reach SQL as a 500.
 * Year 0 and leap seconds are refused for the same reason.
 */
const isCalendarTimestamp = (text: string): boolean => {
  const match = isoTimestamp.exec(text)
  if (match === null) return false
  const field = (i: number) => Number(match[i] ?? "0")
  const [year, month, day, hour, minute, second] = [field(1), field(2), field(3), field(4), field(5), field(6)]
  const instant = new Date(0)
  // setUTCFullYear, unlike Date.UTC, does not read years 0-99 as 1900-1999.
  instant.setUTCFullYear(year, month - 1, day)
  instant.setUTCHours(hour, minute, second)
  return year >= 1 && instant.getUTCFullYear() === year && instant.getUTCMonth() === month - 1 &&
    instant.getUTCDate() === day && instant.getUTCHours() === hour && instant.getUTCMinutes() === minute &&
    instant.getUTCSeconds() === second && field(8) <= 14 && field(9) <= 59
}

/**
 * D16's query rules the contract's schema cannot state (limit, offset, status and
 * include_agents are decoded by it): timestamps that exist on the calendar.
 */
const parseListQuery = (query: {
  readonly limit?: number
  readonly offset?: number
  readonly status?: TransferStatus
  readonly from?: string
  readonly to?: string
  readonly include_agents?: boolean
}) =>
  Effect.gen(function*() {
    for (const name of ["from", "to"] as const) {
      const value = query[name]
      if (value !== undefined && !isCalendarTimestamp(value)) {
        return yield* Effect.fail(InvalidRequest.of(`\`${name}\` must be an ISO 8601 timestamp.`, { param: name }))
      }
    }
    return {
      limit: query.limit ?? pageLimitDefault,
      offset: query.offset ?? 0,
      status: query.status,
      createdAfter: query.from,
      createdBefore: query.to,
      includeAgents: query.include_agents === true
    }
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const TransfersHttpLive = HttpApiBuilder.group(PublicApi, "transfers", (handlers) =>
  Effect.gen(function*() {
    const transfers = yield* Transfers
    const store = yield* TransferStore
    const settlement = yield* Settlement
    return handlers
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const outcome = yield* transfers.create(principal, payload)
          // 201 with the transfer, or 202 with the held agent transaction (D26).
          return outcome._tag === "Transfer" ? outcome.transfer : outcome.transaction
        }))
      .handle("refund", ({ params, payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const outcome = yield* transfers.refund(principal, params.transfer_id, payload)
          return outcome._tag === "Transfer" ? outcome.transfer : outcome.transaction
        }))
      .handle("prepare", ({ payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          return yield* transfers.prepare(principal, payload)
        }))
      .handle("get", ({ params }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          return yield* transfers.get(principal, params.transfer_id)
        }))
      .handle("list", ({ query }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const parsed = yield* parseListQuery(query)
          const rows = yield* store.list({ accountId: principal.accountId, mode: principal.mode, ...parsed }).pipe(
            Unavailable.database("Transfers.list"),
            Unavailable.answerServiceUnavailable
          )
          return {
            data: rows.slice(0, parsed.limit).map((t) => transfers.record(t, principal.accountId)),
            limit: parsed.limit,
            offset: parsed.offset,
            has_more: rows.length > parsed.limit
          }
        }))
      .handle("sealed", ({ params }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const t = yield* store.findForAccount(params.transfer_id, principal.accountId, principal.mode).pipe(
            Unavailable.database("Transfers.sealed"),
            Unavailable.answerServiceUnavailable,
            Effect.flatMap(Option.match({ onNone: () => Effect.fail(TransferNotFound.of()), onSome: Effect.succeed }))
          )
          const boxes = yield* store.boxes(t.transfer_id).pipe(
            Unavailable.database("Transfers.sealed"),
            Unavailable.answerServiceUnavailable,
            Effect.flatMap(Invariant.some("a transfer's row holds its boxes"))
          )
          const chain = yield* Invariant.some("a transfer's mode has a chain (transfers are created only in a mode with one)")(
            settlement.chain(t.mode)
          )
          // An owner reads its agent's copy: the agent's boxes are sealed to the owner's key.
          const role = transfers.record(t, principal.accountId).direction === "sent" ? "sender" as const : "recipient" as const
          const ciphertext = JSON.parse(t.ciphertext) as { commitment: string; fromHandle: string; toHandle?: string }
          const box = role === "sender" ? boxes.senderBox : boxes.recipientBox
          const contract = confidentialTokenOf(chain, t.asset)
          // D62: a standard transfer's amount is public once it is on chain; it is read back from there.
          const publicAmount = t.confidential || t.status !== "confirmed" || t.tx_hash === null
            ? null
            : yield* publicAmountOnChain(chain, { transferId: t.transfer_id, asset: t.asset, contract, txHash: t.tx_hash }).pipe(
              Unavailable.answerServiceUnavailable,
              Effect.flatMap(Invariant.some("a confirmed standard transfer's receipt holds its PublicTransfer event"))
            )
          return {
            transfer_id: t.transfer_id,
            role,
            asset: t.asset,
            chain_id: chain.chainId,
            contract,
            binding_id: transferIdBytes32(t.transfer_id),
            sealed_note: bytesToHex(box),
            commitment: ciphertext.commitment,
            handle: role === "sender" ? ciphertext.fromHandle : ciphertext.toHandle ?? null,
            public_amount: publicAmount
          }
        }))
  }))

