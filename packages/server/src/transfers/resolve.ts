/**
 * Step 1, resolve: the rules that need no amount, shared by create and prepare, in D37's order:
 * the asset, KYC (D11: an agent's is its owner's), the mode's chain (D9), an agent's amount-free
 * policy (D25) before anything is said about the recipient (unknown, 404; not confidential-ready,
 * 422; a transfer to oneself, 400), then both parties' keys (an agent's amounts are encrypted to
 * its owner's key).
 *
 * @since 0.1.0
 */
import { Clock, Effect, Exit, Option } from "effect"
import { type Address, bytesToHex, getAddress } from "viem"
import { amountFreeViolation, policySnapshot } from "@pps/api/Agents"
import { type Account, displayHandle, isKycSufficient } from "@pps/api/Accounts"
import type { Principal } from "@pps/api/ApiKeys"
import {
  EncryptionKeyRequired,
  InvalidRequest,
  KycRequired,
  LivemodeUnavailable,
  PolicyViolation,
  RecipientNotConfidentialReady,
  RecipientNotFound
} from "@pps/api/Errors"
import { type Asset, assets, parseRecipient, type RecipientRef } from "@pps/api/Transfers"
import * as Invariant from "../platform/Invariant.ts"
import * as Unavailable from "../platform/Unavailable.ts"
import { type ChainContext, confidentialTokenOf } from "../settlement/Chains.ts"
import type { Recipient, TransfersContext } from "./context.ts"

/**
 * The request's asset (USDG unless named).
 *
 * @since 0.1.0
 */
export const assetOf = (name: string | undefined) =>
  (name ?? "USDG") in assets
    ? Effect.succeed((name ?? "USDG") as Asset)
    : Effect.fail(InvalidRequest.of("`asset` must be USDG or ETH.", { param: "asset" }))

/**
 * The account whose KYC and key stand for this one (D11: agents inherit their owner's).
 *
 * @since 0.1.0
 */
export const principalOf = (context: TransfersContext, account: Account) =>
  account.ownerAccountId === null
    ? Effect.succeed(account)
    : context.accounts.get(account.ownerAccountId).pipe(
      Unavailable.database("Transfers.resolve"),
      Effect.flatMap(Invariant.some("an agent's owner account exists (an agent is created under its owner)"))
    )

/**
 * The names an agent's recipient rules match: a handle and an address, or an address.
 *
 * @since 0.1.0
 */
export const namesOf = (recipient: { readonly account: Account | null; readonly address: Address }) =>
  recipient.account === null ? [recipient.address.toLowerCase()] : [recipient.account.handle, recipient.address.toLowerCase()]

/**
 * D25's amount-free rules with the policy in force now; the snapshot for the guardian.
 *
 * @since 0.1.0
 */
export const checkPolicy = Effect.fnUntraced(function*(
  context: TransfersContext,
  agentAccountId: string,
  attempt: {
    readonly asset: Asset
    readonly recipientNames: ReadonlyArray<string>
    readonly activeHoursAtMs: number | null
  }
) {
  const policy = yield* context.agentStore.policyOf(agentAccountId).pipe(
    Unavailable.database("Transfers.checkPolicy"),
    Effect.flatMap(Invariant.some("every agent has a policy (written with the agent, in one SQL transaction)"))
  )
  const violation = amountFreeViolation(policy, attempt)
  if (violation !== undefined) return yield* Effect.fail(PolicyViolation.of(violation))
  return policySnapshot(policy, attempt.asset)
})

/** A chain read a step needed and did not get (a node down, a timeout): 503, retry later. */
const chainUnavailable = (operation: string) => (error: { readonly message: string }) =>
  new Unavailable.DependencyUnavailable({ dependency: "chain", operation, retryable: true, detail: error.message })

/**
 * The key a party's amounts are encrypted to now: for one of our accounts its key holder's (an
 * agent's owner's, D11), as registered; for an outside address the chain registry's. A rotation
 * (D55) changes it, so an approval reads it again rather than reuse the key its hold was made with.
 *
 * @since 0.12.0
 */
export const partyKeyOf = (
  context: TransfersContext,
  chain: ChainContext,
  account: Account | null,
  address: string,
  operation: string
): Effect.Effect<Option.Option<Uint8Array>, Unavailable.DependencyUnavailable> =>
  account === null
    ? context.keys.keyOfAddress(chain, getAddress(address)).pipe(Effect.mapError(chainUnavailable(operation)))
    : principalOf(context, account).pipe(
      Effect.flatMap((holder) => context.keys.keyOfAccount(holder.accountId, chain.mode)),
      Unavailable.database(operation)
    )

/**
 * The account `to` names, if any (by handle, or by wallet address), read beside the sender's
 * (`resolveParties`): as an `Exit`, so that a failed read is told at its place in D37's order,
 * not before the sender's rules.
 *
 * @since 0.16.0
 */
export const recipientAccountOf = (context: TransfersContext, ref: RecipientRef | undefined) =>
  ref === undefined
    ? Effect.succeed(Exit.succeed(Option.none<Account>()))
    : Effect.exit(
      (ref._tag === "Handle" ? context.accounts.findByHandle(ref.handle) : context.accounts.findByWalletAddress(ref.address)).pipe(
        Unavailable.database("Transfers.resolveRecipient")
      )
    )

