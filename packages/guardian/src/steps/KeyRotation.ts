/**
 * D55: an account's encryption key replaced and its balance re-encrypted to the new key. The
 * guardian is the one party that knows the balance without the old key, so it makes the new
 * ciphertext and attests it; the contract (`rotateEncryptionKey`) also wants the account's own
 * signature over the same `KeyRotation` digest and a proof of possession of the new key, so the
 * guardian alone replaces nothing.
 *
 * The step refuses (`KeyRotationBusy`, retry later) while anything could change the balance
 * under the rotation: an open reservation of the account (an attested debit or credit not yet
 * resolved), or books that do not match the chain (a credit not yet booked). The attestation
 * binds the balance it read (`previousBalanceDigest`): if the balance changes before it is mined,
 * the contract refuses it, and nothing is lost.
 *
 * Once attested, the account is held until its latest attestation is reported mined (`ForgetKey`),
 * or reported failed and the chain shows it can never be mined (`stillMinable`: a revert for want
 * of gas is not such a proof), or its deadline plus the reservation margin passes: a transfer to
 * or from it attested meanwhile and mined after the rotation would add a handle under the old key
 * to the new balance. One hold covers all of an account's attestations (a retry, or two requests
 * at once, attest again while it stands), so it remembers the latest: a report on an earlier one
 * lifts it only if the chain shows the latest dead too (`holdStays`). The hold is decided where
 * reservations are: the check that no reservation is open and the hold's row are one unit of the
 * group committer, in its transaction, and every decision checks the hold inside its own unit
 * (Decide.ts). The in-memory copy (`rotationsPending`) is set before the hold's unit is queued, so
 * a decision unit that runs after it sees the hold, and one that ran before it left a reservation the unit sees: a
 * reservation and a hold never both stand. The row (`guardian_key_rotation_holds`) is read back
 * at start-up, so a restart inside the window keeps the hold. One guardian serves at a time
 * (Lease.ts), so this process's committer is the one place decisions are made.
 *
 * @since 0.12.0
 */
import { TypedData } from "@pps/contracts"
import { ElGamal, EncryptionKey, Point } from "@pps/crypto"
import { Clock, Data, Effect } from "effect"
import { bytesToHex, getAddress, type Hex, hexToBytes } from "viem"
import { type ForgetKeyRequest, GuardianError, KeyRotationBusy, KeyRotationNotNeeded, type KeyRotationRequest } from "../Domain.ts"
import * as Invariant from "../internal/Invariant.ts"
import type { AccountRef, RotationAttestation } from "../internal/store.ts"
import { noEndpoint, storage } from "./Failures.ts"
import { type GuardianContext, refFor } from "./GuardianContext.ts"
import { forgetKnownKey, refKeyOf, repinHandlesDigest, settleRepins, storedBalanceDigest as balanceDigestOf } from "./PartyKeys.ts"

/** The EVM words of a 64-byte point encoding. */
const wordsOf = (point: Uint8Array) => ({ x: BigInt(bytesToHex(point.subarray(0, 32))), y: BigInt(bytesToHex(point.subarray(32, 64))) })

/**
 * What a decision unit answers for a party under a rotation hold: nothing is decided, and
 * `authorize` answers a retryable outage (503 at the API) once the group committed.
 *
 * @since 0.13.0
 * @category models
 */
export class RotationHeld extends Data.TaggedClass("RotationHeld")<{}> {}

/**
 * The answer to a transfer held back by a rotation.
 *
 * @since 0.13.0
 * @category constructors
 */
export const rotationUnavailable = () =>
  new GuardianError({ reason: "unavailable", message: "a party's encryption key is being rotated; retry shortly", retryable: true })

/** The instant a live hold of `key` lasts until, or undefined (none, or past it: then forgotten). */
const liveHold = (context: GuardianContext, key: string, nowMs: number): number | undefined => {
  const until = context.rotationsPending.get(key)?.untilMs
  if (until === undefined || until >= nowMs) return until
  context.rotationsPending.delete(key)
  return undefined
}

