/**
 * `POST /v1/transfers/prepare` (ext): the amount-free half of a client-sealed transfer. Step 1's
 * rules (resolve.ts), then a fresh transfer id, both parties' and the guardian's keys, and the
 * token that lets the create recognise this preparation (preparation.ts).
 *
 * @since 0.1.0
 */
import { Clock, DateTime, Effect } from "effect"
import { bytesToHex } from "viem"
import type { Principal } from "@pps/api/ApiKeys"
import type { PreparedTransfer as PreparedTransferResponse, PrepareTransferRequest } from "@pps/api/Transfers"
import { makeId } from "../platform/Ids.ts"
import type { TransfersContext } from "./context.ts"
import { makeToken, preparedTransferLifetimeMs } from "./preparation.ts"
import { assetOf, preparationFactsOf, resolveParties } from "./resolve.ts"
import { transferIdBytes32 } from "./submission.ts"

/**
 * Prepares a client-sealed transfer.
 *
 * @since 0.1.0
 */
export const prepare = Effect.fn("Transfers.prepare")(function*(
  context: TransfersContext,
  principal: Principal,
  body: PrepareTransferRequest
) {
  const asset = yield* assetOf(body.asset)
  const parties = yield* resolveParties(context, principal, body.to, asset, true)
  const nowMs = yield* Clock.currentTimeMillis
  const transferId = makeId("tr", nowMs)
  const facts = {
    ...(yield* preparationFactsOf(principal, asset, parties, transferId)),
    expiresAtMs: nowMs + preparedTransferLifetimeMs
  }
  return {
    transfer_id: transferId,
    binding_id: transferIdBytes32(transferId),
    chain_id: parties.chain.chainId,
    contract: parties.contract,
    asset,
    to: parties.recipient.display,
    recipient_address: parties.recipient.address,
    sender_key: facts.senderKey,
    recipient_key: facts.recipientKey,
    guardian_key: bytesToHex(context.guardianIdentity.encryptionKey),
    token: makeToken(context.preparationSecret, facts),
    expires_at: DateTime.formatIso(DateTime.makeUnsafe(facts.expiresAtMs))
  } satisfies PreparedTransferResponse
})
