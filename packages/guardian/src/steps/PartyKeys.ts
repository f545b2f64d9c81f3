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
 * Keys known for good, by `chain/contract/account`: registered keys (changed only by a rotation,
 * D55, which forgets them) and pinned keys (moved only by an agent's mined rotation, D68,
 * which forgets them). Only positive answers are remembered: an unregistered account may
 * register. Lookups under way are shared: a burst of transfers to one new party reads the chain
 * once.
 *
 * `generations` tells a lookup or a key check that a forget overtook it: every forget takes the
 * next generation and records it against its party; what started under an earlier generation
 * than its party's last forget is stale. A lookup that read the registry before a rotation and
 * finishes after its forget would otherwise remember the old key for good. `floor`: the records
 * are cleared past their bound, and then whatever started before counts as forgotten.
 *
 * @since 0.5.0
 * @category models
 */
export interface PartyKeyCache {
  readonly known: Map<string, { readonly key: string; readonly source: "registered" | "pinned" }>
  readonly lookups: Map<string, Effect.Effect<string | undefined, GuardianError>>
  readonly generations: { current: number; floor: number; readonly forgotten: Map<string, number> }
}

/**
 * @since 0.5.0
 * @category constructors
 */
export const makePartyKeyCache = (): PartyKeyCache => ({
  known: new Map(),
  lookups: new Map(),
  generations: { current: 0, floor: 0, forgotten: new Map() }
})

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
 * What the key check found: the keys to pin in the decision's transaction, and the generation it
 * started under (a forget of a party since makes it stale: `keysForgottenSince`).
 *
 * @since 0.5.0
 * @category models
 */
export interface KeyCheck {
  readonly pins: ReadonlyArray<KeyPin>
  readonly generation: number
}

/**
 * A key check of nothing (a request refused before its keys matter), under the current generation.
 *
 * @since 0.13.0
 * @category constructors
 */
export const noKeyCheck = (cache: PartyKeyCache): KeyCheck => ({ pins: [], generation: cache.generations.current })

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
 * the registry. A lookup under way is no longer shared, and neither it nor a key check that
 * started before this forget counts (the next generation, recorded against the account).
 *
 * @since 0.12.0
 * @category mutations
 */
export const forgetKnownKey = (cache: PartyKeyCache, ref: AccountRef): void => {
  const id = refKey(ref)
  const { generations } = cache
  // A crude bound, as for the keys: past it, everything under way counts as forgotten.
  if (generations.forgotten.size >= keyCacheMax) {
    generations.forgotten.clear()
    generations.floor = generations.current + 1
  }
  generations.current += 1
  generations.forgotten.set(id, generations.current)
  cache.known.delete(id)
  cache.lookups.delete(id)
}

/** Whether `id`'s key was forgotten after `generation` began. */
const forgottenSince = (cache: PartyKeyCache, id: string, generation: number): boolean =>
  generation < cache.generations.floor || (cache.generations.forgotten.get(id) ?? 0) > generation

/**
 * Whether a party's key was forgotten since the key check under `generation` started: a
 * rotation overtook it, and the keys it checked may be the old ones. The decision unit asks,
 * beside the rotation's hold (Decide.ts), and decides nothing then (a retry checks afresh).
 *
 * @since 0.13.0
 * @category steps
 */
export const keysForgottenSince = (
  cache: PartyKeyCache,
  request: { readonly chainId: bigint; readonly contract: string; readonly from: string; readonly to: string },
  generation: number
): boolean =>
  cache.generations.forgotten.size + cache.generations.floor > 0 &&
  [request.from, request.to].some((party) => forgottenSince(cache, refKey(refFor(request.chainId, request.contract, party)), generation))