/**
 * Whether either party of a transfer is held by a rotation at `nowMs`. A plain read of the
 * in-memory copy, cheap enough for every decision unit.
 *
 * @since 0.13.0
 * @category steps
 */
export const heldByRotation = (
  context: GuardianContext,
  request: { readonly chainId: bigint; readonly contract: string; readonly from: string; readonly to: string },
  nowMs: number
): boolean => {
  if (context.rotationsPending.size === 0) return false
  return [request.from, request.to].some((party) =>
    liveHold(context, refKeyOf(refFor(request.chainId, request.contract, party)), nowMs) !== undefined
  )
}

/**
 * Refuses, as a retryable outage, an authorization naming an account under a rotation hold: the
 * early answer, before the chain is read. The decision unit checks again (Decide.ts): that check
 * is the one that cannot race the hold's placement.
 *
 * @since 0.12.0
 * @category steps
 */
export const rotationHold = (
  context: GuardianContext,
  request: { readonly chainId: bigint; readonly contract: string; readonly from: string; readonly to: string },
  nowMs: number
) => Effect.suspend(() => heldByRotation(context, request, nowMs) ? Effect.fail(rotationUnavailable()) : Effect.void)

/**
 * The hold's unit, run by the group committer after every decision unit queued before it: no
 * reservation of the account may be open (from it or to it), and then the hold's row is written in
 * the same transaction. False: a reservation is open. Re-runnable: its only writes are SQL.
 */
const placeHold = (context: GuardianContext, ref: AccountRef, untilMs: number, nowMs: number) =>
  Effect.gen(function*() {
    const open = yield* context.store.openReservationsOf(ref, 1)
    if (open.length > 0) return false
    yield* context.store.holdForRotation(ref, untilMs, nowMs)
    return true
  })

/**
 * Lifts the account's hold, in memory and in its row. A row that stays (storage failed) only
 * keeps the account's transfers waiting until its instant: the safe way to fail.
 */
const liftHold = (context: GuardianContext, ref: AccountRef) =>
  Effect.sync(() => context.rotationsPending.delete(refKeyOf(ref))).pipe(
    Effect.andThen(context.store.liftRotationHold(ref)),
    Effect.catch((error) => Effect.logWarning("key rotation: the hold's row was not deleted; it lapses at its instant", error))
  )

/**
 * @since 0.12.0
 * @category steps
 */
export const keyRotation = Effect.fn("Guardian.keyRotation")(function*(context: GuardianContext, request: typeof KeyRotationRequest.Type) {
  const account = getAddress(request.account)
  const contract = getAddress(request.contract)
  const ref = refFor(request.chainId, contract, account)
  if (!context.chain.knows(request.chainId)) return yield* Effect.fail(noEndpoint(request.chainId))
  const parsed = EncryptionKey.parsePublicKey(hexToBytes(request.newKey as Hex))
  if (!parsed.ok) return yield* new KeyRotationBusy({ account: request.account, reason: "new_key_invalid" })
  const holdKey = refKeyOf(ref)
  // Held as long as the attestation can be mined: its deadline, plus the margin reservations keep
  // for a chain whose clock runs behind this one.
  const untilMs = (Number(request.deadline) + context.timing.reservationMarginSeconds) * 1000
  return yield* context.accountLane.alone(ref, Effect.gen(function*() {
    yield* mayRotate(context, request, ref)
    const nowMs = yield* Clock.currentTimeMillis
    // An earlier attestation of the account may still be mined: a failure here keeps its hold.
    const earlier = liveHold(context, holdKey, nowMs)
    // In memory first, then the unit: a decision unit after it sees the hold, one before it left a reservation it sees.
    const latest = context.rotationsPending.get(holdKey)?.latest
    context.rotationsPending.set(holdKey, { untilMs: Math.max(earlier ?? 0, untilMs), ...(latest === undefined ? {} : { latest }) })
    return yield* Effect.gen(function*() {
      const placed = yield* context.group.run(placeHold(context, ref, untilMs, nowMs)).pipe(storage)
      if (!placed) return yield* new KeyRotationBusy({ account: request.account, reason: "reservations_open" })
      const attested = yield* attest(context, request, ref, parsed.value)
      yield* rememberLatest(context, ref, { nonce: request.nonce, previousBalanceDigest: attested.previousBalanceDigest, deadline: request.deadline })
      // Recorded before it is answered: the pin moves once the chain holds these very handles.
      if (request.keyOwner !== undefined) {
        const handlesDigest = repinHandlesDigest(hexToBytes(attested.ownerHandle as Hex), hexToBytes(attested.guardianHandle as Hex))
        const repin = { handlesDigest, newKey: request.newKey.toLowerCase(), untilMs }
        yield* storage(context.store.recordRepin(ref, repin, nowMs))
      }
      return attested
    }).pipe(
      // Nothing attested (busy, a chain or storage failure): the account's transfers flow again.
      Effect.onError(() => earlier === undefined ? liftHold(context, ref) : Effect.void)
    )
  }))
})

