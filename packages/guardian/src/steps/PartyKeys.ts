/**
 * Whose keys the guardian encrypts to: every party's encryption key is checked against the key
 * its balance is encrypted to (the chain's key registry, or the key pinned at its first use), so
 * an api tier cannot substitute a key it holds for a recipient's and read that recipient's copy.
 *
 * @since 0.5.0
 */
import { Clock, Effect } from "effect"
import { bytesToHex, getAddress, keccak256 } from "viem"
import type { EncryptedBalance } from "../ChainReader.ts"
import type { AuthorizeRequest, GuardianError, RefusedReason } from "../Domain.ts"
import type { AccountRef } from "../internal/store.ts"
import { storage } from "./Failures.ts"
import { type GuardianContext, refFor } from "./GuardianContext.ts"

/** Registered keys remembered in memory (a key changes only by a rotation, D55, which forgets it: `forgetKnownKey`). */
const keyCacheMax = 100_000

/**
 * Keys known for good, by `chain/contract/account`: registered keys (the contract refuses a
 * second registration, so a registered key changes only by a rotation, which forgets it) and
 * pinned keys (never unpinned; D68: moved only by an agent's mined rotation, which forgets it).
 * Only positive answers are remembered: an unregistered account may register. Lookups under
 * way are shared: a burst of transfers to one new party reads the chain once.
 *
 * @since 0.5.0
 * @category models
 */
export interface PartyKeyCache {
  readonly known: Map<string, { readonly key: string; readonly source: "registered" | "pinned" }>
  readonly lookups: Map<string, Effect.Effect<string | undefined, GuardianError>>
}

/**
 * @since 0.5.0
 * @category constructors
 */
export const makePartyKeyCache = (): PartyKeyCache => ({ known: new Map(), lookups: new Map() })

/**
 * A party whose key the decision pins in its transaction (it has neither a pin nor a
 * registration), and the refusal if another key was pinned first.
 *
 * @since 0.5.0
 * @category models
 */
export interface KeyPin {
  readonly ref: AccountRef
  readonly key: string
  readonly refusal: RefusedReason
}

/**
 * What the key check found: the keys to pin in the decision's transaction.
 *
 * @since 0.5.0
 * @category models
 */
export interface KeyCheck {
  readonly pins: ReadonlyArray<KeyPin>
}

const refKey = (ref: AccountRef) => `${ref.chainId}/${ref.contract}/${ref.account}`

/**
 * An account's key in the guardian's in-memory maps: `chain/contract/account`.
 *
 * @since 0.12.0
 * @category constructors
 */
export const refKeyOf = refKey

/**
 * D55: a registered key can change (`rotateEncryptionKey`): the account's remembered key is
 * forgotten when its rotation is attested and again once it is mined, so the next lookup reads
 * the registry.
 *
 * @since 0.12.0
 * @category mutations
 */
export const forgetKnownKey = (cache: PartyKeyCache, ref: AccountRef): void => {
  cache.known.delete(refKey(ref))
}

const remember = (cache: PartyKeyCache, ref: AccountRef, key: string, source: "registered" | "pinned") => {
  // A crude bound: forgetting costs one read again, never correctness.
  if (cache.known.size >= keyCacheMax) cache.known.clear()
  cache.known.set(refKey(ref), { key, source })
}

/**
 * The contract's digest of a stored balance (its three points, x || y each), as a KeyRotation
 * attestation binds it.
 *
 * @since 0.14.0
 * @category digests
 */
export const storedBalanceDigest = (balance: EncryptedBalance) =>
  keccak256(new Uint8Array([...balance.commitment, ...balance.ownerHandle, ...balance.guardianHandle]))

/**
 * D68: an agent wallet's attested rotations checked against the chain. If its balance there is
 * one of their ciphertexts (fresh openings the guardian made: only that rotation, mined, puts it
 * there), the pin moves to that rotation's key; the others are dropped once they can no longer be
 * mined. The moved pin is also kept in memory (`pinsMoved`) before any hold is lifted, so a
 * decision unit that checked keys before the move refuses the old key (Decide.ts). Run alone in
 * the account's lane. Answers the pin's key when it moved.
 *
 * @since 0.14.0
 * @category steps
 */
