/**
 * `authorize`, the decision path: prepare the request without state (Prepare.ts: validation,
 * the note opened, the ciphertext and the attestation), check the parties' keys (PartyKeys.ts:
 * may read the chain, once per party), resolve an owner's approval's earlier attestation when it
 * is asked under a new deadline (Expiry.ts: may read the chain, D45), then decide it under the
 * sender's lock in the next group's transaction (Decide.ts: replay, limits, balance, hold,
 * reserve, record), answered once that transaction committed. No SQL transaction spans a chain read.
 *
 * @since 0.5.0
 */
import { Clock, Effect } from "effect"
import { type AuthorizeRequest, Refused } from "../Domain.ts"
import type { RowHints } from "../internal/store.ts"
import { decide } from "./Decide.ts"
import { requestDigest } from "./Digests.ts"
import { resolveEarlierAttestation } from "./Expiry.ts"
import { storageFailure } from "./Failures.ts"
import type { GuardianContext } from "./GuardianContext.ts"
import { rotationHold, rotationUnavailable } from "./KeyRotation.ts"
import { checkKeys, noKeyCheck } from "./PartyKeys.ts"
import { prepare } from "./Prepare.ts"

/**
 * @since 0.5.0
 * @category steps
 */
export const authorize = Effect.fn("Guardian.authorize")(function*(context: GuardianContext, request: AuthorizeRequest) {
  const nowMs = yield* Clock.currentTimeMillis
  // D55: no transfer to or from an account while its key rotation is being mined (the early
  // answer; the decision unit checks again, race-free).
  yield* rotationHold(context, request, nowMs)
  const prepared = prepare(request, context.keys, nowMs, context.timing)
  // Stateless refusals come first; the key check may read the chain (once per party, then cached).
  const keyCheck = typeof prepared === "string" ? noKeyCheck(context.partyKeys) : yield* checkKeys(context, request)
  // An owner's approval under a new deadline: an earlier attestation past its deadline is resolved first (D45).
  if (request.agent?.approved === true && typeof prepared !== "string") yield* resolveEarlierAttestation(context, request, nowMs)
  const digest = requestDigest(context.keys.atRestKey, request)
  // A request refused before any lock names no row: its unit reads nothing under a lock.
  const hint: RowHints | undefined = typeof prepared === "string" || typeof keyCheck === "string"
    ? undefined
    : {
      balances: [prepared.sender],
      decisions: [{ transferId: request.transferId.toLowerCase(), sender: prepared.sender, nonce: request.nonce }]
    }
  const unit = decide(context, request, prepared, keyCheck, digest, nowMs)
  const result = yield* context.group.run(unit, hint).pipe(
    // The twin committed first: its row now answers.
    Effect.catchTag("TransferIdRace", () => context.group.run(unit, hint)),
    Effect.catchTag("TransferIdRace", () =>
      Effect.succeed(new Refused({ transferId: request.transferId.toLowerCase(), reason: "transfer_id_reused" }))),
    Effect.mapError(storageFailure)
  )
  if (result._tag === "RotationHeld") return yield* Effect.fail(rotationUnavailable())
  yield* Effect.logDebug("authorize decided").pipe(
    Effect.annotateLogs({ transfer_id: request.transferId, decision: result._tag })
  )
  return result
})