/**
 * Whose balance may be re-encrypted. Without `keyOwner` (D55), an account with a key registered
 * on chain: the contract then wants a proof of possession of the new key. With it (D68), an
 * unregistered agent wallet, to its owner's key only (`agentMayRotate`). Either way: else an api
 * tier could re-encrypt an unregistered wallet to any key it holds and submit it with no proof.
 * Registrations are never removed, so the answer cannot change before the rotation is mined.
 */
const mayRotate = Effect.fnUntraced(function*(context: GuardianContext, request: typeof KeyRotationRequest.Type, ref: AccountRef) {
  const registered = yield* context.chain.encryptionKeyOf(request.chainId, getAddress(request.contract), getAddress(request.account))
  if (request.keyOwner === undefined) {
    if (registered === undefined) return yield* new KeyRotationBusy({ account: request.account, reason: "account_not_registered" })
    return
  }
  if (registered !== undefined) return yield* new KeyRotationBusy({ account: request.account, reason: "account_registered" })
  // D68: an agent wallet's balance is encrypted to its pinned key, which follows its owner's.
  yield* agentMayRotate(context, request, ref, request.keyOwner)
})

/**
 * The attestation just made becomes the hold's latest, row first, before it is answered: a report
 * on an earlier one then lifts nothing while this one can be mined. Not recorded (storage), it is
 * not answered, so nobody holds it.
 */
const rememberLatest = (context: GuardianContext, ref: AccountRef, attestation: RotationAttestation) =>
  storage(context.store.recordRotationAttestation(ref, attestation)).pipe(
    Effect.andThen(Effect.sync(() => {
      const key = refKeyOf(ref)
      const hold = context.rotationsPending.get(key)
      const deadline = hold?.latest === undefined || hold.latest.deadline < attestation.deadline ? attestation.deadline : hold.latest.deadline
      if (hold !== undefined) context.rotationsPending.set(key, { untilMs: hold.untilMs, latest: { ...attestation, deadline } })
    }))
  )

/**
 * D68: whether an agent wallet's balance may be re-encrypted to `request.newKey`. An earlier
 * rotation seen mined moves the pin first, so a retry after one finds its key current. The new
 * key must be the one registered on chain for `keyOwner` now (read afresh): the guardian does
 * not know who owns an agent, but it re-encrypts an agent's balance only to a key whose holder
 * proved possession to the contract and whose wallet consented to it, as its owner's rotation
 * did just before. With no pin there is nothing to rotate: the agent's next transfer pins the
 * key the server then sends.
 */