export const settleRepins = Effect.fnUntraced(function*(context: GuardianContext, ref: AccountRef) {
  const pending = yield* storage(context.store.pendingRepins(ref))
  if (pending.length === 0) return undefined
  const chainId = BigInt(ref.chainId)
  const head = yield* context.chain.head(chainId)
  const onChain = yield* context.chain.encryptedBalance(chainId, getAddress(ref.contract), getAddress(ref.account), head.blockNumber)
  const digest = storedBalanceDigest(onChain).toLowerCase()
  const mined = pending.find((repin) => repin.balanceDigest.toLowerCase() === digest)
  yield* storage(context.store.resolveRepins(ref, mined?.newKey, yield* Clock.currentTimeMillis))
  if (mined === undefined) return undefined
  context.pinsMoved.set(refKey(ref), mined.newKey)
  forgetKnownKey(context.partyKeys, ref)
  yield* Effect.logInfo("agent key pin moved after its rotation").pipe(Effect.annotateLogs({ account: ref.account }))
  return mined.newKey
})

/**
 * The key the guardian must encrypt this party's copy to: the key pinned for the address
 * (an address with no registration, e.g. an agent, whose balance is encrypted to its
 * owner's key: the first key used for it), else its registered key on chain; undefined
 * when it has neither (the caller's key is then pinned with the reservation). A pin is
 * looked up before the registration: the balance stays encrypted to the pinned key even
 * if a key is registered for the address later.
 */
const lookUpKey = Effect.fnUntraced(function*(context: GuardianContext, ref: AccountRef) {
  const pinned = yield* storage(context.store.pinnedKey(ref))
  if (pinned !== undefined) {
    // D68: a rotation of the agent's balance may be mined with no ForgetKey heard (the server cut
    // off, the hold lapsed): the chain tells, before the pin is used again.
    const key = (yield* context.accountLane.alone(ref, settleRepins(context, ref))) ?? pinned
    remember(context.partyKeys, ref, key, "pinned")
    return key
  }
  const registered = yield* context.chain.encryptionKeyOf(BigInt(ref.chainId), getAddress(ref.contract), getAddress(ref.account))
  if (registered === undefined) return undefined
  const key = bytesToHex(registered).toLowerCase()
  remember(context.partyKeys, ref, key, "registered")
  return key
})

/** The key `ref`'s balance is encrypted to, from memory, or one shared lookup. */
const expectedKeyOf = (context: GuardianContext, ref: AccountRef): Effect.Effect<string | undefined, GuardianError> =>
  Effect.suspend(() => {
    const { known, lookups } = context.partyKeys
    const id = refKey(ref)
    const cached = known.get(id)
    if (cached !== undefined) return Effect.succeed(cached.key)
    const running = lookups.get(id)
    if (running !== undefined) return running
    const lookup = lookUpKey(context, ref).pipe(Effect.ensuring(Effect.sync(() => lookups.delete(id))))
    return Effect.flatMap(Effect.cached(lookup), (shared) => {
      lookups.set(id, shared)
      return shared
    })
  })

/**
 * Checks `fromKey` and `toKey` against the keys the parties' balances are encrypted to.
 * Without an endpoint for the chain the guardian cannot tell and checks nothing
 * (docs/guardian.md).
 *
 * @since 0.5.0
 * @category steps
 */
export const checkKeys = Effect.fnUntraced(function*(context: GuardianContext, request: AuthorizeRequest) {
  if (!context.chain.knows(request.chainId)) return { pins: [] } satisfies KeyCheck
  const parties: Array<KeyPin> = [
    { ref: refFor(request.chainId, request.contract, request.from), key: request.fromKey.toLowerCase(), refusal: "sender_key_not_registered" }
  ]
  if (request.toKey !== undefined) {
    parties.push({ ref: refFor(request.chainId, request.contract, request.to), key: request.toKey.toLowerCase(), refusal: "recipient_key_not_registered" })
  }
  const pins: Array<KeyPin> = []
  for (const party of parties) {
    const expected = yield* expectedKeyOf(context, party.ref)
    if (expected === undefined) pins.push(party)
    else if (expected !== party.key) return party.refusal
  }
  return { pins } satisfies KeyCheck
})

/**
 * D68: the refusal for a request naming an agent wallet whose pin moved (in this process) to
 * another key than the request's: read in the decision unit, so a decision whose keys were checked
 * before the move, and which runs after the rotation's hold was lifted, still refuses the old key.
 *
 * @since 0.14.0
 * @category steps
 */
export const pinMovedAway = (context: GuardianContext, request: AuthorizeRequest): RefusedReason | undefined => {
  if (context.pinsMoved.size === 0) return undefined
  const movedFrom = context.pinsMoved.get(refKey(refFor(request.chainId, request.contract, request.from)))
  if (movedFrom !== undefined && movedFrom !== request.fromKey.toLowerCase()) return "sender_key_not_registered"
  if (request.toKey === undefined) return undefined
  const movedTo = context.pinsMoved.get(refKey(refFor(request.chainId, request.contract, request.to)))
  return movedTo !== undefined && movedTo !== request.toKey.toLowerCase() ? "recipient_key_not_registered" : undefined
}
