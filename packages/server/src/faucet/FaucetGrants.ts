/**
 * The test faucet's grants, each exactly once (D36).
 *
 * A grant is recorded, and bound to the request's idempotency key, before anything is
 * sent to the chain; its transaction hash is written once mined. A retry whose first
 * request was cut off finds the record: with its hash, it answers with it; without, it
 * looks on chain for the faucet's shield of that amount into that wallet since the
 * grant was recorded (a shield claimed by no other grant) and only when there is none
 * does it grant. The guardian books the credit from the chain's `Shielded` event
 * (D39), so a grant mined by a process that then died is still credited.
 *
 * What this cannot cover: on an external test chain, a shield still waiting in the
 * node's mempool when its process died, and mined only after a retry looked for it,
 * would be a second grant of test USDG (docs/reliability.md). The embedded chain stops
 * with the process that sent to it, so nothing of the kind is left waiting there.
 *
 * @since 0.2.0
 */
import * as Unavailable from "../platform/Unavailable.ts"
import { answerServiceUnavailable } from "../platform/Unavailable.ts"
import { Clock, Context, DateTime, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { type Address, getAddress, type Hash } from "viem"
import type { Principal } from "@pps/api/ApiKeys"
import { ServiceUnavailable } from "@pps/api/Errors"
import { OperationReplay } from "../platform/IdempotentOperations.ts"
import { makeId } from "../platform/Ids.ts"
import { Lanes } from "../platform/Lanes.ts"
import { Faucet } from "../settlement/Faucet.ts"
import { formatAmount } from "@pps/api/Transfers"

/**
 * What a grant answers.
 *
 * @since 0.2.0
 * @category models
 */
export interface GrantRecord {
  readonly asset: "USDG"
  readonly amount: string
  readonly tx_hash: string
}

/**
 * A grant as the list answers it (D50).
 *
 * @since 0.9.0
 * @category models
 */
export interface ListedGrant {
  readonly grant_id: string
  readonly asset: "USDG"
  readonly amount: string
  readonly tx_hash: string
  readonly created_at: string
}

/**
 * A page of the account's grants, newest first.
 *
 * @since 0.9.0
 * @category models
 */
export interface GrantPage {
  readonly data: ReadonlyArray<ListedGrant>
  readonly limit: number
  readonly offset: number
  readonly has_more: boolean
}

interface StoredGrant {
  readonly grant_id: string
  readonly wallet_address: string
  readonly amount: string
  readonly from_block: string
  readonly tx_hash: string | null
}

/**
 * A page of the account's grants. A grant without a hash was recorded but is not known to be on
 * chain (its process died before sending): a retry of its request finishes it, and it is listed
 * then.
 */
const listGrants = Effect.fn("FaucetGrants.list")(function*(
  sql: SqlClient.SqlClient,
  principal: Principal,
  page: { readonly limit: number; readonly offset: number }
) {
  // One more than asked tells whether there is a next page.
  const rows = yield* sql<{ readonly grant_id: string; readonly amount: string; readonly tx_hash: string; readonly created_at: Date | string }>`
    SELECT grant_id, amount, tx_hash, created_at FROM faucet_grants
    WHERE account_id = ${principal.accountId} AND tx_hash IS NOT NULL
    ORDER BY created_at DESC, grant_id DESC
    LIMIT ${page.limit + 1} OFFSET ${page.offset}`.pipe(Unavailable.database("FaucetGrants.list"), answerServiceUnavailable)
  const data = rows.slice(0, page.limit).map((row): ListedGrant => ({
    grant_id: row.grant_id,
    asset: "USDG",
    amount: formatAmount(BigInt(row.amount), "USDG"),
    tx_hash: row.tx_hash,
    created_at: DateTime.formatIso(DateTime.makeUnsafe(new Date(row.created_at)))
  }))
  return { data, limit: page.limit, offset: page.offset, has_more: rows.length > page.limit }
})

/**
 * @since 0.2.0
 * @category services
 */
export class FaucetGrants extends Context.Service<FaucetGrants, {
  /** Grants `amount` base units of test USDG to the account's wallet; answers once mined. */
  readonly grant: (principal: Principal, wallet: Address, amount: bigint) => Effect.Effect<GrantRecord, ServiceUnavailable>
  /** The account's grants sent to the chain (those with a hash), newest first (D50). */
  readonly list: (principal: Principal, page: { readonly limit: number; readonly offset: number }) => Effect.Effect<GrantPage, ServiceUnavailable>
}>()("server/faucet/FaucetGrants") {
  static readonly layer = Layer.effect(
    FaucetGrants,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const faucet = yield* Faucet
      const operations = yield* OperationReplay
      const lanes = yield* Lanes

      const unavailable = (error: unknown) =>
        Effect.logError("faucet grant failed", error).pipe(Effect.andThen(Effect.fail(ServiceUnavailable.of())))

      const answer = (amount: bigint, txHash: string): GrantRecord => ({
        asset: "USDG",
        amount: formatAmount(amount, "USDG"),
        tx_hash: txHash
      })

      /** Sends the grant and records its hash (the record exists and has none). */
      const execute = (grantId: string, wallet: Address, amount: bigint) =>
        Effect.gen(function*() {
          const txHash = yield* faucet.grantUsdg(wallet, amount)
          yield* sql`UPDATE faucet_grants SET tx_hash = ${txHash} WHERE grant_id = ${grantId}`
          return txHash
        })

      /** A recorded grant, finished: its hash, the faucet's matching shield found on chain, or a grant now. */
      const finish = (grantId: string) =>
        lanes.alone(grantId, Effect.gen(function*() {
          const rows = yield* sql<StoredGrant>`
            SELECT grant_id, wallet_address, amount, from_block, tx_hash FROM faucet_grants WHERE grant_id = ${grantId}`
          const grant = rows[0]!
          const amount = BigInt(grant.amount)
          if (grant.tx_hash !== null) return answer(amount, grant.tx_hash)
          const wallet = getAddress(grant.wallet_address)
          const mined = yield* faucet.grantsSince(wallet, amount, BigInt(grant.from_block))
          for (const txHash of mined) {
            const claimed = yield* sql`
              UPDATE faucet_grants SET tx_hash = ${txHash}
              WHERE grant_id = ${grantId} AND tx_hash IS NULL
                AND NOT EXISTS (SELECT 1 FROM faucet_grants WHERE tx_hash = ${txHash})
              RETURNING 1 AS claimed`
            if (claimed.length > 0) return answer(amount, txHash)
          }
          return answer(amount, yield* execute(grantId, wallet, amount))
        })).pipe(Effect.catch(unavailable))

      yield* operations.register("faucet_grant", (grantId) =>
        finish(grantId).pipe(
          Effect.map((body) => ({ status: 200, body })),
          // D1's body of the 503 the first request would have answered; the envelope adds the request id.
          Effect.catch((error) => Effect.succeed({ status: 503, body: { error: error.error } }))
        ))

      return FaucetGrants.of({
        list: (principal, page) => listGrants(sql, principal, page),
        grant: (principal, wallet, amount) =>
          Effect.gen(function*() {
            const nowMs = yield* Clock.currentTimeMillis
            const grantId = makeId("grant", nowMs)
            const fromBlock = yield* faucet.blockNumber.pipe(Effect.catch(unavailable))
            yield* sql.withTransaction(Effect.gen(function*() {
              yield* sql`
                INSERT INTO faucet_grants (grant_id, account_id, wallet_address, amount, from_block, created_at)
                VALUES (${grantId}, ${principal.accountId}, ${wallet}, ${amount.toString()}, ${fromBlock.toString()},
                        ${DateTime.formatIso(DateTime.makeUnsafe(nowMs))})`
              yield* operations.bind("faucet_grant", grantId)
            })).pipe(Unavailable.database("FaucetGrants.grant"), answerServiceUnavailable)
            const txHash: Hash = yield* execute(grantId, wallet, amount).pipe(Effect.catch(unavailable))
            return answer(amount, txHash)
          })
      })
    })
  )
}
