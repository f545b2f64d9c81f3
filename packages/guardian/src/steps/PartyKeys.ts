/**
 * Whose keys the guardian encrypts to: every party's encryption key is checked against the key
 * its balance is encrypted to (the chain's key registry, or the key pinned at its first use), so
 * an api tier cannot substitute a key it holds for a recipient's and read that recipient's copy.
 *
 * @since 0.5.0
 */
import { Effect } from "effect"
import { bytesToHex, getAddress } from "viem"
import type { AuthorizeRequest, GuardianError, RefusedReason } from "../Domain.ts"
import type { AccountRef } from "../internal/store.ts"
import { storage } from "./Failures.ts"
import { type GuardianContext, refFor } from "./GuardianContext.ts"

/** Registered keys remembered in memory (a key changes only by a rotation, D55, which forgets it: `forgetKnownKey`). */
const keyCacheMax = 100_000

/**
 * Keys known for good, by `chain/contract/account`: registered keys (the contract refuses a
 * second registration, so a registered key never changes) and pinned keys (never unpinned).
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
    remember(context.partyKeys, ref, pinned, "pinned")
    return pinned
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