/**
 * The recipient of `to`: one of our accounts (by handle or address, as `recipientAccountOf` read
 * it) with its key holder's key, or an outside address with the key the chain's registry holds
 * for it.
 *
 * @since 0.1.0
 */
export const resolveRecipient = Effect.fnUntraced(function*(
  context: TransfersContext,
  chain: ChainContext,
  sender: Account,
  ref: RecipientRef | undefined,
  read: Exit.Exit<Option.Option<Account>, Unavailable.DependencyUnavailable>
) {
  if (ref === undefined) {
    return yield* Effect.fail(InvalidRequest.of("`to` must be an @handle or a 0x address.", { param: "to" }))
  }
  const account = yield* read
  if (ref._tag === "Handle" && Option.isNone(account)) return yield* Effect.fail(RecipientNotFound.of())
  // D38: an agent of the other mode is unknown to this key.
  if (ref._tag === "Handle" && Option.isSome(account) && account.value.type === "agent") {
    const inMode = yield* context.agentStore.findInMode(account.value.accountId, chain.mode).pipe(
      Unavailable.database("Transfers.resolveRecipient")
    )
    if (Option.isNone(inMode)) return yield* Effect.fail(RecipientNotFound.of())
  }
  if (Option.isSome(account)) {
    if (account.value.accountId === sender.accountId) {
      return yield* Effect.fail(InvalidRequest.of("A transfer to yourself is not allowed.", { param: "to" }))
    }
    const key = yield* partyKeyOf(context, chain, account.value, account.value.walletAddress, "Transfers.resolveRecipient")
    return {
      account: account.value,
      address: getAddress(account.value.walletAddress),
      display: ref._tag === "Handle" ? displayHandle(account.value.handle) : getAddress(ref.address),
      key
    } satisfies Recipient
  }
  const address = getAddress((ref as { readonly address: Address }).address)
  const key = yield* partyKeyOf(context, chain, null, address, "Transfers.resolveRecipient")
  return { account: null, address, display: address, key } satisfies Recipient
})

/**
 * Step 1's rules for a sender, a recipient and an asset: the parties as resolved, with the
 * mode's chain and the token contract.
 *
 * @since 0.1.0
 */
export const resolveParties = Effect.fnUntraced(function*(
  context: TransfersContext,
  principal: Principal,
  to: string,
  asset: Asset,
  confidential: boolean
) {
  // Both parties' rows at once: the account store answers the two in one SELECT.
  const ref = parseRecipient(to)
  const [senderRead, recipientRead] = yield* Effect.all([
    context.accounts.get(principal.accountId).pipe(Unavailable.database("Transfers.resolve")),
    recipientAccountOf(context, ref)
  ], { concurrency: "unbounded" })
  const sender = yield* Invariant.some("an authenticated principal's account exists")(senderRead)
  const senderPrincipal = yield* principalOf(context, sender)
  if (!isKycSufficient(senderPrincipal.kycStatus)) return yield* Effect.fail(KycRequired.of())
  const chain = yield* Option.match(context.settlement.chain(principal.mode), {
    onNone: () => Effect.fail(LivemodeUnavailable.of()),
    onSome: Effect.succeed
  })
  const isAgent = sender.ownerAccountId !== null
  // Checked again, with the policy in force then, in the agent's lane.
  const policyFirst = (recipientNames: ReadonlyArray<string>) =>
    isAgent
      ? Clock.currentTimeMillis.pipe(
        Effect.flatMap((nowMs) => checkPolicy(context, sender.accountId, { asset, recipientNames, activeHoursAtMs: nowMs }))
      )
      : Effect.void
  const recipient = yield* resolveRecipient(context, chain, sender, ref, recipientRead).pipe(
    Effect.tapError((error) =>
      error._tag === "RecipientNotFound" && ref?._tag === "Handle" ? policyFirst([ref.handle]) : Effect.void
    )
  )
  yield* policyFirst(namesOf(recipient))
  if (confidential && Option.isNone(recipient.key)) return yield* Effect.fail(RecipientNotConfidentialReady.of())
  const senderKey = yield* partyKeyOf(context, chain, senderPrincipal, sender.walletAddress, "Transfers.resolve")
  if (Option.isNone(senderKey)) return yield* Effect.fail(EncryptionKeyRequired.of())
  return { sender, isAgent, chain, recipient, senderKey: senderKey.value, contract: confidentialTokenOf(chain, asset) }
})

/**
 * The parties of a transfer as step 1 resolved them.
 *
 * @since 0.1.0
 * @category models
 */
export type Parties = Effect.Success<ReturnType<typeof resolveParties>>

/**
 * What a prepared transfer's token is bound to, from the parties resolved now (preparation.ts).
 * Only for a confidential transfer: `resolveParties` refused one whose recipient has no key.
 *
 * @since 0.1.0
 */
export const preparationFactsOf = (principal: Principal, asset: Asset, parties: Parties, transferId: string) =>
  Invariant.some("a confidential transfer's recipient has a key (resolveParties refuses it otherwise)")(
    parties.recipient.key
  ).pipe(Effect.map((recipientKey) => ({
    transferId,
    senderAccountId: parties.sender.accountId,
    mode: principal.mode,
    asset,
    recipientAddress: parties.recipient.address,
    senderKey: bytesToHex(parties.senderKey),
    recipientKey: bytesToHex(recipientKey)
  })))