const agentMayRotate = Effect.fnUntraced(function*(
  context: GuardianContext,
  request: typeof KeyRotationRequest.Type,
  ref: AccountRef,
  keyOwner: string
) {
  yield* settleRepins(context, ref)
  const pinned = yield* storage(context.store.pinnedKey(ref))
  const newKey = request.newKey.toLowerCase()
  if (pinned === undefined) return yield* new KeyRotationNotNeeded({ account: request.account, reason: "no_pinned_key" })
  if (pinned === newKey) return yield* new KeyRotationNotNeeded({ account: request.account, reason: "key_current" })
  const ownersKey = yield* context.chain.encryptionKeyOf(request.chainId, getAddress(request.contract), getAddress(keyOwner))
  if (ownersKey === undefined || bytesToHex(ownersKey).toLowerCase() !== newKey) {
    return yield* new KeyRotationBusy({ account: request.account, reason: "new_key_not_owners" })
  }
})

/** The new ciphertext and the guardian's signature, once the books are seen to match the chain. */
const attest = Effect.fnUntraced(function*(
  context: GuardianContext,
  request: typeof KeyRotationRequest.Type,
  ref: AccountRef,
  newKey: EncryptionKey.PublicKey
) {
  const account = getAddress(request.account)
  const contract = getAddress(request.contract)
  const head = yield* context.chain.head(request.chainId)
  const onChain = yield* context.chain.encryptedBalance(request.chainId, contract, account, head.blockNumber)
  const balance = yield* storage(context.store.readBalance(ref))
  const commitment = Point.parse(onChain.commitment, { allowIdentity: true })
  const handle = Point.parse(onChain.guardianHandle, { allowIdentity: true })
  const matched = balance.confirmed >= 0n && commitment.ok && handle.ok &&
    ElGamal.matches(context.keys.encryption.secretKey, commitment.value, handle.value, balance.confirmed)
  if (!matched) return yield* new KeyRotationBusy({ account: request.account, reason: "books_behind_chain" })
  // The balance under a fresh opening, for the new key and the guardian's own (the contract's order).
  const ciphertext = ElGamal.encryptWith(ElGamal.newOpening(balance.confirmed), [newKey, context.keys.encryption.publicKey])
  const [ownerHandle, guardianHandle] = ciphertext.handles
  const previousBalanceDigest = balanceDigestOf(onChain)
  const balanceDigest = ElGamal.digest(ciphertext)
  const key = wordsOf(newKey)
  const signature = yield* Effect.tryPromise(() =>
    context.signerAccount.signTypedData({
      domain: TypedData.domain(Number(request.chainId), contract),
      types: TypedData.keyRotationTypes,
      primaryType: "KeyRotation",
      message: {
        account,
        nonce: request.nonce,
        keyX: key.x,
        keyY: key.y,
        previousBalanceDigest,
        balanceDigest,
        deadline: request.deadline
      }
    })
  ).pipe(Invariant.orDie("the guardian's local signing key signs any well-formed typed data"))
  // The account's key will change: forget the one remembered, so the next lookup reads the chain.
  forgetKnownKey(context.partyKeys, ref)
  yield* Effect.logInfo("key rotation attested").pipe(Effect.annotateLogs({ account: ref.account, nonce: request.nonce.toString() }))
  return {
    commitment: bytesToHex(ciphertext.commitment),
    ownerHandle: bytesToHex(ownerHandle!),
    guardianHandle: bytesToHex(guardianHandle!),
    previousBalanceDigest,
    balanceDigest,
    guardianSignature: signature
  }
})

/**
 * Whether a rotation's attestation reported failed can still be mined, judged at the block
 * `GUARDIAN_CONFIRMATIONS` deep (as `chainVerdict` judges a transfer's): not when its nonce is
 * used (it was mined after all, or the nonce went to another transaction), nor once the chain's
 * time is past its deadline, nor once the account's balance is no longer the one it bound (the
 * contract checks that digest, and a balance never returns to the same points). A revert for want
 * of gas, or a transaction dropped, leaves all three as they were: anyone holding its calldata can
 * still get it mined. Without an endpoint for the chain: yes (the hold lapses at its instant).
 */
