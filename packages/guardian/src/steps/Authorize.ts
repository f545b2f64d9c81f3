/**
 * `authorize` and `authorizeMany`, the decision path: prepare each request without state
 * (Prepare.ts: validation, the note opened, the ciphertext and the attestation), check the
 * parties' keys (PartyKeys.ts: may read the chain, once per party), resolve an owner's approval's
 * earlier attestation when it is asked under a new deadline (Expiry.ts: may read the chain, D45),
 * then decide it under the sender's lock in the next group's transaction (Decide.ts: replay,
 * limits, balance, hold, reserve, record), answered once that transaction committed. No SQL
 * transaction spans a chain read.
 *
 * `authorizeMany` is a sender's actor turn (D63): its units are decided in the order given, next
 * to each other in one group, each seeing the reservations of the approved ones before it. A
 * refused or held unit reserves nothing, so it does not stand in the way of the units after it;
 * each unit is idempotent by its transfer id, as a lone `authorize` is.
 *
 * @since 0.5.0
 */
import { Clock, Effect, Exit } from "effect"
import type { SqlError } from "effect/sql"
import { type AuthorizeOutcome, type AuthorizeRequest, type AuthorizeResult, Refused } from "../Domain.ts"
import type { RowHints } from "../internal/store.ts"
import { decide } from "./Decide.ts"
import { requestDigest } from "./Digests.ts"
import { resolveEarlierAttestation } from "./Expiry.ts"
import { storageFailure } from "./Failures.ts"
import type { GuardianContext } from "./GuardianContext.ts"
import { rotationHold } from "./KeyRotation.ts"
import { checkKeys } from "./PartyKeys.ts"
import { prepare } from "./Prepare.ts"
import type { TransferIdRace } from "./Reserve.ts"

/** One request's unit for the group committer, and the rows it will lock. */
interface Unit {
  readonly request: AuthorizeRequest
  readonly unit: Effect.Effect<AuthorizeResult, TransferIdRace | SqlError.SqlError>
  readonly hint: RowHints | undefined
}

/** Everything before the lock: the stateless checks, the keys, an approval's earlier attestation. */
const unitOf = Effect.fnUntraced(function*(context: GuardianContext, request: AuthorizeRequest, nowMs: number) {
  // D55: no transfer to or from an account while its key rotation is being mined.
  yield* rotationHold(context, request, nowMs)
  const prepared = prepare(request, context.keys, nowMs, context.timing)
  // Stateless refusals come first; the key check may read the chain (once per party, then cached).
  const keyCheck = typeof prepared === "string" ? { pins: [] } : yield* checkKeys(context, request)
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
  return { request, unit: decide(context, request, prepared, keyCheck, digest, nowMs), hint } satisfies Unit
})

/** A unit's outcome: its twin committed first (its row now answers, so once more), or a storage failure. */
const outcomeOf = (context: GuardianContext, unit: Unit, exit: Exit.Exit<AuthorizeResult, TransferIdRace | SqlError.SqlError>) =>
  Effect.suspend(() => exit).pipe(
    Effect.catchTag("TransferIdRace", () => context.group.run(unit.unit, unit.hint)),
    Effect.catchTag("TransferIdRace", () =>
      Effect.succeed(new Refused({ transferId: unit.request.transferId.toLowerCase(), reason: "transfer_id_reused" }))),
    Effect.mapError(storageFailure),
    Effect.tap((result) =>
      Effect.logDebug("authorize decided").pipe(
        Effect.annotateLogs({ transfer_id: unit.request.transferId, decision: result._tag })
      )
    )
  )

/**
 * Decides `requests` in the order given, in one group; each answered with its own outcome.
 *
 * @since 0.9.0
 * @category steps
 */
export const authorizeMany = Effect.fn("Guardian.authorizeMany")(function*(
  context: GuardianContext,
  requests: ReadonlyArray<AuthorizeRequest>
) {
  const nowMs = yield* Clock.currentTimeMillis
  const units = yield* Effect.forEach(requests, (request) => Effect.result(unitOf(context, request, nowMs)), { concurrency: "unbounded" })
  const queued = units.flatMap((unit) => (unit._tag === "Success" ? [unit.success] : []))
  const exits = yield* context.group.runMany(queued)
  let next = 0
  return yield* Effect.forEach(units, (unit): Effect.Effect<AuthorizeOutcome> => {
    if (unit._tag === "Failure") return Effect.succeed(unit.failure)
    const exit = exits[next++]!
    return Effect.result(outcomeOf(context, unit.success, exit)).pipe(
      Effect.map((result): AuthorizeOutcome => (result._tag === "Success" ? result.success : result.failure))
    )
  })
})

/**
 * One request, decided as a group of its own units (an owner's approval, tests, older clients).
 *
 * @since 0.5.0
 * @category steps
 */
export const authorize = Effect.fn("Guardian.authorize")(function*(context: GuardianContext, request: AuthorizeRequest) {
  const nowMs = yield* Clock.currentTimeMillis
  const unit = yield* unitOf(context, request, nowMs)
  return yield* outcomeOf(context, unit, yield* Effect.exit(context.group.run(unit.unit, unit.hint)))
})