const remember = (cache: PartyKeyCache, ref: AccountRef, found: { readonly key: string; readonly source: "registered" | "pinned" }) => {
  // A crude bound: forgetting costs one read again, never correctness.
  if (cache.known.size >= keyCacheMax) cache.known.clear()
  cache.known.set(refKey(ref), found)
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
 * D68: what tells an agent's rotation mined: the digest of its owner's and guardian's handles,
 * fresh points the guardian made for that attestation. A `shield` to the agent (anyone may send
 * one) adds to the commitment only, and a transfer, which adds to the handles, waits for the hold
 * and then for the lookup that settles first (`lookUpKey`); so the handles stay the attested ones
 * until the pin has moved.
 *
 * @since 0.14.0
 * @category digests
 */
export const repinHandlesDigest = (ownerHandle: Uint8Array, guardianHandle: Uint8Array) =>
  keccak256(new Uint8Array([...ownerHandle, ...guardianHandle])).toLowerCase()

/**
 * D68: an agent wallet's attested rotations checked against the chain. If its handles there are
 * one of theirs (`repinHandlesDigest`: only that rotation, mined, puts them there), the pin moves
 * to that rotation's key; the others are dropped once they can no longer be mined. The move
 * forgets the remembered key (`forgetKnownKey`) before any hold is lifted, so a decision whose
 * keys were checked before it is stale in its unit (`keysForgottenSince`, Decide.ts). Run alone
 * in the account's lane. Answers the pin's key when it moved.
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
  const digest = repinHandlesDigest(onChain.ownerHandle, onChain.guardianHandle)
  const mined = pending.find((repin) => repin.handlesDigest.toLowerCase() === digest)
  yield* storage(context.store.resolveRepins(ref, mined?.newKey, yield* Clock.currentTimeMillis))
  if (mined === undefined) return undefined
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
    const moved = yield* context.accountLane.alone(ref, settleRepins(context, ref))
    return { key: moved ?? pinned, source: "pinned" as const }
  }
  const registered = yield* context.chain.encryptionKeyOf(BigInt(ref.chainId), getAddress(ref.contract), getAddress(ref.account))
  return registered === undefined ? undefined : { key: bytesToHex(registered).toLowerCase(), source: "registered" as const }
})

/**
 * The key `ref`'s balance is encrypted to, from memory, or one shared `lookup`, whose answer is
 * remembered only if no forget of `ref` overtook it (`generations`).
 *
 * @since 0.13.0
 * @category steps
 */
export const cachedKeyOf = (
  cache: PartyKeyCache,
  ref: AccountRef,
  lookup: Effect.Effect<{ readonly key: string; readonly source: "registered" | "pinned" } | undefined, GuardianError>
): Effect.Effect<string | undefined, GuardianError> =>
  Effect.suspend(() => {
    const { known, lookups } = cache
    const id = refKey(ref)
    const cached = known.get(id)
    if (cached !== undefined) return Effect.succeed(cached.key)
    const running = lookups.get(id)
    if (running !== undefined) return running
    const startedUnder = cache.generations.current
    const remembered = lookup.pipe(Effect.map((found) => {
      if (found !== undefined && !forgottenSince(cache, id, startedUnder)) remember(cache, ref, found)
      return found?.key
    }))
    return Effect.flatMap(Effect.cached(remembered), (shared) => {
      // A forget drops the entry; a lookup started after it may have put its own there since.
      const settled = shared.pipe(Effect.ensuring(Effect.sync(() => {
        if (lookups.get(id) === settled) lookups.delete(id)
      })))
      lookups.set(id, settled)
      return settled
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
  const generation = context.partyKeys.generations.current
  if (!context.chain.knows(request.chainId)) return { pins: [], generation } satisfies KeyCheck
  const parties: Array<KeyPin> = [
    { ref: refFor(request.chainId, request.contract, request.from), key: request.fromKey.toLowerCase(), refusal: "sender_key_not_registered" }
  ]
  if (request.toKey !== undefined) {
    parties.push({ ref: refFor(request.chainId, request.contract, request.to), key: request.toKey.toLowerCase(), refusal: "recipient_key_not_registered" })
  }
  const pins: Array<KeyPin> = []
  for (const party of parties) {
    const expected = yield* cachedKeyOf(context.partyKeys, party.ref, lookUpKey(context, party.ref))
    if (expected === undefined) pins.push(party)
    else if (expected !== party.key) return party.refusal
  }
  return { pins, generation } satisfies KeyCheck
})
