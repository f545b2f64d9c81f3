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
import { Cause, Clock, Effect, Exit, Option } from "effect"
import type { SqlError } from "effect/sql"
import { type AuthorizeOutcome, type AuthorizeRequest, type AuthorizeResult, GuardianError, Refused } from "../Domain.ts"
import type { RowHints } from "../internal/store.ts"
import { decide } from "./Decide.ts"
import { requestDigest } from "./Digests.ts"
import { resolveEarlierAttestation } from "./Expiry.ts"
import { storageFailure } from "./Failures.ts"
import type { GuardianContext } from "./GuardianContext.ts"
import { type RotationHeld, rotationHold, rotationUnavailable } from "./KeyRotation.ts"
import { checkKeys, noKeyCheck } from "./PartyKeys.ts"
import { prepare } from "./Prepare.ts"
import type { TransferIdRace } from "./Reserve.ts"

/**
 * @since 0.5.0
 * @category steps
 */
export const authorize = Effect.fn("Guardian.authorize")(function*(context: GuardianContext, request: AuthorizeRequest) {
  const queued = yield* beforeDecision(context, request)
  return yield* answerOf(context, queued, yield* Effect.exit(context.group.run(queued.unit, queued.hint)))
})

/**
 * One sender's transfers of an actor's turn (D73), decided in their order within the next groups:
 * each sees the reservations of the approved ones before it; a refused or held one reserves
 * nothing and does not stop the ones after it. Each answer is its own: a request that fails (a
 * rotation hold, storage, a defect) fails alone. The work before the decision (the note opened,
 * the keys checked) is done for every request first, so that no chain read splits the turn at the
 * guardian. A request whose transfer id a twin decided first is answered from the twin's row after
 * the turn (out of the turn's order, reserving nothing).
 *
 * @since 0.11.0
 * @category steps
 */
export const authorizeMany = Effect.fn("Guardian.authorizeMany")(function*(
  context: GuardianContext,
  requests: ReadonlyArray<AuthorizeRequest>
) {
  // Prepared side by side (a key check may wait on the chain); queued below in the requests' order.
  const prepared = yield* Effect.forEach(requests, (request) => Effect.exit(beforeDecision(context, request)), { concurrency: prepareConcurrency })
  const ready = prepared.flatMap((exit) => Exit.isSuccess(exit) ? [exit.value] : [])
  const decided = yield* context.group.runAll(ready)
  let next = 0
  return yield* Effect.forEach(prepared, (exit): Effect.Effect<AuthorizeOutcome> => {
    const answer: Effect.Effect<AuthorizeOutcome, GuardianError> = Exit.isFailure(exit)
      ? Effect.failCause(exit.cause)
      : answerOf(context, exit.value, decided[next++]!)
    return Effect.catchCause(answer, ownFailure)
  })
})

/** Requests of a turn prepared at once: bounds the chain reads a turn starts together. */
const prepareConcurrency = 8

/**
 * A request's own failure as its answer: its typed failure, or, for a defect or interruption
 * (its unit committed nothing), logged here and answered as unavailable, so that one request's
 * fault never fails the others' answers.
 */
const ownFailure = (cause: Cause.Cause<GuardianError>): Effect.Effect<AuthorizeOutcome> => {
  const error = Cause.findErrorOption(cause)
  if (Option.isSome(error)) return Effect.succeed(error.value)
  return Effect.logError("authorize failed unexpectedly", cause).pipe(Effect.as(unexpected))
}

const unexpected = new GuardianError({ reason: "unavailable", message: "the guardian could not decide this transfer", retryable: true })

/** A request ready for its decision unit: the unit, what it locks, and the request. */
interface Queued {
  readonly request: AuthorizeRequest
  readonly unit: Effect.Effect<AuthorizeResult | RotationHeld, TransferIdRace | SqlError.SqlError>
  readonly hint: RowHints | undefined
}

/**
 * Everything before the decision: the rotation hold's early answer, the stateless preparation,
 * the parties' keys (may read the chain), an approval's earlier attestation (D45), the unit.
 */
const beforeDecision = Effect.fnUntraced(function*(context: GuardianContext, request: AuthorizeRequest) {
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
  return { request, unit: decide(context, request, prepared, keyCheck, digest, nowMs), hint } satisfies Queued
})

/** The unit's outcome as the answer: a twin that committed first answers from its row; a rotation hold is unavailable. */
const answerOf = (context: GuardianContext, queued: Queued, outcome: Exit.Exit<AuthorizeResult | RotationHeld, TransferIdRace | SqlError.SqlError>) =>
  Effect.gen(function*() {
    const { hint, request, unit } = queued
    const result = yield* Effect.suspend(() => outcome).pipe(
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