const stillMinable = Effect.fnUntraced(function*(context: GuardianContext, ref: AccountRef, failed: RotationAttestation) {
  const chainId = BigInt(ref.chainId)
  if (!context.chain.knows(chainId)) return true
  const contract = getAddress(ref.contract)
  const account = getAddress(ref.account)
  const head = yield* context.chain.headAtDepth(chainId, context.timing.chainConfirmations)
  if (head.timestampSeconds > failed.deadline) return false
  if (yield* context.chain.isNonceUsed(chainId, contract, account, failed.nonce, head.blockNumber)) return false
  const onChain = yield* context.chain.encryptedBalance(chainId, contract, account, head.blockNumber)
  return balanceDigestOf(onChain) === failed.previousBalanceDigest.toLowerCase()
})

/**
 * Whether a report leaves the account's hold standing: some attestation of it can still be mined.
 * The hold's latest attestation is the one that matters: an earlier one is dead once a later one
 * is mined or dead, for the later one bound the balance current when it was made (the earlier
 * one's, or a later one: balances never return to the same points) and the hold's deadline is the
 * latest of all (twins of one nonce, a retried call, die with it). So: a mined report naming the
 * latest's nonce lifts it; any other report (failed, or mined naming an earlier one or none) lifts
 * it only if the chain shows the latest dead. A hold with no latest known (a row from before the
 * migration, or none) is judged on what the report names, as before.
 */
const holdStays = (context: GuardianContext, ref: AccountRef, request: typeof ForgetKeyRequest.Type) => {
  const latest = context.rotationsPending.get(refKeyOf(ref))?.latest
  if (latest === undefined) return request.failed === undefined ? Effect.succeed(false) : stillMinable(context, ref, request.failed)
  if (request.failed === undefined && request.nonce === latest.nonce) return Effect.succeed(false)
  return stillMinable(context, ref, latest)
}

/**
 * After a rotation was mined, or failed in a way the chain shows final: the account's remembered
 * key is forgotten (the next lookup reads the registry; D68: an agent's pin moves if the chain
 * holds its attested balance) and its hold lifted, row first. While the hold's latest attestation
 * can still be mined (`holdStays`) the hold stays: until that one is mined and reported, or the
 * chain shows it dead, or its instant (deadline plus margin) passes.
 *
 * @since 0.12.0
 * @category steps
 */
export const forgetPartyKey = (context: GuardianContext, request: typeof ForgetKeyRequest.Type) => {
  const ref = refFor(request.chainId, request.contract, request.account)
  return context.accountLane.alone(ref, Effect.gen(function*() {
    if (yield* holdStays(context, ref, request)) {
      return yield* Effect.logWarning("key rotation reported while an attestation of it can still be mined: the hold stays").pipe(
        Effect.annotateLogs({ account: ref.account, nonce: String(request.failed?.nonce ?? request.nonce) })
      )
    }
    // D68: an agent's pin moves first if its rotation was mined, then the hold is lifted.
    yield* settleRepins(context, ref)
    yield* storage(context.store.liftRotationHold(ref))
    forgetKnownKey(context.partyKeys, ref)
    context.rotationsPending.delete(refKeyOf(ref))
  }))
}

/**
 * The holds standing at start-up, read from their rows into the in-memory copy (a restart inside
 * a rotation's window keeps the account held).
 *
 * @since 0.13.0
 * @category steps
 */
export const loadRotationHolds = (context: GuardianContext) =>
  Effect.gen(function*() {
    const nowMs = yield* Clock.currentTimeMillis
    const holds = yield* context.store.rotationHolds(nowMs)
    for (const { account, hold } of holds) context.rotationsPending.set(refKeyOf(account), hold)
    if (holds.length > 0) yield* Effect.logInfo("key rotation holds restored").pipe(Effect.annotateLogs({ holds: holds.length }))
  })
